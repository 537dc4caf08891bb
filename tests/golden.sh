#!/usr/bin/env bash
# golden suite: regenerate every configuration of emitted/configs.txt and
# compare byte for byte with emitted/. A difference prints the unified diff
# and fails: review it, then run tools/regen to accept it.
# Usage: tests/golden.sh KGEN SRCROOT
set -euo pipefail
kgen=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
KGEN_REGEN_REPORTS=0 "$root/tools/regen" "$kgen" "$tmp" >/dev/null
cp "$root/emitted/configs.txt" "$tmp/configs.txt"
# reports are the ptxas suite's business; compare the PTX only
if ! diff -ru -x '*.ptxas.txt' "$root/emitted" "$tmp"; then
	echo "golden: generated PTX differs from emitted/ (diff above; accept with tools/regen)" >&2
	exit 1
fi
n=$(find "$tmp" -name '*.ptx' | wc -l)
echo "golden: $n kernels identical to emitted/"
