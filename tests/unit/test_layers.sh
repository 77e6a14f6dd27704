#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The userspace layers and their order (docs/ARCHITECTURE.md): a file may include its own
# layer and the layers below it, never one above or beside it, and every project header is
# named with its layer ("control/breaker.h") so the arrow is visible at the include.
# Emits TAP. Usage: tests/unit/test_layers.sh [USER_DIR]
set -u
USER_DIR=${1:-user}
declare -A RANK=([common]=0 [control]=1 [kernel]=2 [ops]=2 [daemon]=3 [cli]=3)
# Headers outside user/ that any layer may include (the shared structs, the skeletons bpftool
# generates into the build directory).
SHARED='^(sluice\.h|sluice\.skel\.h|readwait\.skel\.h)$'
n=0 bad_total=0

# check DIR [LAYER]: prints one line per forbidden include, returns the count.
check() {
	local dir=$1 only=${2:-*} bad=0 f layer inc target
	for f in "$dir"/$only/*.[ch]; do
		[ -f "$f" ] || continue
		layer=$(basename "$(dirname "$f")")
		if [ -z "${RANK[$layer]+x}" ]; then
			echo "# $f: folder $layer is not a known layer"; bad=$((bad + 1)); continue
		fi
		while read -r inc; do
			if [[ "$inc" =~ $SHARED ]]; then continue; fi
			target=${inc%%/*}
			if [ "$target" = "$inc" ]; then
				echo "# $f: \"$inc\" does not name its layer"; bad=$((bad + 1))
			elif [ -z "${RANK[$target]+x}" ]; then
				echo "# $f: \"$inc\" is in no known layer"; bad=$((bad + 1))
			elif [ "$target" != "$layer" ] && [ "${RANK[$target]}" -ge "${RANK[$layer]}" ]; then
				echo "# $f: $layer includes $inc (layer $target is not below $layer)"; bad=$((bad + 1))
			fi
		done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
	done
	return $bad
}

ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; bad_total=$((bad_total + 1)); fi; }

for layer in common control kernel ops daemon cli; do
	[ -d "$USER_DIR/$layer" ] || { ok 1 "layer folder $USER_DIR/$layer exists"; continue; }
	check "$USER_DIR" "$layer"; ok $? "$layer: includes only its own layer and the layers below"
done

flat=$(find "$USER_DIR" -maxdepth 1 -name '*.[ch]' | wc -l)
ok $([ "$flat" -eq 0 ] && echo 0 || echo 1) "no source file directly in $USER_DIR/ (every file has a layer)"
# A folder beside the six is no layer; a folder inside one would be out of the check's view.
check "$USER_DIR" '*'; ok $? "every folder under $USER_DIR/ is a known layer and keeps the order"
nested=$(find "$USER_DIR" -mindepth 3 -name '*.[ch]')
ok $([ -z "$nested" ] && echo 0 || echo 1) "no source file below a layer folder's top level" "$nested"

# The map layer must not know the configuration format.
# (grep: 1 is "not there"; 2, a file missing, is no pass)
grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"common/config\.h"' \
	"$USER_DIR/kernel/bpfmaps.h" "$USER_DIR/kernel/bpfmaps.c"
ok $([ $? -eq 1 ] && echo 0 || echo 1) "kernel/bpfmaps (map I/O) does not include common/config.h"

# The checker itself goes red on an upward, a sideways and an unnamed include.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/control" "$tmp/kernel" "$tmp/ops"
printf '#include "daemon/daemon.h"\n' > "$tmp/control/up.c"
printf '#include "ops/switches.h"\n' > "$tmp/kernel/side.c"
printf '#include "switches.h"\n' > "$tmp/ops/bare.c"
check "$tmp" > /dev/null
ok $([ $? -eq 3 ] && echo 0 || echo 1) "the check finds an upward, a sideways and an unnamed include"
rm -rf "$tmp"

echo "1..$n"
[ "$bad_total" -eq 0 ]
