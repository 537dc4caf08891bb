#!/usr/bin/env bash
# kgen CLI: outputs of the calculators, exit status 2 with one line naming
# the parameter, the value and the rule on bad input, and -o writing through
# a temporary file.
# Usage: tests/unit/test_cli.sh KGEN
set -u
kgen=$1
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error "needle" args... : status 2, exactly one stderr line containing needle
expect_error() {
	local needle=$1; shift
	"$kgen" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[ $rc -eq 2 ] || fail "kgen $*: status $rc, want 2"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "kgen $*: stderr not one line: $(cat "$tmp/err")"
	grep -qF -- "$needle" "$tmp/err" || fail "kgen $*: stderr lacks '$needle': $(cat "$tmp/err")"
	[ ! -s "$tmp/out" ] || fail "kgen $*: wrote to stdout on error"
}

# calculators: the issue's examples (hardware-facts §8 TV1 and TV4)
v=$("$kgen" desc --target sm_100a --major K --swizzle 128 --dtype bf16 --rows 128 --cols 64 --addr 0x400 | head -1)
[ "$v" = 0x4000404000010040 ] || fail "desc TV1: got $v"
v=$("$kgen" idesc --kind f16 --a bf16 --b bf16 --d f32 --m 128 --n 128 | head -1)
[ "$v" = 0x08200490 ] || fail "idesc TV4: got $v"
"$kgen" desc --target sm_100a --major K --swizzle 128 --dtype bf16 --rows 128 --cols 64 --addr 0x400 | grep -qi 'swizzle\|layout' ||
	fail "desc: no field table"

# list and plan
"$kgen" list | grep -q -- '--tile-m' || fail "list lacks --tile-m"
"$kgen" list | grep -q 'sm_90a,sm_100a' || fail "list lacks the target values"
"$kgen" plan gemm --target sm_100a | grep -q 'tensor memory' || fail "plan lacks the TMEM map"

# bad input
expect_error "--tile-m=96: must be one of" gemm --tile-m 96
expect_error "--tile-q: not a parameter" gemm --tile-q 3
expect_error "--target=sm_80: must be one of" gemm --target sm_80
expect_error "--stages=1: must be in 2..8" gemm --stages 1
expect_error "--tile-n: missing value" gemm --tile-n
expect_error "shared memory" gemm --tile-k 128 --stages 8
expect_error "family=nope" nope
expect_error "--tile-m=64" plan gemm --target sm_100a --tile-m 64
expect_error "n=" idesc --kind f16 --a bf16 --b bf16 --d f32 --m 128 --n 100
expect_error "swizzle" desc --target sm_100a --major K --swizzle 96 --dtype bf16 --rows 128 --cols 64

# -o: written whole, no temporary left behind, old file kept on failure
"$kgen" gemm --target sm_90a -o "$tmp/k.ptx" || fail "gemm -o"
head -1 "$tmp/k.ptx" | grep -q '^//@kgen-abi 1$' || fail "-o file lacks the header"
ls "$tmp" | grep -q tmp && fail "temporary file left behind"
cp "$tmp/k.ptx" "$tmp/before"
"$kgen" gemm --tile-m 96 -o "$tmp/k.ptx" 2>/dev/null
cmp -s "$tmp/k.ptx" "$tmp/before" || fail "failed run changed the output file"

[ $fails -eq 0 ] && echo "cli: all passed"
exit $((fails != 0))
