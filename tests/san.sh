#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The unit suites and the BPF_PROG_TEST_RUN suites built with AddressSanitizer and
# UndefinedBehaviorSanitizer, then run once through tests/run.sh: an access out of bounds, a
# use after free, a signed overflow, a shift past the width or a float cast out of range stops
# its suite with the sanitizer's report, which counts as a failure. Not part of `make test`:
# the sanitized build and its run take 3-4 minutes on 2 CPUs, and make test already takes
# nearly 10. Run it (`make san`) after a change to user/ or to the tests.
#   tests/san.sh [BUILD_DIR] [SUITE_FILTER]     (default build-san)
set -euo pipefail
BUILD=${1:-build-san}
FILTER=${2:-}
# alignment: the tests build packets in byte buffers and read their headers in place, as the
# kernel does; that is not what is looked for here.
export CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
-fno-sanitize-recover=undefined -fsanitize=float-cast-overflow -fno-sanitize=alignment \
-Wall -Wextra -Wno-unused-parameter"
bins=$(make -s --no-print-directory -f Makefile -f <(printf 'san-bins:\n\t@echo $(UNIT_BINS) $(BPFT_BINS) $(BINS)\n') \
	BUILD="$BUILD" san-bins)
# WERROR off: -O1 makes gcc's truncation warnings see other paths than -O2 does
make -s --no-print-directory BUILD="$BUILD" WERROR= $bins
# Leaks are not what this run looks for: test fixtures parse configs they never free, and a
# process's exit leaves the rest to the kernel (a leak that repeats per tick or per reload
# shows as growth in the soak, tools/bench/soak.sh).
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Only the binaries: the shell suites run tools and servers this build does not make.
none=$(mktemp -d)
trap 'rmdir "$none"' EXIT
TEST_SCRIPT_DIRS=$none tests/run.sh "$BUILD" "$FILTER"
