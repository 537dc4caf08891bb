#!/usr/bin/env python3
"""Time the best available peer at the shape kbench just timed.

    python3 tools/peers.py gemm M N K DTYPE ITERS WARMUP [OUT_DTYPE]
    python3 tools/peers.py fmha ...            (not yet: see FAMILIES)

kbench runs this in a child process right after timing our kernel, on the
same GPU in the same run, and reads the one line on stdout:

    peer <name> <TFLOP/s>          e.g. "peer torch.matmul 781.3"
    peer none <why>                when there is nothing to compare with

Everything else goes to stderr. The method is kbench's (METHOD.md): random
N(0,1) inputs, never zeros; several input sets rotated when one fits in L2;
each call timed with its own pair of CUDA events; the median reported.
"""
import math
import statistics
import sys

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "f16": "float16", "f32": "float32"}


def say(*args):
    print(*args, file=sys.stderr, flush=True)


def set_count(torch, set_bytes):
    """Input sets to rotate: enough for 4x L2 when one set fits in 2x L2."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
    if set_bytes > 2 * l2:
        return 1
    return min(64, math.ceil(4 * l2 / set_bytes))


def time_calls(torch, calls, iters, warmup):
    """Median milliseconds of one call, each call timed by its own events.
    With one input set the calls run back to back, as krt_time launches
    ours; when rotating, kbench times one launch per krt_time call, which
    waits for it, so here too each call is waited for before the next."""
    rotating = len(calls) > 1
    for i in range(warmup):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        calls[i % len(calls)]()
        ends[i].record()
        if rotating:
            ends[i].synchronize()
    torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(ms), min(ms), max(ms)


def gemm(torch, argv):
    """C[M,N] = A[M,K] · B[N,K]^T, our kernel's layout: torch.mm(A, B.t())
    hands cuBLAS the transposed operand without a copy."""
    if len(argv) not in (6, 7):
        raise SystemExit("usage: peers.py gemm M N K DTYPE ITERS WARMUP [OUT_DTYPE]")
    m, n, k = (int(x) for x in argv[:3])
    dtype = getattr(torch, DTYPES[argv[3]])
    iters, warmup = int(argv[4]), int(argv[5])
    out = getattr(torch, DTYPES[argv[6]]) if len(argv) == 7 else dtype
    esize = torch.tensor([], dtype=dtype).element_size()
    osize = torch.tensor([], dtype=out).element_size()
    nsets = set_count(torch, (m * k + n * k) * esize + m * n * osize)
    gen = torch.Generator(device="cuda").manual_seed(1)
    sets = []
    for _ in range(nsets):
        a = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
        b = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen)
        sets.append((a, b, torch.empty(m, n, device="cuda", dtype=out)))
    name = "torch.matmul"
    if out == dtype:
        calls = [lambda s=s: torch.mm(s[0], s[1].t(), out=s[2]) for s in sets]
    else:
        # A wider output (bf16 in, f32 out) is an argument of torch.mm in
        # recent PyTorch; where it is missing, time the same-type product
        # and say so, since the two differ only in the epilogue's bytes.
        try:
            torch.mm(sets[0][0], sets[0][1].t(), out_dtype=out)
            calls = [lambda s=s: torch.mm(s[0], s[1].t(), out_dtype=out) for s in sets]
        except (TypeError, RuntimeError) as e:
            say(f"peers.py: torch.mm has no out_dtype={argv[6]} here ({e}); timing {argv[3]} output")
            calls = [lambda s=s: torch.mm(s[0], s[1].t()) for s in sets]
            name = f"torch.matmul[{argv[3]}-out]"
    med, lo, hi = time_calls(torch, calls, iters, warmup)
    tflops = 2.0 * m * n * k / (med * 1e-3) / 1e12
    say(f"peers.py: {name} {m}x{n}x{k} {argv[3]}->{argv[6] if len(argv) == 7 else argv[3]}: "
        f"median {med:.4f} ms (min {lo:.4f}, max {hi:.4f}) over {iters} calls, "
        f"{nsets} input set(s), {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    return name, tflops


def fmha(torch, argv):
    """The place for attention: torch.nn.functional.scaled_dot_product_attention
    (cuDNN / flash backends) and, where installed, flash_attn; same method
    as gemm: random inputs, rotated sets, per-call events, median; flops as
    4·B·H·Sq·Sk·D (halved for causal)."""
    return None, "fmha peers not written yet"


# One row per family: the function that times its peers. Each returns
# (name, tflops) or (None, why).
FAMILIES = {
    "gemm": gemm,
    "fmha": fmha,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in FAMILIES:
        say(f"usage: peers.py {{{'|'.join(FAMILIES)}}} ARGS...")
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"peer none torch not importable: {e}")
        return 0
    if not torch.cuda.is_available():
        print("peer none torch sees no CUDA device")
        return 0
    name, result = FAMILIES[argv[1]](torch, argv[2:])
    if name is None:
        print(f"peer none {result}")
    else:
        print(f"peer {name} {result:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
