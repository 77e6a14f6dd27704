# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# sluice build. `make` only builds; `make test`, `make demo` and `make bench` first install the
# Debian packages they need (tools/install-deps.sh, a no-op when all are present).
BUILD      ?= build
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= bpftool
ARCH_INC   := /usr/include/$(shell $(CC) -dumpmachine)
WERROR     ?= -Werror

CFLAGS     ?= -O2 -g -Wall -Wextra -Wno-unused-parameter
CFLAGS     += $(WERROR) -std=gnu11 -MMD -MP -Iinclude -Iuser -I$(BUILD)
BPF_CFLAGS := -O2 -g -target bpf -mcpu=v3 -Wall $(WERROR) -Iinclude -Ibpf -I$(ARCH_INC)
LIBS       := -lbpf -lelf -lz -lyaml -ljansson -lmicrohttpd -lm

BPF_SRCS   := $(wildcard bpf/*.bpf.c)
SKELS      := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

# user/ in layers (docs/ARCHITECTURE.md); every .c but the two mains goes into libsluice.a,
# which both binaries, the tests and the benchmarks link.
LAYERS     := common control kernel ops daemon cli
MAINS      := user/daemon/sluiced.c user/cli/sluicectl.c
USER_SRCS  := $(foreach l,$(LAYERS),$(wildcard user/$l/*.c))
LIB_OBJS   := $(patsubst user/%.c,$(BUILD)/user/%.o,$(filter-out $(MAINS),$(USER_SRCS)))
LIB        := $(BUILD)/libsluice.a
BINS       := $(BUILD)/sluiced $(BUILD)/sluicectl

# Each tool is a folder tools/NAME/ of .c files built into $(BUILD)/tools/NAME.
TOOL_BINS  := $(patsubst tools/%/main.c,$(BUILD)/tools/%,$(wildcard tools/*/main.c))
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
BPFT_BINS  := $(patsubst tests/bpf/%.c,$(BUILD)/tests/%,$(wildcard tests/bpf/test_*.c))
LAYOUT_DRILL := $(BUILD)/tests/layout_drill/sluiced $(BUILD)/tests/layout_drill/sluicectl
E2E_OBJS   := $(BUILD)/tests/xdp_pass.bpf.o $(BUILD)/tests/xdp_drop.bpf.o \
              $(BUILD)/tests/tc_count.bpf.o $(BUILD)/tests/tc_vlan.bpf.o $(LAYOUT_DRILL)
BENCH_BINS := $(BUILD)/bench/bench_pktcost $(BUILD)/bench/bench_tick $(BUILD)/bench/bench_daemon \
              $(BUILD)/bench/empty_xdp.bpf.o $(BUILD)/bench/bench_inflight $(BUILD)/bench/jitlines \
              $(BUILD)/bench/qdelay
FUZZ_PARSERS := config switches plan budget
FUZZ_PARSER_BINS := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_PARSERS))
FUZZ_BINS  := $(BUILD)/fuzz/fuzz_datapath $(FUZZ_PARSER_BINS)
TEST_ALL   := $(BINS) $(TOOL_BINS) $(UNIT_BINS) $(BPFT_BINS) $(E2E_OBJS) $(BENCH_BINS) $(FUZZ_BINS)

.PHONY: all deps deps-check test test-build demo bench fuzz san clean
.SECONDARY:
.DELETE_ON_ERROR:
all: $(BINS) $(TOOL_BINS)

deps:
	@tools/install-deps.sh

deps-check:
	@tools/install-deps.sh --quiet

# ---- BPF: objects and the skeletons userspace embeds
$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

# ---- userspace: one pattern rule for every layer folder; headers tracked by -MMD
$(BUILD)/user/%.o: user/%.c | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@rm -f $@   # ar keeps members of files that no longer exist
	$(AR) rcs $@ $^

$(BUILD)/sluiced: $(BUILD)/user/daemon/sluiced.o $(LIB)
$(BUILD)/sluicectl: $(BUILD)/user/cli/sluicectl.o $(LIB)
$(BINS):
	$(CC) $(CFLAGS) $^ $(LIBS) -o $@

.SECONDEXPANSION:
$(TOOL_BINS): $(BUILD)/tools/%: $$(wildcard tools/%/*.c) $$(wildcard tools/%/*.h) $(wildcard tools/common/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(filter %.c,$^) -lpthread -lm -o $@

# ---- tests and benchmarks
$(BUILD)/tests/%: tests/unit/%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< $(LIB) $(LIBS) -lcmocka -o $@

# The frame parse is plain C over [data, data_end): its unit test compiles the BPF header as is.
$(BUILD)/tests/test_parse: CFLAGS += -Ibpf -Itests/bpf -Wno-unknown-pragmas -Wno-unused-function

$(BUILD)/tests/%: tests/bpf/%.c $(LIB) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/bpf $< $(LIB) $(LIBS) -lcmocka -o $@

# The data path built with its test hooks (tests/bpf/hooks.h): the ownership suite plays
# interleavings out at named points of the programs.
$(BUILD)/sluice_hooks.bpf.o: bpf/sluice.bpf.c tests/bpf/hooks.h $(wildcard bpf/*.h) $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -DSLUICE_TEST_HOOKS -Itests/bpf -c $< -o $@
$(BUILD)/tests/test_ownership: $(BUILD)/sluice_hooks.skel.h $(BUILD)/inflight_unit.skel.h

# Test plumbing for the end-to-end tests (see the sources): pass-through XDP for the client
# end of test veths, a counting TC filter to run beside sluice's, VLAN 100 at TC; and for the
# refusal bench's raw SYN flood, an XDP program that drops what comes back to the client.
$(BUILD)/tests/%.bpf.o: tests/e2e/%.bpf.c
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

# sluiced and sluicectl built to claim the next map layout version with today's structs and to migrate from
# today's by copying every map (user/kernel/layout.c): the end-to-end test drives a migration.
$(BUILD)/tests/layout_drill/layout.o: user/kernel/layout.c | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DSLUICE_LAYOUT_DRILL -c $< -o $@

$(BUILD)/tests/layout_drill/sluiced: $(BUILD)/user/daemon/sluiced.o
$(BUILD)/tests/layout_drill/sluicectl: $(BUILD)/user/cli/sluicectl.o
$(LAYOUT_DRILL): $(BUILD)/tests/layout_drill/layout.o $(LIB)
	$(CC) $(CFLAGS) $(filter-out $(LIB),$^) $(LIB) $(LIBS) -o $@

$(BUILD)/bench/empty_xdp.bpf.o: tests/bpf/empty_xdp.bpf.c tests/bpf/stream_ctl.h
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -Itests/bpf -c $< -o $@

$(BUILD)/bench/bench_pktcost: tests/bpf/bench_pktcost.c $(LIB) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/bpf $< $(LIB) $(LIBS) -o $@

# Source lines of a loaded program's JIT image, for tests/bench/pktprof.sh.
$(BUILD)/bench/jitlines: tests/bench/jitlines.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -lbpf -o $@

# The in-flight accounting alone (bpf/admit.h), for its contention benchmark.
$(BUILD)/inflight_unit.bpf.o: tests/bpf/inflight_unit.bpf.c $(wildcard bpf/*.h) $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/bench/bench_inflight: tests/bpf/bench_inflight.c $(BUILD)/inflight_unit.skel.h $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/bpf $< $(LIB) $(LIBS) -lpthread -o $@

# sluiced's tick on the real programs (tests/bpf/scale.h sets them up).
$(BUILD)/bench/bench_daemon: tests/bench/bench_daemon.c tests/bpf/scale.h $(LIB) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/bpf $< $(LIB) $(LIBS) -o $@

# An experiment beside a running sluiced (tests/bench/qdelay.bpf.c): how long requests wait
# before the server first reads them. Built by `make bench`; tests/bench/qdelay-knee.sh runs it.
$(BUILD)/bench/qdelay.bpf.o: tests/bench/qdelay.bpf.c $(wildcard include/*.h) bpf/sock_fields.h
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@
$(BUILD)/bench/qdelay.skel.h: $(BUILD)/bench/qdelay.bpf.o
	$(BPFTOOL) gen skeleton $< name qdelay_bpf > $@
$(BUILD)/bench/qdelay: tests/bench/qdelay.c $(BUILD)/bench/qdelay.skel.h
	$(CC) $(CFLAGS) -I$(BUILD)/bench $< -lbpf -lelf -lz -lm -o $@

# The pure controller compiled into one unit (see the source); only jansson is linked.
$(BUILD)/bench/bench_tick: tests/bench/bench_tick.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -ljansson -lm -o $@

# ---- fuzzing: tests/fuzz/run.sh (make test runs a short smoke of the same through
# tests/unit/test_fuzz_smoke.sh)
$(BUILD)/fuzz/fuzz_datapath: tests/fuzz/fuzz_datapath.c $(LIB) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/bpf $< $(LIB) $(LIBS) -o $@

# The parsers' libFuzzer harnesses: userspace rebuilt by clang with coverage and ASan.
FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer-no-link,address -std=gnu11 -Iinclude -Iuser -I$(BUILD)
FUZZ_OBJS  := $(patsubst user/%.c,$(BUILD)/fuzz/user/%.o,$(filter-out $(MAINS),$(USER_SRCS)))
$(BUILD)/fuzz/user/%.o: user/%.c | $(SKELS)
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/fuzz/libsluice-fuzz.a: $(FUZZ_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^
$(FUZZ_PARSER_BINS): $(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_parsers.c $(BUILD)/fuzz/libsluice-fuzz.a
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer -DFUZZ_PARSER=$* $^ $(LIBS) -o $@

fuzz: deps-check $(FUZZ_BINS)
	@tests/fuzz/run.sh $(BUILD)

# A test binary whose source is gone (renamed or removed) would still run as a suite: drop it.
# The build is half of a CI run's fixed cost when serial (70 s against 38 s on 2 CPUs): `make
# test` builds with one job per CPU, then runs the suites one after another (their load and
# latency checks assume they have the host to themselves).
NPROC      := $(shell nproc 2>/dev/null || echo 1)
test-build: $(TEST_ALL)
test: deps-check
	@$(MAKE) --no-print-directory -j$(NPROC) test-build
	@for t in $(BUILD)/tests/test_*; do \
		case " $(UNIT_BINS) $(BPFT_BINS) " in *" $$t "*) ;; \
		*) [ -f "$$t" ] && [ -x "$$t" ] && rm -f "$$t" || true ;; esac; \
	done
	@tests/run.sh $(BUILD)

demo: deps-check $(BINS) $(TOOL_BINS) $(E2E_OBJS)
	@tools/demo.sh $(BUILD)

bench: deps-check $(TEST_ALL)
	@tools/bench.sh $(BUILD)

# Per-packet cost of every data-path path over an empty program (tests/bpf/bench_pktcost.c).
# The unit and BPF_PROG_TEST_RUN suites under AddressSanitizer and UBSan, in their own build
# folder (tests/san.sh; 3-4 minutes on 2 CPUs): not part of `make test`.
san: deps-check
	tests/san.sh $(BUILD)-san

.PHONY: pktcost
pktcost: $(BUILD)/bench/bench_pktcost $(BUILD)/bench/empty_xdp.bpf.o
	@$(BUILD)/bench/bench_pktcost $(BUILD)/bench/empty_xdp.bpf.o

clean:
	rm -rf $(BUILD) $(BUILD)-san

# ---- container image: deploy/Dockerfile built with buildah (tools/image.sh, docs/DEPLOY.md);
# image-test runs only the image's end-to-end test (make test runs it too).
.PHONY: image image-test
image:
	@tools/image.sh $(BUILD)
image-test: deps-check $(BINS) $(TOOL_BINS) $(E2E_OBJS)
	@tests/run.sh $(BUILD) test_image

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
