#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Comments, docs, tests and tools stand alone: they give their reasons in the project's own
# words and never send the reader to a document this repository does not contain (a design
# input cited by number and section, a specification by name, a tracker issue by number).
# Fails on any such reference in a tracked or new text file. Emits TAP.
# Usage: tests/unit/test_standalone_docs.sh [REPO_DIR]
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
SELF=tests/unit/test_standalone_docs.sh
n=0 bad_total=0

# name|grep flags|extended regex. An RNG seed ("--seed 7", "a seeded generator") is fine; so
# is "spec" inside other words or as a Kubernetes key, and an RFC section.
RULES=(
	'design input cited by number ("seed 001")|-i|(^|[^-[:alnum:]_])seeds? ?[0-9]'
	'design inputs in the plural ("seeds")|-i|\bseeds\b'
	'design input by name ("the seed'"'"'s goal")|-i|\bthe seed'"'"'s\b|\b(in|of|from|after|per) the seed\b'
	'specification by name ("SPEC", "SPEC.md")||\bSPEC\b'
	'specification file ("spec.md")|-i|\bspec\.md\b'
	'tracker issue by number ("issue 6")|-i|\bissues? #?[0-9]'
	'numbered pitfall of an outside text ("pit 4")|-i|\bpits? [0-9]'
)

# files DIR: the text files to check, one per line, relative to DIR.
files() {
	if git -C "$1" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
		git -C "$1" ls-files --cached --others --exclude-standard
	else
		(cd "$1" && find . -path ./build -prune -o -path ./.git -prune -o -type f -print |
			sed 's|^\./||')
	fi
}

# scan DIR FLAGS REGEX: prints "# file:line: text" per offending line; returns the count (max 255).
scan() {
	local dir=$1 flags=$2 re=$3 out count
	out=$(cd "$dir" && files . | grep -vxF "$SELF" | tr '\n' '\0' |
		xargs -0 -r grep -nIE $flags -- "$re" 2>/dev/null)
	[ -z "$out" ] && return 0
	echo "$out" | cut -c1-200 | sed 's/^/# /'
	count=$(echo "$out" | wc -l)
	return $((count > 255 ? 255 : count))
}

ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; bad_total=$((bad_total + 1)); fi; }

for rule in "${RULES[@]}"; do
	IFS='|' read -r name flags re <<< "$rule"
	scan "$ROOT" "$flags" "$re"
	ok $? "no $name"
done

# The check itself: it goes red on each kind of reference and stays green on the allowed words.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree"
cat > "$tmp/tree/bad.c" << 'EOF'
/* the wait is jittered (seed 001 §6.2) */
/* as the seeds ask */
/* the seed's goal */
/* admission order (SPEC): switch first */
/* see SPEC.md */
/* fixed in issue 6 */
/* a broken file means normal (pit 4) */
EOF
cat > "$tmp/tree/fine.c" << 'EOF'
/* loadgen --seed 7 draws the same arrivals; the breaker's seeded RNG; seed = 42; seed: 7 */
/* SPECIAL, INCIDENTAL; spec: { replicas: 1 }; a respecified inspection; RFC 9293 §3.10.7.1 */
/* this issue is known; the pit of the stomach; speculative */
EOF
found=0
for rule in "${RULES[@]}"; do
	IFS='|' read -r name flags re <<< "$rule"
	scan "$tmp/tree" "$flags" "$re" > "$tmp/out"
	hits=$?
	grep -q 'fine\.c' "$tmp/out" && { echo "# the rule \"$name\" flags an allowed word:"; cat "$tmp/out"; hits=100; }
	[ "$hits" -ge 1 ] && [ "$hits" -lt 100 ] && found=$((found + 1))
done
ok $([ "$found" -eq ${#RULES[@]} ] && echo 0 || echo 1) \
	"every rule finds its kind of reference and none flags an RNG seed, SPECIAL, k8s spec or an RFC section"

echo "1..$n"
[ "$bad_total" -eq 0 ]
