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

# calculators: the issue's examples (docs/hardware.md, "Test vectors" TV1 and TV4)
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
expect_error "--cta-pair=1: sm_90a has no CTA-pair MMA" gemm --target sm_90a --cta-pair 1
# block-scaled e4m3 (docs/ABI.md, "gemm"): the rules that tie dtype, scale, tile-k, tile-n, target
expect_error "--dtype=e4m3: FP8 inputs carry block scales; add --scale block128" gemm --dtype e4m3
expect_error "--scale=block128 with --dtype=bf16: block scales apply to FP8 inputs" gemm --scale block128
expect_error "--tile-k=64 with --scale=block128: tile-k must be the scale block, 128" gemm --dtype e4m3 --scale block128
expect_error "--tile-n=96 with --scale=block128: tile-n must divide 128" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 96
expect_error "--scale=block128: the sm_100a gemm has no block-scaled path yet" gemm --target sm_100a --dtype e4m3 --scale block128 --tile-k 128 --tile-n 128
expect_error "--scale=blk: must be one of none,block128,mx32,nv16,w4a8" gemm --dtype e4m3 --scale blk
expect_error "--scale=mx32: per-32 UE8M0 scales are applied by tcgen05.mma kind::mxf8f6f4; use --target sm_100a" gemm --dtype e4m3 --scale mx32 --tile-k 128 --tile-n 128
expect_error "--tile-k=64 with --scale=mx32: tile-k must be 128" gemm --target sm_100a --dtype e4m3 --scale mx32
# W4A8 (docs/ABI.md, "W4A8 weights"): each rule names the parameter, the value and the rule
expect_error "--scale=w4a8 with --target=sm_100a: W4A8 turns FP4 into E4M3 for Hopper's wgmma" gemm --dtype e4m3 --scale w4a8 --tile-k 128 --target sm_100a --tile-m 8 --tile-n 128 --moe masked
expect_error "--tile-m=128 with --scale=w4a8: tile-m is the tokens per CTA, the wgmma's N: 8 or 16" gemm --dtype e4m3 --scale w4a8 --tile-k 128 --tile-n 128 --moe masked
expect_error "--tile-m=8: tile-m 8 and 16 are the W4A8 kernel's tokens per CTA" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-m 8 --tile-n 128
expect_error "--tile-n=96 with --scale=w4a8: tile-n is 64 weight rows per consumer warpgroup, 64, 128, 192 or 256" gemm --dtype e4m3 --scale w4a8 --tile-k 128 --tile-m 8 --tile-n 96 --moe masked
expect_error "--swizzle=64B with --scale=w4a8" gemm --dtype e4m3 --scale w4a8 --tile-k 128 --tile-m 8 --tile-n 128 --swizzle 64 --moe masked
expect_error "--scale=w4a8 with --moe=none: the W4A8 kernel is the experts' decode GEMM" gemm --dtype e4m3 --scale w4a8 --tile-k 128 --tile-m 8 --tile-n 128
expect_error "--out-dtype=e4m3 with --scale=w4a8: an FP8 C is the SwiGLU output quantized per 1x128" gemm --dtype e4m3 --scale w4a8 --tile-k 128 --tile-m 8 --tile-n 128 --moe masked --epilogue swiglu --out-dtype e4m3
expect_error "--tile-k=64 with --scale=w4a8: tile-k must be the scale block, 128" gemm --dtype e4m3 --scale w4a8 --tile-m 8 --tile-n 128 --moe masked
expect_error "--tile-n=192 with --scale=mx32: tile-n must be a multiple of 128" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 --tile-n 192
expect_error "--scale=mx32 with --cta-pair=1" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 --tile-n 256 --cta-pair 1
"$kgen" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 -o "$tmp/mx.ptx" || fail "gemm --scale mx32"
grep -q '^//@param ptr SB dtype=ue8m0 tensor=SB\[cdiv(N,128),cdiv(K,128),512\]$' "$tmp/mx.ptx" || fail "mx gemm: no SB images"
grep -q 'tcgen05.cp.cta_group::1.32x128b.warpx4 ' "$tmp/mx.ptx" || fail "mx gemm: no tcgen05.cp of the factors"
grep -q 'kind::mxf8f6f4.block_scale.block32 ' "$tmp/mx.ptx" || fail "mx gemm: no block-scaled MMA"
grep -q '0x68C00030; // idesc' "$tmp/mx.ptx" && grep -q '0x08C00000; // idesc' "$tmp/mx.ptx" ||
	fail "mx gemm: idesc of K blocks 0 and 3: N>>3 at 17, UE8M0 bit 23, M>>7 at 27, ids 0 and 3 at 29 and 4 (docs/hardware.md, TV5)"
# FP4 (docs/ABI.md, "gemm"): NVFP4 and MXFP4 through kind::mxf4nvf4
expect_error "--dtype=e2m1: FP4 inputs carry block scales; add --scale nv16" gemm --target sm_100a --dtype e2m1 --tile-k 256
expect_error "--scale=nv16 with --dtype=e4m3: NVFP4's UE4M3 per 16 scales E2M1 only" gemm --target sm_100a --dtype e4m3 --scale nv16 --tile-k 128
expect_error "--scale=nv16 with --dtype=bf16: block scales apply to FP8 inputs (--dtype e4m3) and FP4 inputs" gemm --target sm_100a --scale nv16
expect_error "--scale=block128 with --dtype=e2m1: FP4 takes --scale nv16 or mx32" gemm --dtype e2m1 --scale block128 --tile-k 256
expect_error "--tile-k=128 with --dtype=e2m1: tile-k must be 256" gemm --target sm_100a --dtype e2m1 --scale nv16 --tile-k 128
expect_error "--swizzle=64B with --dtype=e2m1: FP4 stages are 128-byte rows" gemm --target sm_100a --dtype e2m1 --scale nv16 --tile-k 256 --swizzle 64
expect_error "--tile-n=192 with --scale=nv16: tile-n must be a multiple of 128" gemm --target sm_100a --dtype e2m1 --scale nv16 --tile-k 256 --tile-n 192
expect_error "--out-dtype=e4m3 with --dtype=e2m1" gemm --target sm_100a --dtype e2m1 --scale nv16 --tile-k 256 --moe masked --epilogue swiglu --out-dtype e4m3
"$kgen" gemm --target sm_100a --dtype e2m1 --scale nv16 --tile-k 256 --stages 3 -o "$tmp/nv.ptx" || fail "gemm --dtype e2m1 --scale nv16"
grep -q '^//@param tmap A dtype=e2m1 rank=2 box=128,128 swizzle=128 tensor=A\[M,K/2\]$' "$tmp/nv.ptx" || fail "nvfp4 gemm: A not packed K/2 bytes"
grep -q '^//@param ptr SB dtype=ue4m3 tensor=SB\[cdiv(N,128),cdiv(K,64),512\]$' "$tmp/nv.ptx" || fail "nvfp4 gemm: no UE4M3 SB images per 64 of K"
grep -q '^//@param ptr alpha dtype=f32 tensor=alpha\[1\]$' "$tmp/nv.ptx" || fail "nvfp4 gemm: no alpha"
grep -q '^//@shape kmult=32 kblock=256$' "$tmp/nv.ptx" || fail "nvfp4 gemm: K in whole 256-value stages"
grep -q 'kind::mxf4nvf4.block_scale.block16 ' "$tmp/nv.ptx" || fail "nvfp4 gemm: no .block16 MMA"
# NVFP4 idesc (hand-derived): E2M1 = 1 at bits 7 and 10, N 256 >> 3 at 17, UE4M3 = 0 at 23, M 128 >> 7 at 27
grep -q 'mov.u32 %ss_r0, 0x08400480;' "$tmp/nv.ptx" || fail "nvfp4 gemm: idesc"
"$kgen" gemm --target sm_100a --dtype e2m1 --scale mx32 --tile-k 256 --stages 3 -o "$tmp/mxfp4.ptx" || fail "gemm --dtype e2m1 --scale mx32"
# MXFP4: UE8M0 bit 23; MMAs 1 and 3 read the half-word at id 2 (bits 29-30 and 4-5)
grep -q 'mov.u32 %ss_r1, 0x48C004A0;' "$tmp/mxfp4.ptx" || fail "mxfp4 gemm: idesc of MMA 1 (ids 2)"
grep -q 'kind::mxf4nvf4.block_scale.block32 ' "$tmp/mxfp4.ptx" || fail "mxfp4 gemm: no .block32 MMA"
grep -q 'alpha' "$tmp/mxfp4.ptx" && fail "mxfp4 gemm has NVFP4's alpha"
# FP4 weights under FP8 activations: kind::mxf8f6f4 with B = E2M1 (code 5), B expanded by TMA 16U4_ALIGN16B
expect_error "--dtype-b=e2m1 with --dtype=e2m1 --scale=nv16: FP4 weights under FP8 activations need --dtype e4m3 --scale mx32" gemm --target sm_100a --dtype e2m1 --scale nv16 --tile-k 256 --dtype-b e2m1
expect_error "--dtype-b=e2m1 with --dtype=e4m3 --scale=block128" gemm --dtype e4m3 --scale block128 --tile-k 128 --dtype-b e2m1
"$kgen" gemm --target sm_100a --dtype e4m3 --dtype-b e2m1 --scale mx32 --tile-k 128 --stages 3 -o "$tmp/w4.ptx" || fail "gemm --dtype-b e2m1"
grep -q '^//@param tmap B dtype=e2m1p rank=2 box=128,256 swizzle=128 tensor=B\[N,K\]$' "$tmp/w4.ptx" || fail "w4a8 gemm: B not e2m1p values"
grep -q 'mov.u32 %ss_r0, 0x08C01400;' "$tmp/w4.ptx" || fail "w4a8 gemm: idesc a=e4m3 (0) b=e2m1 (5 at bit 10)"
"$kgen" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 | grep -q -- '--dtype-b' && fail "mx32 gemm args show --dtype-b"
"$kgen" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 128 -o "$tmp/bs.ptx" || fail "gemm --scale block128"
grep -q '^//@shape kmult=16 kblock=128$' "$tmp/bs.ptx" || fail "bs gemm: no //@shape kblock=128"
grep -q '^//@param ptr SA dtype=f32 tensor=SA\[cdiv(K,128),M\]$' "$tmp/bs.ptx" || fail "bs gemm: no SA param"
grep -q 'wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 ' "$tmp/bs.ptx" || fail "bs gemm: no e4m3 wgmma"
"$kgen" gemm | grep -q -- '--scale' && fail "bf16 gemm args show --scale"
"$kgen" gemm --dtype e4m3 --scale block128 --scale-b ue8m0 --tile-k 128 --tile-n 128 -o "$tmp/e8.ptx" || fail "gemm --scale-b ue8m0"
grep -q '^//@param ptr SB dtype=ue8m0 tensor=SB\[cdiv(N,128),cdiv(K,128)\]$' "$tmp/e8.ptx" || fail "bs gemm: no UE8M0 SB"
expect_error "--scale-b=e4m3: must be one of f32,ue8m0" gemm --dtype e4m3 --scale block128 --tile-k 128 --scale-b e4m3
# MoE layouts (docs/ABI.md, "MoE layouts")
expect_error "--moe=masked with --dtype=bf16: the MoE layouts are for the block-scaled gemm" gemm --moe masked
expect_error "--moe=masked with --cta-pair=1: the MoE layouts map one CTA to one expert's tile" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 --tile-n 256 --cta-pair 1 --moe masked
expect_error "--moe=x: must be one of none,contiguous,masked" gemm --dtype e4m3 --scale block128 --moe x
"$kgen" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 128 --moe contiguous -o "$tmp/moec.ptx" || fail "gemm --moe contiguous"
grep -q '^//@family gemm_moe$' "$tmp/moec.ptx" && grep -q '^//@shape kmult=16 kblock=128 moe=contiguous$' "$tmp/moec.ptx" ||
	fail "moe gemm: no gemm_moe family or //@shape moe"
grep -q '^//@grid cdiv(M,128)\*cdiv(N,128)+E\*cdiv(N,128) 1 1$' "$tmp/moec.ptx" || fail "moe gemm: grid"
grep -q '^//@param ptr offsets dtype=s32 tensor=offsets\[E+1\]$' "$tmp/moec.ptx" && grep -q '^//@param u32 E$' "$tmp/moec.ptx" ||
	fail "moe gemm: no offsets or E"
grep -q 'vote.sync.ballot.b32' "$tmp/moec.ptx" && grep -q 'shfl.sync.up.b32' "$tmp/moec.ptx" || fail "moe gemm: no warp scan"
"$kgen" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 --moe masked -o "$tmp/moem.ptx" || fail "gemm --moe masked"
grep -q '^//@param ptr SA dtype=ue8m0 tensor=SA\[E\*cdiv(M,128),cdiv(K,128),512\]$' "$tmp/moem.ptx" &&
	grep -q '^//@param ptr counts dtype=s32 tensor=counts\[E\]$' "$tmp/moem.ptx" && grep -q '^//@grid E\*cdiv(M,128)\*cdiv(N,256) 1 1$' "$tmp/moem.ptx" ||
	fail "moe masked gemm: SA images per slab, counts, grid"
"$kgen" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 128 | grep -q -- '--moe none' || fail "e4m3 gemm args lack --moe none"
# SwiGLU epilogue (docs/ABI.md, "SwiGLU epilogue")
expect_error "--epilogue=swiglu with --moe=none: the SwiGLU epilogue is the experts' gate+up GEMM" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 128 --epilogue swiglu
expect_error "--tile-n=96 with --epilogue=swiglu: tile-n/2 must divide 128" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 96 --moe masked --epilogue swiglu
expect_error "--tile-n=128 with --epilogue=swiglu and --scale=mx32: tile-n must be 256" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 --tile-n 128 --moe masked --epilogue swiglu
"$kgen" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 128 --moe masked --epilogue swiglu -o "$tmp/sw.ptx" || fail "gemm --epilogue swiglu"
grep -q '^//@shape kmult=16 kblock=128 moe=masked nmult=256 epilogue=swiglu$' "$tmp/sw.ptx" &&
	grep -q '^//@param tmap B dtype=e4m3 rank=2 box=128,64 swizzle=128 tensor=B\[E\*N,K\]$' "$tmp/sw.ptx" &&
	grep -q '^//@param ptr C dtype=bf16 tensor=C\[E\*M,N/2\]$' "$tmp/sw.ptx" && grep -q '^//@param f32 swiglu_limit$' "$tmp/sw.ptx" ||
	fail "swiglu gemm: shape fields, half-tile B box, C[E*M,N/2], swiglu_limit"
expect_error "--out-dtype=e4m3: an FP8 C is the SwiGLU output quantized for the down GEMM" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-n 128 --moe masked --epilogue swiglu --out-dtype e4m3
"$kgen" gemm --target sm_100a --dtype e4m3 --scale mx32 --tile-k 128 --tile-n 256 --moe masked --epilogue swiglu --out-dtype e4m3 -o "$tmp/sw8.ptx" || fail "gemm --out-dtype e4m3"
grep -q '^//@param ptr CS dtype=ue8m0 tensor=CS\[E\*cdiv(M,128),cdiv(N/2,128),512\]$' "$tmp/sw8.ptx" &&
	grep -q 'cvt.rn.satfinite.e4m3x2.f32 ' "$tmp/sw8.ptx" || fail "mxfp8 swiglu gemm: CS images, e4m3 conversion"
"$kgen" gemm --dtype e4m3 --scale block128 --tile-k 128 --tile-m 64 --tile-n 256 --moe masked --epilogue swiglu --out-dtype e4m3 -o "$tmp/sw9.ptx" || fail "sm_90a gemm --out-dtype e4m3"
grep -q '^//@param ptr CS dtype=f32 tensor=CS\[cdiv(N/2,128),E\*M\]$' "$tmp/sw9.ptx" && grep -q 'bar.sync 1, 256;' "$tmp/sw9.ptx" &&
	grep -q '^//@param tmap B dtype=e4m3 rank=2 box=128,64 ' "$tmp/sw9.ptx" || fail "sm_90a fp8 swiglu gemm: CS, amax exchange, 64-row B boxes"
# indexer (docs/ABI.md "indexer")
expect_error "--page-size=48: must be one of 16,32,64,128" indexer --page-size 48
expect_error "--heads=0: must be in 1..128" indexer --heads 0
expect_error "--topk=4096: must be in 0..2048" indexer --topk 4096
# --topk 0: the logits alone, a module without the top-k's buffers
"$kgen" indexer --topk 0 --score wgmma -o "$tmp/ixl.ptx" || fail "indexer --topk 0"
grep -q '^//@kernel indexer_fp8_h64_logits_p64_mma_sm90a$' "$tmp/ixl.ptx" || fail "indexer --topk 0: kernel name"
grep -qE '^//@param ptr (indices|counters|work) ' "$tmp/ixl.ptx" && fail "indexer --topk 0 keeps a top-k buffer"
grep -q '^//@param ptr logits ' "$tmp/ixl.ptx" || fail "indexer --topk 0 lacks logits"
"$kgen" plan indexer --topk 0 | grep -q 'top-k           none (--topk 0): the logits alone' ||
	fail "plan indexer --topk 0 lacks the top-k line"
expect_error "--format=mxfp4: must be one of fp8,fp4,nvfp4" indexer --format mxfp4
"$kgen" plan indexer --format nvfp4 | grep -q 'nvfp4: 128 E2M1 values per key (64 bytes), then .* 8 UE4M3 scales per key, one per 16 values; times K_global' ||
	fail "plan indexer nvfp4 lacks the cache line"
"$kgen" plan indexer --format fp4 | grep -q 'fp4: 128 E2M1 values per key (64 bytes)' || fail "plan indexer fp4 lacks the cache line"
expect_error "--score=wgmma: sm_100a scores on the tensor cores with --score tcgen05" indexer --target sm_100a --score wgmma
expect_error "--score=tcgen05: sm_90a scores on the tensor cores with --score wgmma" indexer --score tcgen05
expect_error "--format=nvfp4: --score tcgen05 takes fp8 keys or fp4 (NVFP4's UE4M3 factors per 16 need kind::mxf4nvf4" indexer --target sm_100a --score tcgen05 --format nvfp4
"$kgen" indexer --target sm_100a --score tcgen05 --format fp4 -o "$tmp/ix4.ptx" || fail "indexer --score tcgen05 --format fp4"
grep -q 'kind::mxf8f6f4.block_scale.block32' "$tmp/ix4.ptx" && grep -q 'tcgen05.cp.cta_group::1.32x128b.warpx4' "$tmp/ix4.ptx" ||
	fail "fp4 tcgen05 indexer: no block-scaled MMA or no factor copy"
"$kgen" plan indexer --target sm_100a --score tcgen05 | grep -q 'scoring         FP8 tcgen05.mma kind::f8f6f4 M=128 N=64' ||
	fail "plan indexer --target sm_100a --score tcgen05 lacks the scoring line"
"$kgen" plan indexer --topk 1024 | grep -q 'top-k           1024, fused: each CTA selects the top-1024 of its part' ||
	fail "plan indexer lacks the top-k line"
"$kgen" plan indexer --topk 2048 | grep -q 'merge           splits > 1: .* work\[2, batch, s_q, splits\*2048\]; .* rounds of 8192' ||
	fail "plan indexer lacks the merge line"
"$kgen" list | grep -q '^indexer' || fail "list lacks the indexer family"
expect_error "--heads=96: --score wgmma takes at most 64 heads" indexer --score wgmma --heads 96
expect_error "--format=nvfp4: --score wgmma takes fp8 keys or fp4 (an NVFP4 value, E2M1 times a UE4M3 factor, has up to 6 significant bits" indexer --score wgmma --format nvfp4
"$kgen" plan indexer --score wgmma | grep -q 'scoring         FP8 wgmma m64n64k32' || fail "plan indexer --score wgmma lacks the scoring line"
# topk (docs/ABI.md "topk"): shared code, both targets
expect_error "--topk=4096: must be in 1..2048" topk --topk 4096
"$kgen" list | grep -q '^topk' || fail "list lacks the topk family"
"$kgen" plan topk --target sm_100a --topk 1024 | grep -q 'rounds of 8192 staged candidates' || fail "plan topk lacks the merge line"
"$kgen" topk --target sm_100a -o "$tmp/topk.ptx" || fail "topk --target sm_100a"
grep -q '^//@grid cdiv(n,16384) rows 1$' "$tmp/topk.ptx" || fail "topk: grid line"
# the CTA pair (docs/cta-pair.md): clusters of 2, one M = 256 MMA, half of B per CTA
"$kgen" plan gemm --target sm_100a --cta-pair 1 >"$tmp/pair" || fail "plan gemm --cta-pair 1"
grep -q 'tcgen05.mma.cta_group::2 M=256 N=256; each CTA holds 128 rows of A, 128 of B and D' "$tmp/pair" ||
	fail "pair plan: $(grep 'cta pair' "$tmp/pair")"
expect_error "--cluster-n=2: on sm_100a clusters along N are pairs sharing A; it needs --cta-pair 1" gemm --target sm_100a --cluster-n 2
# sm_90a A multicast (docs/estimate.md, "A multicast"): clusters of 2 CTAs along N
expect_error "--cluster-n=2 with --moe: the CTAs of a cluster share their A rows" gemm --target sm_90a --dtype e4m3 --scale block128 --tile-k 128 --moe masked --cluster-n 2
"$kgen" gemm --target sm_90a --cluster-n 2 -o "$tmp/cn2.ptx" || fail "gemm --target sm_90a --cluster-n 2"
grep -q '^//@cluster 2 1 1$' "$tmp/cn2.ptx" || fail "cn2 gemm: no //@cluster 2 1 1"
grep -q '^//@grid cdiv(M,128)\*cdiv(N,512)\*2 1 1$' "$tmp/cn2.ptx" || fail "cn2 gemm: grid line $(grep '^//@grid' "$tmp/cn2.ptx")"
grep -q '^//@args .*--cluster-n 2' "$tmp/cn2.ptx" || fail "cn2 gemm: the args line drops --cluster-n 2"
grep -q 'box=64,64 swizzle=128 tensor=A' "$tmp/cn2.ptx" || fail "cn2 gemm: A box is not tile-m/2 = 64 rows"
grep -q 'multicast::cluster \[' "$tmp/cn2.ptx" || fail "cn2 gemm: no multicast TMA"
grep -q 'and.b32 .*0x3FFFF' "$tmp/cn2.ptx" || fail "cn2 gemm: descriptors keep the CTA rank bits"
"$kgen" gemm --target sm_100a --cta-pair 1 --cluster-n 2 -o "$tmp/pair2.ptx" || fail "gemm --cluster-n 2"
grep -q '^//@cluster 4 1 1$' "$tmp/pair2.ptx" || fail "pair2 gemm: no //@cluster 4 1 1"
grep -q 'tensor=A\[M,K\]' "$tmp/pair2.ptx" && grep -q 'box=64,64 swizzle=128 tensor=A' "$tmp/pair2.ptx" ||
	fail "pair2 gemm: A box is not tile-m/2 = 64 rows"
grep -q 'multicast::cluster.cta_group::2' "$tmp/pair2.ptx" || fail "pair2 gemm: no multicast TMA"
"$kgen" gemm --target sm_100a --cta-pair 1 --tile-n 112 -o "$tmp/pair.ptx" || fail "gemm --cta-pair 1"
grep -q '^//@cluster 2 1 1$' "$tmp/pair.ptx" || fail "pair gemm: no //@cluster 2 1 1"
grep -q 'box=64,56 ' "$tmp/pair.ptx" || fail "pair gemm: B box is not tile-n/2 = 56 rows"
expect_error "n=" idesc --kind f16 --a bf16 --b bf16 --d f32 --m 128 --n 100
expect_error "swizzle" desc --target sm_100a --major K --swizzle 96 --dtype bf16 --rows 128 --cols 64

# fmha: every rule a plan can break, named in the message
expect_error "heads-q must be a multiple of heads-kv" fmha --heads-q 8 --heads-kv 3
expect_error "so the dims must match" fmha --kv-shared 1 --head-dim 128 --head-dim-v 64
expect_error "--tile-m=256: sm_90a fmha runs one to three 64-row warpgroups" fmha --target sm_90a --tile-m 256
expect_error "--tile-m=64: sm_100a fmha works on one or two 128-row Q tiles" fmha --target sm_100a --tile-m 64
expect_error "need 640 TMEM columns, sm_100a has 512" fmha --target sm_100a --head-dim 256 --tile-m 256
expect_error "a softmax thread needs 296 registers" fmha --target sm_100a --head-dim 128 --tile-m 128 --tile-n 128 --stages 4
expect_error "of shared memory, sm_90a allows" fmha --target sm_90a --head-dim 128 --tile-n 256 --stages 4
expect_error "--pack-heads=128: a Q tile of 64 rows" fmha --target sm_90a --head-dim 512 --heads-q 128 --heads-kv 1 --pack-heads 128
expect_error "16 must divide the group of 8" fmha --target sm_90a --heads-q 8 --heads-kv 1 --pack-heads 8 --tile-m 128
expect_error "--pack-heads=3: must be one of" fmha --pack-heads 3
"$kgen" plan fmha --target sm_100a --head-dim 512 --heads-q 128 --heads-kv 1 --kv-shared 1 --pack-heads 128 --tile-m 128 >"$tmp/plan" ||
	fail "plan fmha sm_100a packed"
grep -q 'tensor memory' "$tmp/plan" || fail "fmha plan lacks the TMEM map"
grep -q '1 query row x 128 heads' "$tmp/plan" || fail "fmha plan does not state the head packing"
grep -q '^grid .*cdiv(max_seqlen_q,1) x 2 O-column halves x 1 head block x batch' "$tmp/plan" ||
	fail "fmha plan grid: $(grep '^grid' "$tmp/plan")"

# the sm_100a estimate at hd64 (2 Q tiles of 128 rows, 64 keys), by hand:
# MUFU ex2 256·(64·(8-K)/8 + 1) at 16/clk; issue 256·64·(3.5 + 9K/8) at
# 128/clk. K=0: 16640 (1040 clk) > MMA 512 -> exp unit, 512/1040 = 49%.
# K=2: 12544 (784 clk), issue 94208 (736 clk) -> exp-bound, 65%: the
# plan's default.
"$kgen" plan fmha --target sm_100a --head-dim 64 --exp2-fma 0 >"$tmp/e0"
grep -q 'MUFU ex2 16640 (1040 clk' "$tmp/e0" || fail "hd64 K=0 ex2 count: $(grep MUFU "$tmp/e0")"
grep -q 'bound: exp unit, 1040 clk per tile -> at most 49%' "$tmp/e0" || fail "hd64 K=0 bound: $(grep bound "$tmp/e0")"
"$kgen" plan fmha --target sm_100a --head-dim 64 >"$tmp/e2"
grep -q 'MUFU ex2 12544 (784 clk; 2 of 8' "$tmp/e2" || fail "hd64 default exp2-fma: $(grep MUFU "$tmp/e2")"
grep -q 'softmax issue 94208 (736 clk)' "$tmp/e2" || fail "hd64 issue: $(grep MUFU "$tmp/e2")"
grep -q 'bound: exp unit, 784 clk per tile -> at most 65%' "$tmp/e2" ||
	fail "hd64 default bound: $(grep bound "$tmp/e2")"

# the sm_100a plans ranked at hd512 (docs/estimate.md, "sm_100a fmha plans";
# tests/unit/test_fmha_cost.c derives the figures): pair64 89 % (this
# kernel), m64 50 %; with K=V and packed heads (no pair64 yet) the o-split
# plan at 36 % below pair64 and m64
"$kgen" plan fmha --target sm_100a --head-dim 512 >"$tmp/c512"
grep -q '1\. pair64 .* 64 keys, 2 stages: .*bound shared-memory bandwidth -> 89% (this kernel)' "$tmp/c512" ||
	fail "hd512 candidates: $(grep -A4 '^candidates' "$tmp/c512")"
grep -q '2\. m64 .*-> 50% (not emitted by kgen yet)' "$tmp/c512" || fail "hd512 m64: $(grep -A4 '^candidates' "$tmp/c512")"
grep -q '^choice          pair64, the best plan the generator emits (ranked first)' "$tmp/c512" ||
	fail "hd512 choice: $(grep '^choice' "$tmp/c512")"
grep -q '^grid .*cdiv(max_seqlen_q,128) x 2 CTAs of a cluster pair' "$tmp/c512" ||
	fail "hd512 grid: $(grep '^grid' "$tmp/c512")"
grep -q '3\. o-split .*-> 36% (this kernel)' "$tmp/plan" || fail "packed hd512 o-split: $(grep -A4 '^candidates' "$tmp/plan")"
grep -q '^choice          o-split, the best plan the generator emits (the plans above it wait for the generator)' "$tmp/plan" ||
	fail "packed hd512 choice: $(grep '^choice' "$tmp/plan")"

# -o: written whole, no temporary left behind, old file kept on failure
"$kgen" gemm --target sm_90a -o "$tmp/k.ptx" || fail "gemm -o"
head -1 "$tmp/k.ptx" | grep -q '^//@kgen-abi 1$' || fail "-o file lacks the header"
ls -a "$tmp" | grep -q kgen- && fail "temporary file left behind"
cp "$tmp/k.ptx" "$tmp/before"
"$kgen" gemm --tile-m 96 -o "$tmp/k.ptx" 2>/dev/null
cmp -s "$tmp/k.ptx" "$tmp/before" || fail "failed run changed the output file"

# numbers: decimal or 0x hex, never octal, no trailing text
"$kgen" gemm --tile-n 0x80 | grep -q -- '^//@args .*--tile-n 128 ' || fail "--tile-n 0x80 is not 128"
expect_error "--tile-n=0200: must be in 16..256" gemm --tile-n 0200
expect_error "--tile-n=128x: must be an integer" gemm --tile-n 128x
expect_error "--tile-n=99999999999999999999: must be an integer" gemm --tile-n 99999999999999999999
expect_error "--addr=0200x: must be an integer" desc --target sm_100a --major K --swizzle 128 --dtype bf16 --rows 128 --cols 64 --addr 0200x
[ "$("$kgen" desc --target sm_100a --major K --swizzle 128 --dtype bf16 --rows 128 --cols 64 --addr 01024 | head -1)" = \
  "$("$kgen" desc --target sm_100a --major K --swizzle 128 --dtype bf16 --rows 128 --cols 64 --addr 0x400 | head -1)" ] ||
	fail "desc --addr 01024 is not decimal 1024"

# the softmax scale is a run-time kernel argument (softmax_scale), not a
# generation parameter: kgen refuses it by name
expect_error "softmax-scale" fmha --softmax-scale 0.125

# families: every one in the table, and each subcommand's own options
expect_error "family=nope: unknown (families: gemm, fmha, decode, decode_merge, indexer, topk)" nope
# decode cache formats: the head_dim_qk each stores
expect_error "--head-dim-qk=576 with --format=fp8-v4: the format stores head_dim_qk 512" decode --format fp8-v4 --head-dim-qk 576
expect_error "--head-dim-qk=512 with --format=fp8-v32: the format stores head_dim_qk 576" decode --format fp8-v32 --head-dim-qk 512
expect_error "--format=fp8-v5" decode --format fp8-v5
expect_error "--topk-extra=128 with --addressing-extra=paged: a paged source has no index list" decode --addressing-extra paged --topk-extra 128
expect_error "--topk-length=1: every source is paged" decode --addressing paged --topk-length 1
expect_error "--addressing=dense: must be one of sparse,paged" decode --addressing dense
expect_error "--sink=1 with --unnormalized=1: the sink joins the denominator once, in the merge" decode --sink 1 --unnormalized 1
expect_error "--heads-q=0" decode_merge --heads-q 0
expect_error "--sink=1 with --unnormalized=1: the sink joins the denominator once, in the merge" decode --target sm_100a --sink 1 --unnormalized 1
for f in $("$kgen" list | sed -n 's/^\([a-z0-9_]*\) — .*/\1/p'); do
	"$kgen" "$f" --help >"$tmp/help" || fail "kgen $f --help: status $?"
	"$kgen" plan "$f" -h | cmp -s - "$tmp/help" || fail "kgen plan $f -h differs from kgen $f --help"
	# the family line and a row per parameter: --target and at least one more
	[ "$(wc -l <"$tmp/help")" -ge 3 ] || fail "kgen $f --help: too short"
	# the same rows `kgen list` prints for it, derived from one table
	grep -vxFf <("$kgen" list) "$tmp/help" | grep -q . && fail "kgen $f --help: lines not in kgen list"
done
"$kgen" gemm --help | grep -q -- '--tile-m' || fail "gemm --help lacks --tile-m"
"$kgen" fmha --help | grep -q -- '--head-dim' || fail "fmha --help lacks --head-dim"
"$kgen" desc --help | grep -q -- '--swizzle VALUE' || fail "desc --help lacks --swizzle"
"$kgen" idesc --help | grep -q -- '--neg-a$' || fail "idesc --help lacks the flag --neg-a"

# no silent loss: a write that fails exits 74 with the reason
if [ -w /dev/full ]; then
	"$kgen" gemm >/dev/full 2>"$tmp/err"; rc=$?
	[ $rc -eq 74 ] || fail "kgen gemm >/dev/full: status $rc, want 74"
	grep -q 'standard output.*No space left' "$tmp/err" || fail "/dev/full: $(cat "$tmp/err")"
	"$kgen" list >/dev/full 2>/dev/null; rc=$?
	[ $rc -eq 74 ] || fail "kgen list >/dev/full: status $rc, want 74"
fi
"$kgen" gemm >&- 2>"$tmp/err"; rc=$?
[ $rc -eq 74 ] || fail "kgen gemm with stdout closed: status $rc, want 74"
"$kgen" gemm -o "$tmp/nodir/k.ptx" 2>"$tmp/err"; rc=$?
[ $rc -eq 74 ] || fail "-o into a missing directory: status $rc, want 74"
grep -q 'nodir/k.ptx' "$tmp/err" || fail "-o failure does not name the file: $(cat "$tmp/err")"

# -o: a long valid name (the temporary name must still fit NAME_MAX)
long=$(printf 'k%.0s' $(seq 1 250)).ptx
"$kgen" gemm -o "$tmp/$long" || fail "-o with a 254-byte name"
[ -s "$tmp/$long" ] || fail "-o long name: no file"
ls -a "$tmp" | grep -q kgen- && fail "temporary file left behind (long name)"
# -o over a symlink writes its target; an existing file keeps its mode
echo old >"$tmp/target.ptx"
chmod 600 "$tmp/target.ptx"
ln -s target.ptx "$tmp/link.ptx"
"$kgen" gemm -o "$tmp/link.ptx" || fail "-o through a symlink"
[ -L "$tmp/link.ptx" ] || fail "-o replaced the symlink with a file"
head -1 "$tmp/target.ptx" | grep -q '^//@kgen-abi 1$' || fail "-o did not write the link's target"
[ "$(stat -c %a "$tmp/target.ptx")" = 600 ] || fail "-o changed 0600 to $(stat -c %a "$tmp/target.ptx")"
ln -s missing.ptx "$tmp/dangling.ptx"
"$kgen" gemm -o "$tmp/dangling.ptx" 2>"$tmp/err"; rc=$?
[ $rc -eq 74 ] && grep -q 'symlink' "$tmp/err" || fail "-o over a dangling link: status $rc, $(cat "$tmp/err")"
( umask 027; "$kgen" gemm -o "$tmp/new.ptx" ) || fail "-o new file"
[ "$(stat -c %a "$tmp/new.ptx")" = 640 ] || fail "-o new file with umask 027: mode $(stat -c %a "$tmp/new.ptx")"

[ $fails -eq 0 ] && echo "cli: all passed"
exit $((fails != 0))
