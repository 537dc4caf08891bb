#!/usr/bin/env bash
# kcheck and kbench on the emulator: exit codes with one meaning each (2 bad
# input, incl. a malformed header, a family with no checker and a kernel that
# needs more shared memory than the device has; 74 output lost), numbers
# read like kgen reads them, the emulator's limits refusing a run before it
# starts, and kbench --json writing one parseable line per run.
# Usage: tests/unit/test_tools.sh KGEN KCHECK KBENCH
set -u
kgen=$1 kcheck=$2 kbench=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# status NAME WANT CMD... : runs CMD (output in $tmp/out), checks the status
status() {
	local what=$1 want=$2; shift 2
	"$@" >"$tmp/out" 2>&1
	local rc=$?
	[ $rc -eq "$want" ] || fail "$what: status $rc, want $want: $(tail -3 "$tmp/out")"
}
export KRT_DEVICE=emu
"$kgen" gemm --target sm_90a -o "$tmp/k.ptx" || exit 1

# kcheck
status "kcheck passes" 0 "$kcheck" --device emu --seed 1 --fill normal --shape 130x70x72 "$tmp/k.ptx"
status "kcheck --seed 1x" 2 "$kcheck" --device emu --seed 1x "$tmp/k.ptx"
grep -q -- '--seed=1x: must be an integer' "$tmp/out" || fail "kcheck --seed 1x: $(cat "$tmp/out")"
status "kcheck --m 0130 (decimal)" 0 "$kcheck" --device emu --seed 1 --fill normal --gen gemm --target sm_90a --m 0130 --n 70 --k 72
grep -q '^PASS  130x70x72 ' "$tmp/out" || fail "kcheck --m 0130 is not 130: $(grep -E 'PASS|FAIL' "$tmp/out")"
# block-scaled e4m3: odd M at the smallest K; K off the scale block refused before launch
bs="--gen gemm --target sm_90a --dtype e4m3 --scale block128 --tile-k 128 --tile-n 64 --tile-m 64"
status "kcheck block-scaled e4m3" 0 "$kcheck" --device emu --seed 1 --m 67 --n 130 --k 128 $bs
status "kcheck block-scaled K=200" 2 "$kcheck" --device emu --seed 1 --m 67 --n 130 --k 200 $bs
grep -q 'K=200: must be a multiple of 128' "$tmp/out" || fail "kcheck bs K=200: $(cat "$tmp/out")"
sed '2s/.*/garbage/' "$tmp/k.ptx" >"$tmp/bad.ptx"
status "kcheck malformed header" 2 "$kcheck" --device emu "$tmp/bad.ptx"
sed 's|^//@smem .*|//@smem 240000|' "$tmp/k.ptx" >"$tmp/big.ptx"
status "kcheck smem beyond the device" 2 "$kcheck" --device emu --shape 130x70x72 "$tmp/big.ptx"
grep -q 'exceed what' "$tmp/out" || fail "kcheck smem: $(cat "$tmp/out")"
sed 's|^//@family gemm|//@family nofamily|' "$tmp/k.ptx" >"$tmp/nofam.ptx"
status "kcheck no checker for the family" 2 "$kcheck" --device emu "$tmp/nofam.ptx"
# the indexer on the emulator: odd lengths, scattered pages, s_q > 1,
# fewer keys than top-k, ties; a 64-head top-512 row past top-k too
status "kcheck indexer odd" 0 "$kcheck" --device emu --seed 1 --gen indexer --heads 5 --topk 37 --page-size 16 --batch 5 --s-q 3 --max-len 203
grep -q '^kcheck: 2 of 2 passed' "$tmp/out" || fail "kcheck indexer odd: $(tail -2 "$tmp/out")"
status "kcheck indexer h64 k512" 0 "$kcheck" --device emu --seed 2 --fill normal --gen indexer --page-size 32 --batch 3 --s-q 2 --max-len 700
status "kcheck indexer fp4" 0 "$kcheck" --device emu --seed 3 --gen indexer --format fp4 --heads 7 --topk 50 --page-size 32 --batch 4 --s-q 2 --max-len 333 --full 0 --splits 2
grep -q '^kcheck: 2 of 2 passed' "$tmp/out" || fail "kcheck indexer fp4: $(tail -2 "$tmp/out")"
status "kcheck indexer wgmma" 0 "$kcheck" --device emu --seed 4 --gen indexer --score wgmma --heads 9 --topk 70 --page-size 16 --batch 4 --s-q 3 --max-len 301 --full 0 --splits 3
grep -q '^kcheck: 2 of 2 passed' "$tmp/out" || fail "kcheck indexer wgmma: $(tail -2 "$tmp/out")"
status "kcheck indexer batch 0" 2 "$kcheck" --device emu --gen indexer --batch 0 --s-q 1
grep -q 'batch 0, s_q 1: both must be in 1..65535' "$tmp/out" || fail "kcheck indexer batch 0: $(tail -2 "$tmp/out")"
# decode: the launch limits, named before any buffer is built
status "kcheck decode s_q 70000" 2 "$kcheck" --device emu --gen decode --heads-q 8 --topk 64 --batch 1 --s_q 70000
grep -q 'batch 1, s_q 70000: both must be in 1..65535 (grid z and y)' "$tmp/out" || fail "kcheck decode s_q 70000: $(tail -2 "$tmp/out")"
status "kcheck decode batch 0" 2 "$kcheck" --device emu --gen decode --heads-q 8 --topk 64 --batch 0 --s_q 1
grep -q 'batch 0, s_q 1: both must be in 1..65535' "$tmp/out" || fail "kcheck decode batch 0: $(tail -2 "$tmp/out")"
status "kcheck decode row index" 2 "$kcheck" --device emu --gen decode --heads-q 128 --topk 64 --batch 60000 --s_q 600 --splits 1
grep -q 'batch 60000 x s_q 600 x splits 1 x Hq 128 = 4608000000: must be below 2^31' "$tmp/out" || fail "kcheck decode row index: $(tail -2 "$tmp/out")"
# decode's bad lengths on both targets (tools/check_decode.c): topk_length
# past top-k and negative (rows 2 and 5), seqlens past the table and
# negative (sequences 1, 4 and 5), all clamped by the kernel
for t in sm_90a sm_100a; do
	status "kcheck decode bad lengths $t" 0 "$kcheck" --device emu --seed 5 --gen decode --target $t --heads-q 8 --topk 70 --page-size 3 --topk-extra 40 --page-size-extra 5 --topk-length 1 --batch 2 --s_q 3
	status "kcheck decode bad seqlens $t" 0 "$kcheck" --device emu --seed 4 --gen decode --target $t --format bf16 --addressing paged --heads-q 8 --page-size 2 --batch 7 --s_q 1
done
status "kcheck fmha batch 65536" 2 "$kcheck" --device emu --fill normal --gen fmha --target sm_90a --batch 65536 --seqlen-q 1 --seqlen-k 1
grep -q 'batch up to 65535' "$tmp/out" || fail "fmha batch 65536: $(cat "$tmp/out")"
status "kcheck past KRT_EMU_MAX_MEM" 2 env KRT_EMU_MAX_MEM=4096 "$kcheck" --device emu --fill normal --shape 130x70x72 "$tmp/k.ptx"
grep -q 'KRT_EMU_MAX_MEM' "$tmp/out" || fail "kcheck memory limit: $(cat "$tmp/out")"
if [ -w /dev/full ]; then
	"$kcheck" --device emu --seed 1 --fill normal --shape 130x70x72 "$tmp/k.ptx" >/dev/full 2>"$tmp/err"
	rc=$?
	[ $rc -eq 74 ] || fail "kcheck >/dev/full: status $rc, want 74"
fi

# kbench: a GPU-sized shape on the emulator is refused before it runs
status "kbench 4096x4096x1040 on the emulator" 2 "$kbench" gemm --device emu --target sm_90a --m 4096 --n 4096 --k 1040 --no-peer
grep -q 'the emulator refuses more than' "$tmp/out" || fail "kbench emu refusal: $(tail -2 "$tmp/out")"
status "kbench --iters 0x" 2 "$kbench" gemm --iters 0x
status "kbench --iters 010" 0 "$kbench" gemm --device emu --target sm_90a --m 130 --n 70 --k 72 --iters 010 --warmup 0 --no-peer --no-check
grep -q '10 timed launches' "$tmp/out" || fail "kbench --iters 010 is not 10: $(grep timed "$tmp/out")"
for i in 1 2; do
	status "kbench --json run $i" 0 "$kbench" gemm --device emu --target sm_90a --m 130 --n 70 --k 72 --iters 1 --warmup 0 --no-peer --json "$tmp/runs.jsonl"
done
python3 - "$tmp/runs.jsonl" <<'PY' || fail "kbench --json lines"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
assert len(runs) == 2, runs
r = runs[0]
assert r["tool"] == "kbench" and r["family"] == "gemm" and r["device"] == "emu", r
assert r["shape"] == {"M": 130, "N": 70, "K": 72}, r["shape"]
assert r["flops"] == 2 * 130 * 70 * 72, r["flops"]
assert r["ours"]["median_ms"] > 0 and r["ours"]["tflops"] > 0, r["ours"]
assert r["target"] == "sm_90a" and r["args"].startswith("--target sm_90a"), r
assert r["peers"] == [] and r["peers_why"] == "--no-peer", r
PY
status "kbench --json into a missing directory" 74 "$kbench" gemm --device emu --target sm_90a --m 130 --n 70 --k 72 --iters 1 --warmup 0 --no-peer --json "$tmp/no/runs.jsonl"

[ $fails -eq 0 ] && echo "tools: all passed"
exit $((fails != 0))
