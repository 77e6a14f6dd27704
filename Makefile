# sluice build. `make test` and `make demo` are the two commands of the README; both install
# the Debian packages they need first (tools/install-deps.sh, a no-op when all are present).
BUILD      ?= build
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= bpftool
ARCH_INC   := /usr/include/$(shell $(CC) -dumpmachine)

CFLAGS     ?= -O2 -g -Wall -Wextra -Wno-unused-parameter
CFLAGS     += -std=gnu11 -Iinclude -Iuser -I$(BUILD)
BPF_CFLAGS := -O2 -g -target bpf -mcpu=v3 -Wall -Iinclude -Ibpf -I$(ARCH_INC)
LIBS       := -lbpf -lelf -lz -lyaml -lmicrohttpd -lm

BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
SKELS      := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

# Every user/*.c except the two mains is the library both binaries (and the tests) link.
MAINS      := user/sluiced.c user/sluicectl.c
LIB_SRCS   := $(filter-out $(MAINS),$(wildcard user/*.c))
LIB_OBJS   := $(patsubst user/%.c,$(BUILD)/user/%.o,$(LIB_SRCS))
LIB        := $(BUILD)/libsluice.a

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
BPFT_SRCS  := $(wildcard tests/bpf/test_*.c)
BPFT_BINS  := $(patsubst tests/bpf/%.c,$(BUILD)/tests/%,$(BPFT_SRCS))
TOOL_SRCS  := $(wildcard tools/*.c)
TOOL_BINS  := $(patsubst tools/%.c,$(BUILD)/tools/%,$(TOOL_SRCS))

BINS       := $(BUILD)/sluiced $(BUILD)/sluicectl

.PHONY: all deps deps-check test demo bench clean
.SECONDARY:
all: deps-check $(BINS) $(TOOL_BINS)

deps:
	@tools/install-deps.sh

deps-check:
	@tools/install-deps.sh --quiet

$(BUILD) $(BUILD)/user $(BUILD)/tests $(BUILD)/tools:
	@mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) include/sluice.h | $(BUILD)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

$(BUILD)/user/%.o: user/%.c $(wildcard user/*.h) include/sluice.h $(SKELS) | $(BUILD)/user
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@rm -f $@   # ar keeps members of files that no longer exist
	$(AR) rcs $@ $^

$(BUILD)/sluiced: user/sluiced.c $(LIB) $(SKELS)
	$(CC) $(CFLAGS) $< $(LIB) $(LIBS) -o $@

$(BUILD)/sluicectl: user/sluicectl.c $(LIB) $(SKELS)
	$(CC) $(CFLAGS) $< $(LIB) $(LIBS) -o $@

$(BUILD)/tests/%: tests/unit/%.c $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) $< $(LIB) $(LIBS) -lcmocka -o $@

$(BUILD)/tests/%: tests/bpf/%.c $(LIB) $(SKELS) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Itests/bpf $< $(LIB) $(LIBS) -lcmocka -o $@

$(BUILD)/tools/%: tools/%.c | $(BUILD)/tools
	$(CC) $(CFLAGS) $< -lpthread -lm -o $@

# Test plumbing: pass-through XDP for the client end of test veths (see the source).
$(BUILD)/tests/xdp_pass.bpf.o: tests/e2e/xdp_pass.bpf.c | $(BUILD)/tests
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

E2E_OBJS   := $(BUILD)/tests/xdp_pass.bpf.o

test: deps-check $(BINS) $(TOOL_BINS) $(UNIT_BINS) $(BPFT_BINS) $(E2E_OBJS)
	@tests/run.sh $(BUILD)

demo: deps-check $(BINS) $(TOOL_BINS) $(E2E_OBJS)
	@tools/demo.sh $(BUILD)

bench: deps-check $(BINS) $(TOOL_BINS) $(E2E_OBJS) $(BUILD)/bench/bench_pktcost $(BUILD)/bench/bench_tick $(BUILD)/bench/empty_xdp.bpf.o
	@tools/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD)
