#!/usr/bin/env python3
"""Time the peers at the shape kbench just timed.

    python3 tools/peers.py gemm M N K DTYPE ITERS WARMUP [OUT_DTYPE]   (DTYPE e4m3: block-scaled)
    python3 tools/peers.py gemm_moe M N K E contiguous|masked ITERS WARMUP OUT_DTYPE FLOPS
    python3 tools/peers.py fmha B SQ SK HQ HKV D DV MASK DTYPE ITERS WARMUP SCALE KVSHARED
    python3 tools/peers.py decode B SQ HQ TOPK PS TOPKX PSX PAGES PAGESX SINK ITERS WARMUP FLOPS BYTES
    python3 tools/peers.py indexer B SQ H TOPK PS LEN ITERS WARMUP FLOPS BYTES
    python3 tools/peers.py topk ROWS N K ITERS WARMUP

kbench runs this in a child process right after timing our kernel, on the
same GPU in the same run, and reads the lines on stdout, one per peer:

    peer <name> <TFLOP/s>          e.g. "peer torch.matmul 781.3"
    peer <name> - <why>            that peer cannot run this case, e.g.
                                   "peer sdpa-flash - does not run: ..."
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
    if argv[3] == "e4m3":
        return gemm_fp8(torch, m, n, k, int(argv[4]), int(argv[5]),
                        getattr(torch, DTYPES[argv[6] if len(argv) == 7 else "bf16"]))
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
    return [(name, tflops, None)]


def gemm_fp8(torch, m, n, k, iters, warmup, out):
    """Peers of the block-scaled e4m3 gemm (docs/ABI.md, "gemm"), each
    timed alone: torch._scaled_mm (cuBLAS) with one fp32 scale per tensor,
    with DeepSeek's block scales (1x128 for A, 128x128 for B: recent torch
    and cuBLAS only; the error is reported otherwise), and a BF16 matmul of
    the same shape. _scaled_mm takes B as a column-major [K,N]: B[N,K].t()."""
    f8 = getattr(torch, "float8_e4m3fn", None)
    if f8 is None or not hasattr(torch, "_scaled_mm"):
        return [(None, None, f"torch {torch.__version__} has no float8_e4m3fn/_scaled_mm")]
    gen = torch.Generator(device="cuda").manual_seed(1)
    nsets = set_count(torch, m * k + n * k + m * n * 2)
    sets = []
    for _ in range(nsets):
        a = torch.randn(m, k, device="cuda", generator=gen).to(f8)
        b = torch.randn(n, k, device="cuda", generator=gen).to(f8)
        sets.append((a, b))
    one = torch.ones((), device="cuda", dtype=torch.float32)
    kb, nb = (k + 127) // 128, (n + 127) // 128
    # A's scales M-major (our SA[K/128, M] seen as [M, K/128]), B's [K/128, N/128]
    sa = torch.rand(kb, m, device="cuda", generator=gen).add_(0.5).t()
    sb = torch.rand(nb, kb, device="cuda", generator=gen).add_(0.5).t()
    variants = [
        ("torch._scaled_mm[tensor]", lambda s: torch._scaled_mm(s[0], s[1].t(), scale_a=one, scale_b=one,
                                                                out_dtype=out)),
        ("torch._scaled_mm[block]", lambda s: torch._scaled_mm(s[0], s[1].t(), scale_a=sa, scale_b=sb,
                                                               out_dtype=out)),
    ]
    results = []
    for name, fn in variants:
        try:
            fn(sets[0])
            torch.cuda.synchronize()
        except (TypeError, RuntimeError, ValueError) as e:
            say(f"peers.py: {name} {m}x{n}x{k}: {e}")
            results.append((name, None, f"does not run: {first_line(e)}"))
            continue
        med, lo, hi = time_calls(torch, [lambda s=s, fn=fn: fn(s) for s in sets], iters, warmup)
        say(f"peers.py: {name} {m}x{n}x{k} e4m3->{out}: median {med:.4f} ms (min {lo:.4f}, max {hi:.4f}), "
            f"{nsets} input set(s), {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
        results.append((name, 2.0 * m * n * k / (med * 1e-3) / 1e12, None))
    del sets
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    med, _, _ = time_calls(torch, [lambda: torch.mm(a, b.t(), out=c)], iters, warmup)
    results.append(("torch.matmul[bf16]", 2.0 * m * n * k / (med * 1e-3) / 1e12, None))
    return results


def gemm_moe(torch, argv):
    """Peers of the MoE gemm (docs/ABI.md, "MoE layouts"), E experts of
    N x K e4m3 weights with block scales, timed alone, each reported as
    FLOPS (ours: 2·N·K per row an expert owns, from kbench's drawn table)
    over its median time, so the TF/s compare the same work:
    - torch._scaled_mm[block,loop]: one cuBLAS block-scaled call per
      expert (1x128 A scales, 128x128 B scales), the experts' rows split
      evenly (contiguous: M/E each; masked: every slab's M rows, as a
      graph-captured loop would run them);
    - torch.bmm[bf16] (masked: [E,M,K]·[E,K,N], all slab rows) or
      torch.matmul[bf16] (contiguous: one dense M x N x K, no expert
      boundaries: the work with the best shape cuBLAS can get).
    Weight bytes per second follow from kbench's byte count over the same
    time (it prints GB/s for ours; for a peer, GB/s = ours · ours_ms /
    peer_ms)."""
    if len(argv) != 9:
        raise SystemExit("usage: peers.py gemm_moe M N K E contiguous|masked ITERS WARMUP OUT_DTYPE FLOPS")
    m, n, k, e = (int(x) for x in argv[:4])
    masked, iters, warmup = argv[4] == "masked", int(argv[5]), int(argv[6])
    out, flops = getattr(torch, DTYPES[argv[7]]), float(argv[8])
    f8 = getattr(torch, "float8_e4m3fn", None)
    gen = torch.Generator(device="cuda").manual_seed(1)
    results = []
    rows = m if masked else max(1, m // e)
    if f8 is not None and hasattr(torch, "_scaled_mm"):
        a = torch.randn(e * rows, k, device="cuda", generator=gen).to(f8)
        b = torch.randn(e, n, k, device="cuda", generator=gen).to(f8)
        kb, nb = (k + 127) // 128, (n + 127) // 128
        sa = torch.rand(kb, e * rows, device="cuda", generator=gen).add_(0.5)
        sb = torch.rand(e, nb, kb, device="cuda", generator=gen).add_(0.5)

        def loop():
            for x in range(e):
                r = slice(x * rows, (x + 1) * rows)
                torch._scaled_mm(a[r], b[x].t(), scale_a=sa[:, r].t(), scale_b=sb[x].t(), out_dtype=out)
        name = "torch._scaled_mm[block,loop]"
        try:
            loop()
            torch.cuda.synchronize()
            med, lo, hi = time_calls(torch, [loop], iters, warmup)
            say(f"peers.py: {name} E={e} {rows}x{n}x{k} each: median {med:.4f} ms (min {lo:.4f}, max {hi:.4f}), "
                f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
            results.append((name, flops / (med * 1e-3) / 1e12, None))
        except (TypeError, RuntimeError, ValueError) as x:
            say(f"peers.py: {name}: {x}")
            results.append((name, None, f"does not run: {first_line(x)}"))
        del a, b, sa, sb
    else:
        results.append(("torch._scaled_mm[block,loop]", None, f"torch {torch.__version__} has no float8_e4m3fn/_scaled_mm"))
    if masked:
        a = torch.randn(e, m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        c = torch.empty(e, m, n, device="cuda", dtype=torch.bfloat16)
        med, _, _ = time_calls(torch, [lambda: torch.bmm(a, b.transpose(1, 2), out=c)], iters, warmup)
        results.append(("torch.bmm[bf16]", flops / (med * 1e-3) / 1e12, None))
    else:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        med, _, _ = time_calls(torch, [lambda: torch.mm(a, b.t(), out=c)], iters, warmup)
        results.append(("torch.matmul[bf16]", flops / (med * 1e-3) / 1e12, None))
    return results


def first_line(text, limit=160):
    """The first nonblank line of an exception or warning, shortened."""
    lines = [l.strip() for l in str(text).splitlines() if l.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


# SDPA's backends, each forced in turn through sdpa_kernel; columns: the
# name printed, the SDPBackend member.
SDPA_BACKENDS = [
    ("sdpa-cudnn", "CUDNN_ATTENTION"),
    ("sdpa-flash", "FLASH_ATTENTION"),
    ("sdpa-efficient", "EFFICIENT_ATTENTION"),
]


def fmha(torch, argv):
    """torch.nn.functional.scaled_dot_product_attention with each backend
    forced, on the shape and configuration of our kernel.

    Inputs are made [B, S, H, D] (our packed layout, one sequence per batch
    row) and passed as .transpose(1, 2) views, SDPA's logical [B, H, S, D]
    without a copy, as FlashAttention's own layout is. GQA/MQA: first with
    enable_gqa=True (K/V read once per KV head, as ours does); a backend
    that refuses it (or a torch without it) is retried with K/V heads
    repeated to Hq beforehand, outside the timing, and its name gets
    "+kvrep" (it then reads Hq/Hkv times the K/V bytes). kv-shared: v is k.
    Causal: SDPA's is_causal is aligned top-left; ours bottom-right; the two
    agree when Sq == Sk (every bench shape), and otherwise the peer gets
    torch.nn.attention.bias.causal_lower_right(Sq, Sk) ("+lrbias"). The
    softmax scale is ours. Peers write no LSE; ours may (--lse 1).
    Method as gemm's: random N(0,1) inputs, rotated sets, per-call events,
    median; flops as kbench's: 2·B·H·Sq·Sk·(D + Dv), halved for causal."""
    if len(argv) != 13:
        raise SystemExit("usage: peers.py fmha B SQ SK HQ HKV D DV MASK DTYPE ITERS WARMUP SCALE KVSHARED")
    b, sq, sk, hq, hkv, d, dv = (int(x) for x in argv[:7])
    mask, dtype = argv[7], getattr(torch, DTYPES[argv[8]])
    iters, warmup, scale, shared = int(argv[9]), int(argv[10]), float(argv[11]), argv[12] == "1"
    if mask not in ("none", "causal"):
        return [(None, None, f"mask {mask}: no SDPA peer")]
    import warnings
    import torch.nn.functional as F
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        return [(None, None, f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel: {e}")]
    esize = torch.tensor([], dtype=dtype).element_size()
    set_bytes = (b * sq * hq * (d + dv) + b * sk * hkv * (d + (0 if shared else dv))) * esize
    nsets = set_count(torch, set_bytes)
    gen = torch.Generator(device="cuda").manual_seed(1)

    def randn(s, h, dim):
        return torch.randn(b, s, h, dim, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)

    sets = []
    for _ in range(nsets):
        q = randn(sq, hq, d)
        k = randn(sk, hkv, d)
        v = k if shared else randn(sk, hkv, dv)
        sets.append((q, k, v))
    causal = mask == "causal"
    attn_mask, tag_mask = None, ""
    if causal and sq != sk:
        try:
            from torch.nn.attention.bias import causal_lower_right
            attn_mask, tag_mask = causal_lower_right(sq, sk), "+lrbias"
        except ImportError:
            tag_mask = "+topleft"  # is_causal below: not our mask, said in the name

    def call(s, gqa):
        kw = {"scale": scale}
        if attn_mask is not None:
            kw["attn_mask"] = attn_mask
        else:
            kw["is_causal"] = causal
        if gqa:
            kw["enable_gqa"] = True
        return F.scaled_dot_product_attention(s[0], s[1], s[2], **kw)

    def probe(label, calls):
        """Runs the first call; None if it ran, else why not: the
        exception's first line and the reasons SDPA gave as warnings,
        which is where it says why a forced backend declined."""
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                calls[0]()
                torch.cuda.synchronize()
                return None
            except Exception as e:  # any refusal is a result to report
                why = f"{type(e).__name__}: {first_line(e)}"
                # SDPA warns "<kernel> not used because:" and then its
                # reasons, one warning each, for every backend: the others
                # say "... has been runtime disabled". Keep the forced
                # one's reasons, without the C++ source location.
                reasons = []
                for x in w:
                    r = first_line(str(x.message).split("(Triggered internally")[0], 120)
                    if r and not r.endswith(":") and "runtime disabled" not in r and r not in reasons:
                        reasons.append(r)
                if reasons:
                    say(f"peers.py: {label} declined: {'; '.join(reasons)}")
                    why += " (" + "; ".join(reasons[:2]) + ")"
                return why

    flops = 2.0 * b * hq * sq * sk * (d + dv) * (0.5 if causal else 1.0)
    results = []
    for name, member in SDPA_BACKENDS:
        backend = getattr(SDPBackend, member, None)
        if backend is None:
            results.append((name, None, f"does not run: torch {torch.__version__} has no SDPBackend.{member}"))
            continue
        with sdpa_kernel([backend]):
            why = None
            variants = [(True, "")] if hq != hkv else [(False, "")]
            if hq != hkv:
                variants.append((False, "+kvrep"))
            for gqa, tag in variants:
                use = sets
                if tag == "+kvrep":
                    use = []
                    for s in sets:
                        kr = s[1].repeat_interleave(hq // hkv, dim=1)
                        use.append((s[0], kr, kr if shared else s[2].repeat_interleave(hq // hkv, dim=1)))
                calls = [lambda s=s, g=gqa: call(s, g) for s in use]
                err = probe(name + tag, calls)
                if err is None:
                    why = None
                    break
                if why is None:
                    why = err
                else:
                    why += "; the same with K/V heads repeated" if err == why else f"; {tag}: {err}"
            if why is not None:
                results.append((name, None, f"does not run: {why}"))
                continue
            med, lo, hi = time_calls(torch, calls, iters, warmup)
        label = name + tag + tag_mask
        say(f"peers.py: {label} B={b} Sq={sq} Sk={sk} Hq={hq} Hkv={hkv} D={d} Dv={dv} {mask} "
            f"{argv[8]}{' kv-shared' if shared else ''}: median {med:.4f} ms (min {lo:.4f}, "
            f"max {hi:.4f}) over {iters} calls, {nsets} input set(s), "
            f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
        results.append((label, flops / (med * 1e-3) / 1e12, None))
        del calls, use
    return results


V4_ROW, V4_SCALES, V4_NOPE = 576, 8, 448


def v4_page_bytes(ps):
    """fp8-v4 page: ps rows of 576 bytes, ps 8-byte scale entries, padded
    to a multiple of 576 (docs/ABI.md "decode")."""
    return (ps * (V4_ROW + V4_SCALES) + V4_ROW - 1) // V4_ROW * V4_ROW


def decode(torch, argv):
    """The naive PyTorch decode kbench compares with: per source, gather
    each row's tokens from the paged fp8-v4 bytes, dequantize (E4M3 times
    2^(e-127), RoPE as BF16), then Q·K^T, softmax (sink in the
    denominator), P·V in bf16. Full index lists on caches of kbench's
    shape, random bytes for the values (valid E4M3, exponents near 127).
    Also the device-to-device copy rate of a 1 GiB buffer (read + write
    bytes per second), the physical limit kbench's GB/s compares with."""
    if len(argv) != 14:
        return [(None, None, "decode: want 14 arguments")]
    b, sq, hq, topk, ps, topkx, psx, pages, pagesx, sink, iters, warmup = (int(x) for x in argv[:12])
    flops, nbytes = float(argv[12]), float(argv[13])
    dev = "cuda"
    g = torch.Generator(device=dev)
    g.manual_seed(1)
    results = []

    def make(topk_, ps_, pages_):
        pb = v4_page_bytes(ps_)
        cache = torch.randint(0, 256, (pages_, pb), dtype=torch.uint8, device=dev, generator=g)
        # keep E4M3 codes finite (no 0x7f/0xff) and exponents near 2^0
        cache[:, : ps_ * V4_ROW].view(pages_, ps_, V4_ROW)[:, :, :V4_NOPE] &= 0x77
        sc = cache[:, ps_ * V4_ROW: ps_ * (V4_ROW + V4_SCALES)].view(pages_, ps_, V4_SCALES)
        sc[:] = 120 + (sc % 8)
        rope = cache[:, : ps_ * V4_ROW].view(pages_, ps_, V4_ROW)[:, :, V4_NOPE:]
        rope[:] = torch.randn(pages_, ps_, 64, device=dev, generator=g).to(torch.bfloat16).view(torch.uint8).view(pages_, ps_, 128)
        cap = pages_ * ps_
        idx = torch.stack([torch.randperm(cap, device=dev, generator=g)[:topk_] for _ in range(b * sq)]).view(b, sq, topk_)
        return cache, idx.to(torch.int32), pb

    srcs = [make(topk, ps, pages)]
    if topkx:
        srcs.append(make(topkx, psx, pagesx))
    q = torch.randn(b, sq, hq, 512, device=dev, generator=g).to(torch.bfloat16)
    sinkv = torch.randn(hq, device=dev, generator=g) if sink else None
    ar_row = torch.arange(V4_ROW, device=dev)
    ar_sc = torch.arange(7, device=dev)
    scale = 1.0 / math.sqrt(512)

    def gather(cache, idx, pb, ps_):
        flat = cache.view(-1)
        page, off = (idx // ps_).long(), (idx % ps_).long()
        base = page * pb + off * V4_ROW
        rows = flat[base[..., None] + ar_row]                          # [b, sq, k, 576]
        sbase = page * pb + ps_ * V4_ROW + off * V4_SCALES
        e = flat[sbase[..., None] + ar_sc].float()                      # [b, sq, k, 7]
        nope = rows[..., :V4_NOPE].contiguous().view(torch.float8_e4m3fn).float()
        nope = nope * torch.exp2(e - 127).repeat_interleave(64, dim=-1)
        rope = rows[..., V4_NOPE:].contiguous().view(torch.bfloat16).float()
        return torch.cat([nope, rope], dim=-1).to(torch.bfloat16)     # [b, sq, k, 512]

    def naive():
        k = torch.cat([gather(c, i, pb, p) for (c, i, pb), p in zip(srcs, [ps, psx])], dim=2)
        s = torch.einsum("bshd,bskd->bshk", q, k).float() * scale
        if sinkv is not None:
            s = torch.cat([s, sinkv.view(1, 1, hq, 1).expand(b, sq, hq, 1)], dim=-1)
        p = torch.softmax(s, dim=-1)
        if sinkv is not None:
            p = p[..., :-1]
        return torch.einsum("bshk,bskd->bshd", p.to(torch.bfloat16), k)

    try:
        med, lo, hi = time_calls(torch, [naive], iters, warmup)
        say(f"peers.py: naive torch decode b{b} sq{sq} h{hq} top-k {topk}+{topkx}: median {med:.4f} ms "
            f"(min {lo:.4f}, max {hi:.4f}), {nbytes / (med * 1e-3) / 1e9:.0f} GB/s by kbench's count, "
            f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
        results.append(("torch-naive", flops / (med * 1e-3) / 1e12, None))
    except Exception as ex:  # noqa: BLE001 - report, never crash kbench
        results.append(("torch-naive", None, f"does not run: {first_line(str(ex))}"))
    del srcs
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    med, _, _ = time_calls(torch, [lambda: dst.copy_(src)], 20, 5)
    rate = 2 * n / (med * 1e-3) / 1e9
    say(f"peers.py: device-to-device copy of 1 GiB: {med:.4f} ms, {rate:.0f} GB/s (read + write)")
    results.append(("d2d-copy", None, f"copy rate {rate:.0f} GB/s (1 GiB, read + write; ours by kbench's count "
                                      f"{nbytes / 1e9:.4g} GB per call)"))
    return results


def indexer(torch, argv):
    """The naive PyTorch indexer kbench compares with (the issue's): every
    sequence LEN keys in a paged fp8 cache (docs/ABI.md "indexer"; pages in
    random order), gather the pages, widen E4M3 to f32, Q·K^T per head
    (einsum), times the scale, relu, weighted sum over heads, causal mask,
    torch.topk (none at TOPK 0: the logits alone). Also torch.topk alone
    over those logits and the device-to-device copy rate."""
    if len(argv) != 10:
        return [(None, None, "indexer: want 10 arguments")]
    b, sq, h, topk, ps, n, iters, warmup = (int(x) for x in argv[:8])
    flops, nbytes = float(argv[8]), float(argv[9])
    dev = "cuda"
    g = torch.Generator(device=dev)
    g.manual_seed(1)
    results = []
    np_ = (n + ps - 1) // ps
    pages = b * np_
    cache = torch.randint(0, 256, (pages, ps * 132), dtype=torch.uint8, device=dev, generator=g)
    cache[:, : ps * 128] &= 0x77                      # finite E4M3 codes
    cache[:, ps * 128:].view(torch.float32)[:] = torch.rand(pages, ps, device=dev, generator=g).view(pages, ps) + 0.5
    bt = torch.randperm(pages, device=dev, generator=g).view(b, np_)
    q = (torch.randn(b, sq, h, 128, device=dev, generator=g)).to(torch.float8_e4m3fn)
    w = torch.randn(b, sq, h, device=dev, generator=g)
    pos = torch.arange(np_ * ps, device=dev)
    vis = pos[None, :] <= (n - sq + torch.arange(sq, device=dev))[:, None]      # [sq, L]

    def logits():
        pg = cache[bt.long()]                                                 # [b, np, ps*132]
        k = pg[..., : ps * 128].reshape(b, np_ * ps, 128).view(torch.float8_e4m3fn).float()
        sc = pg[..., ps * 128:].contiguous().view(torch.float32).reshape(b, np_ * ps)
        s = torch.einsum("bthd,bjd->bthj", q.float(), k) * sc[:, None, None, :]
        lg = (s.relu() * w[..., None]).sum(dim=2)                              # [b, sq, L]
        return lg.masked_fill(~vis[None], float("-inf"))

    def naive():
        # top-k 0: the logits alone (kgen's --topk 0 kernel)
        return torch.topk(logits(), min(topk, np_ * ps), dim=-1) if topk else logits()

    try:
        med, lo, hi = time_calls(torch, [naive], iters, warmup)
        say(f"peers.py: naive torch indexer b{b} sq{sq} h{h} len {n} top-k {topk}: median {med:.4f} ms "
            f"(min {lo:.4f}, max {hi:.4f}), {b * sq * n / (med * 1e-3) / 1e9:.3g} G keys/s, "
            f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
        results.append(("torch-naive", flops / (med * 1e-3) / 1e12, None))
        if topk:
            lg = logits()
            med, _, _ = time_calls(torch, [lambda: torch.topk(lg, min(topk, np_ * ps), dim=-1)], iters, warmup)
            say(f"peers.py: torch.topk alone over [{b * sq}, {np_ * ps}] fp32, k {topk}: median {med * 1e3:.1f} us")
            results.append(("torch.topk", None, f"top-k alone {med * 1e3:.1f} us over [{b * sq}, {np_ * ps}]"))
    except Exception as ex:  # noqa: BLE001 - report, never crash kbench
        results.append(("torch-naive", None, f"does not run: {first_line(str(ex))}"))
    del cache
    m = 1 << 30
    src = torch.empty(m, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    med, _, _ = time_calls(torch, [lambda: dst.copy_(src)], 20, 5)
    rate = 2 * m / (med * 1e-3) / 1e9
    say(f"peers.py: device-to-device copy of 1 GiB: {med:.4f} ms, {rate:.0f} GB/s (read + write)")
    results.append(("d2d-copy", None, f"copy rate {rate:.0f} GB/s (1 GiB, read + write; ours by kbench's count "
                                      f"{nbytes / 1e9:.4g} GB of keys per call)"))
    return results


def topk(torch, argv):
    """torch.topk over the same shape as the standalone top-k (docs/ABI.md
    "topk"): ROWS rows of N fp32 N(0,1) logits, k = K. Reported in µs (a
    select does no floating-point work to rate)."""
    if len(argv) != 5:
        return [(None, None, "topk: want 5 arguments")]
    rows, n, k, iters, warmup = (int(x) for x in argv)
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    x = torch.randn(rows, n, device="cuda", generator=g)
    try:
        med, lo, hi = time_calls(torch, [lambda: torch.topk(x, min(k, n), dim=-1)], iters, warmup)
    except Exception as ex:  # noqa: BLE001 - report, never crash kbench
        return [("torch.topk", None, f"does not run: {first_line(str(ex))}")]
    say(f"peers.py: torch.topk over [{rows}, {n}] fp32, k {k}: median {med * 1e3:.1f} us "
        f"(min {lo * 1e3:.1f}, max {hi * 1e3:.1f}), {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    return [("torch.topk", None, f"{med * 1e3:.1f} us over [{rows}, {n}]")]


# One row per family: the function that times its peers. Each returns a
# list of (name, tflops, None) for a peer that ran, (name, None, why) for one
# that cannot run the case, or [(None, None, why)] when there is no peer.
FAMILIES = {
    "gemm": gemm,
    "gemm_moe": gemm_moe,
    "fmha": fmha,
    "decode": decode,
    "indexer": indexer,
    "topk": topk,
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
    for name, tflops, why in FAMILIES[argv[1]](torch, argv[2:]):
        if name is None:
            print(f"peer none {why}", flush=True)
        elif tflops is None:
            print(f"peer {name} - {why}", flush=True)
        else:
            print(f"peer {name} {tflops:.4g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
