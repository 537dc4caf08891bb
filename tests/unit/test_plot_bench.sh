#!/usr/bin/env bash
# tools/plot-bench on a fixture of kbench JSON lines: the SVG parses, has one
# panel per configuration, one point per run and series (ours and each peer
# that ran; a peer that did not run is absent, gemm runs are skipped; the
# decode family's runs join the decode plot), the
# values drawn are the fixture's, and bad input fails with a reason.
# Usage: tests/unit/test_plot_bench.sh SRC_ROOT
set -u
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fix=$src/tests/unit/plot-bench-fixture.jsonl
plot=$src/tools/plot-bench
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$plot" -o "$tmp/p.svg" "$fix" || fail "prefill plot: status $?"
"$plot" --mode decode -o "$tmp/d.svg" "$fix" || fail "decode plot: status $?"
python3 - "$tmp/p.svg" "$tmp/d.svg" <<'PY' || fails=$((fails + 1))
import sys
import xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
def load(path):
    root = E.parse(path).getroot()
    panels = [t.text for t in root.iter(ns + "text") if t.get("class") == "pt"]
    points = sorted(c.find(ns + "title").text for c in root.iter(ns + "circle"))
    lines = sorted(p.find(ns + "title").text for p in root.iter(ns + "polyline"))
    title = [t.text for t in root.iter(ns + "text") if t.get("class") == "t"][0]
    return panels, points, lines, title
bad = 0
def want(what, got, exp):
    global bad
    if got != exp:
        print("FAIL: %s: got %r, want %r" % (what, got, exp))
        bad += 1
panels, points, lines, title = load(sys.argv[1])
want("prefill panels", panels, ["hd64 causal 16 heads", "hd128 16 heads"])
want("prefill series", lines, ["ours (kgen)", "ours (kgen)", "sdpa-cudnn", "sdpa-flash"])
want("prefill points", points, sorted([
    "ours (kgen): 1K 439.8", "ours (kgen): 2K 586.4", "ours (kgen): 8K 703.7",
    "sdpa-cudnn: 1K 401.5", "sdpa-cudnn: 2K 560", "sdpa-cudnn: 8K 650.2",
    "sdpa-flash: 2K 330", "sdpa-flash: 8K 350", "ours (kgen): 4K 490.9"]))
want("prefill title", "TFLOP/s vs sequence length" in title, True)
panels, points, lines, title = load(sys.argv[2])
want("decode panels", panels, ["fp8-v4, 64 heads, top-k 512 + 128 extra, s_q 1",
                                "hd512 causal 128/1 heads K=V pack 64, seqlen_q 1"])
# GB/s = bytes / median: 134217728 B / 0.25 ms = 536.9; 268435456 / 0.4 ms = 671.1;
# the peer's time from its TFLOP/s: 17179869184 / 1.5e12 s = 11.45 ms -> 11.7 GB/s.
# The decode family: traffic 2e7 B / 0.05 ms = 400 (its input set of 9e7 B
# is not what it must read); 8e7 B (no traffic field) / 0.1 ms = 800; its naive
# peer 1e9 flop / 0.1e12 flop/s = 10 ms -> 2 GB/s (batch 64's peer did not run)
want("decode points", points, sorted([
    "ours (kgen): 16 536.9", "ours (kgen): 32 671.1", "sdpa-efficient+kvrep: 16 11.7",
    "ours (kgen): 16 400", "ours (kgen): 64 800", "torch-naive: 16 2"]))
sys.exit(1 if bad else 0)
PY
echo '{"tool": "kbench", "family": "fmha"' >"$tmp/bad.jsonl"
"$plot" -o "$tmp/x.svg" "$tmp/bad.jsonl" 2>"$tmp/err" && fail "malformed JSON accepted"
grep -q 'bad.jsonl:1: not JSON' "$tmp/err" || fail "malformed JSON: $(cat "$tmp/err")"
grep '"family": "gemm"' "$fix" >"$tmp/gemm.jsonl"
"$plot" -o "$tmp/x.svg" "$tmp/gemm.jsonl" 2>"$tmp/err" && fail "no fmha runs accepted"
grep -q 'no prefill runs' "$tmp/err" || fail "no fmha runs: $(cat "$tmp/err")"
[ -e "$tmp/x.svg" ] && fail "a failed plot left an SVG"

[ $fails -eq 0 ] && echo "plot-bench: all passed"
exit $((fails != 0))
