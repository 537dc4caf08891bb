#!/usr/bin/env bash
# ptxas suite: every emitted file assembles for its target with
# --warn-on-spills --warn-on-local-memory-usage and no warning, and its
# resource report matches the stored one (a register or spill regression
# shows up here and in review).
# Usage: tests/ptxas.sh SRCROOT PTXAS
set -uo pipefail
root=$1 ptxas=$2
if ! command -v "$ptxas" >/dev/null 2>&1; then
	echo "ptxas: not found ($ptxas); skipped"
	exit 77
fi
fail=0 n=0
for f in "$root"/emitted/*/*.ptx; do
	target=$(sed -n 's|^//@target ||p' "$f")
	n=$((n + 1))
	if ! report=$("$root/tools/ptxas-report" "$ptxas" "$target" "$f"); then
		echo "FAIL $f: ptxas rejected it or warned"
		fail=1
		continue
	fi
	if ! diff -u "${f%.ptx}.ptxas.txt" <(echo "$report"); then
		echo "FAIL $f: resource report differs from ${f%.ptx}.ptxas.txt (regenerate with tools/regen)"
		fail=1
	fi
done
echo "ptxas: $n files checked"
exit $fail
