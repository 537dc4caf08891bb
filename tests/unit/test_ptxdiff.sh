#!/usr/bin/env bash
# tools/ptxdiff on two small fixtures whose differences are known by
# construction (tests/unit/ptxdiff/): b renames every register and label of
# the prologue (no change), adds one instruction with a new register to the
# first softmax copy, drops block fam.old, adds fam.new.
# Usage: test_ptxdiff.sh SOURCE_ROOT
set -u
root=$1
pd=$root/tools/ptxdiff
fx=$root/tests/unit/ptxdiff
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$("$pd" "$fx/a.ptx" "$fx/b.ptx"); rc=$?
[ "$rc" = 1 ] || fail "changes must exit 1, got $rc"
[ "$out" = "$(cat "$fx/expected.txt")" ] || fail "report differs from expected.txt:
$out"

out=$("$pd" -u "$fx/a.ptx" "$fx/b.ptx")
printf '%s\n' "$out" | grep -qxF $'    +\tmul.f32 %soft_f2, %soft_f0, %soft_f0;' ||
	fail "-u must show the one added line: $out"
[ "$(printf '%s\n' "$out" | grep -c '^    [-+]	')" = 1 ] ||
	fail "-u: exactly one changed line in softmax: $out"

out=$("$pd" "$fx/a.ptx" "$fx/a.ptx"); rc=$?
[ "$rc" = 0 ] && [ "$out" = "0 changed, 0 added, 0 removed, 7 unchanged blocks; +0 -0 lines" ] ||
	fail "a file against itself: rc $rc, $out"

# -c: a changed comment is a change, but not in code-only mode
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
sed 's|^\tret;$|\tret; // end|' "$fx/a.ptx" >"$tmp"
"$pd" "$fx/a.ptx" "$tmp" >/dev/null; rc=$?
[ "$rc" = 1 ] || fail "a comment change must count without -c, got $rc"
"$pd" -c "$fx/a.ptx" "$tmp" >/dev/null; rc=$?
[ "$rc" = 0 ] || fail "-c must ignore comments, got $rc"

"$pd" "$fx/a.ptx" >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "one argument must exit 2, got $rc"
"$pd" "$fx/a.ptx" "$fx/no-such.ptx" >/dev/null 2>&1; rc=$?
[ "$rc" != 0 ] && [ "$rc" != 1 ] || fail "a missing file must be an error, got $rc"

[ "$fails" = 0 ] && echo "ptxdiff: all passed"
exit $((fails != 0))
