"""kgen.topk, merge_attn_states (and the FP8 calls below) on PyTorch
tensors: CPU tensors on the emulator, CUDA tensors on the GPU against the
float64 references, torch.compile(fullgraph=True) and CUDA graph capture.
Skipped without torch; the GPU tests without a GPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kgen  # noqa: E402
import ref  # noqa: E402
from torchtest import f64, gpu  # noqa: E402


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


def test_topk_cpu(gen):
    x = randn(gen, 3, 999)
    idx = kgen.topk(x, 50)
    assert idx.dtype == torch.int32 and idx.shape == (3, 50) and idx.device.type == "cpu"
    assert ref.topk_ok(f64(x), idx.numpy(), 50)


def test_merge_cpu(gen):
    outs, lses = randn(gen, 2, 1, 2, 3, 512), randn(gen, 2, 1, 3, 2)
    o, lse = kgen.merge_attn_states(outs, lses, target="sm_90a")
    wo, wl = ref.merge_states(f64(outs), f64(lses))
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert np.abs(f64(o) - wo).max() <= 2 ** -8 * np.abs(wo).max()
    assert np.abs(f64(lse) - wl).max() < 1e-5 * max(1, np.abs(wl).max())


@gpu
@pytest.mark.parametrize("rows,n,k", [(4, 300, 512), (64, 70001, 512), (3, 40000, 2048),
                                      (130, 8191, 1024)])
def test_topk_gpu(gen, rows, n, k):
    x = randn(gen, rows, n, device="cuda")
    idx = kgen.topk(x, k)
    torch.cuda.synchronize()
    assert idx.device == x.device and idx.dtype == torch.int32
    assert ref.topk_ok(f64(x), idx.cpu().numpy(), k)


@gpu
def test_topk_compile_and_graph(gen):
    x = randn(gen, 8, 20000, device="cuda")
    f = torch.compile(lambda t: kgen.topk(t * 2, 512), fullgraph=True)
    assert ref.topk_ok(f64(x), f(x).cpu().numpy(), 512)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        kgen.topk(x, 512)  # warm: the kernel is loaded outside the capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        got = kgen.topk(x, 512)
    for _ in range(2):
        x.copy_(randn(gen, 8, 20000, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        assert ref.topk_ok(f64(x), got.cpu().numpy(), 512)


@gpu
def test_merge_gpu_with_decode_parts(gen):
    # two sparse_decode results over disjoint key sets, merged, equal the
    # decode over their union (one softmax)
    b, sq, h, ps = 2, 1, 64, 64
    kc = kgen.quantize_kv_cache(randn(gen, 8, ps, 1, 512, dtype=torch.bfloat16, device="cuda"))
    q = randn(gen, b, sq, h, 512, dtype=torch.bfloat16, device="cuda")
    perm = torch.randperm(8 * ps, generator=gen).to(torch.int32)
    i1 = perm[:256].reshape(1, 1, 256).repeat(b, sq, 1).cuda()
    i2 = perm[256:384].reshape(1, 1, 128).repeat(b, sq, 1).cuda()
    sink = randn(gen, h, device="cuda")
    o1, l1 = kgen.sparse_decode(q, kc, indices=i1)
    o2, l2 = kgen.sparse_decode(q, kc, indices=i2)
    o, lse = kgen.merge_attn_states([o1, o2], [l1, l2], sink=sink)
    wo, wl = kgen.sparse_decode(q, kc, indices=torch.cat([i1, i2], dim=2), attn_sink=sink)
    torch.cuda.synchronize()
    assert (o.float() - wo.float()).abs().max().item() <= 2 ** -6 * wo.float().abs().max().item()
    assert (lse - wl).abs().max().item() < 1e-4 * max(1, wl.abs().max().item())
    f = torch.compile(lambda a, b_, c, d: kgen.merge_attn_states([a, b_], [c, d], sink=sink),
                      fullgraph=True)
    co, cl = f(o1, o2, l1, l2)
    assert torch.equal(co, o) and torch.equal(cl, lse)


# ---- fp8_gemm, moe_gemm ------------------------------------------------------

def fp8(codes, device):
    return torch.from_numpy(codes).to(device).view(torch.float8_e4m3fn)


within = ref.within


def gemm_inputs(seed, m, n, k):
    rng = np.random.default_rng(seed)
    a, b = ref.e4m3_codes(rng, m, k), ref.e4m3_codes(rng, n, k)
    sa = rng.uniform(2.0 ** -10, 2.0 ** -6, (m, k // 128)).astype(np.float32)
    sb = rng.uniform(2.0 ** -10, 2.0 ** -6, (-(-n // 128), k // 128)).astype(np.float32)
    return a, b, sa, sb


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=gpu)])
def test_fp8_gemm_block128_torch(gen, device):
    seed = int(torch.randint(0, 1 << 30, (1,), generator=gen))
    m, n, k = (130, 300, 384) if device == "cpu" else (1000, 1536, 2048)
    a, b, sa, sb = gemm_inputs(seed, m, n, k)
    # DeepGEMM's activation scales: [M, K/128] stored K-block-major
    sat = torch.from_numpy(np.ascontiguousarray(sa.T)).to(device).t()
    c = kgen.fp8_gemm(fp8(a, device), sat, fp8(b, device), torch.from_numpy(sb).to(device))
    assert c.dtype == torch.bfloat16 and c.shape == (m, n) and c.device.type == device
    want, bound = ref.block_gemm(a, b, sa, sb)
    within(f64(c), want, ref.WGMMA_FP8_BOUND * bound)


def test_fp8_gemm_mx32_torch_cpu(gen):
    rng = np.random.default_rng(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    m, n, k = 40, 200, 128
    a, b = ref.e4m3_codes(rng, m, k), ref.e4m3_codes(rng, n, k)
    fa = rng.integers(118, 124, (m, 4), dtype=np.uint8)
    fb = rng.integers(118, 124, (n, 4), dtype=np.uint8)
    c = kgen.fp8_gemm(fp8(a, "cpu"), torch.from_numpy(fa), fp8(b, "cpu"), torch.from_numpy(fb),
                      out_dtype=torch.float32)
    want, bound = ref.mx_gemm(a, b, fa, fb)
    within(f64(c), want, ref.WGMMA_FP8_BOUND * bound)


@gpu
@pytest.mark.parametrize("masked", [False, True], ids=["contiguous", "masked"])
@pytest.mark.parametrize("swiglu", [False, True], ids=["plain", "swiglu"])
def test_moe_gemm_block128_gpu(gen, masked, swiglu):
    rng = np.random.default_rng(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    e, n, k = 4, 512, 512
    m = 96 if masked else 700
    a = ref.e4m3_codes(rng, *((e, m, k) if masked else (m, k)))
    b = ref.e4m3_codes(rng, e, n, k)
    sa = rng.uniform(2.0 ** -10, 2.0 ** -6, a.shape[:-1] + (k // 128,)).astype(np.float32)
    sbe = rng.integers(118, 122, (e, n // 128, k // 128), dtype=np.uint8)  # UE8M0 weights
    if masked:
        counts = np.array([5, 0, 96, 61], np.int32)
        table = dict(counts=torch.from_numpy(counts).cuda())
        owned = [(x, slice(0, c)) for x, c in enumerate(counts)]
    else:
        offs = np.array([0, 129, 129, 400, 690], np.int32)
        table = dict(offsets=torch.from_numpy(offs).cuda())
        owned = [(slice(offs[x], offs[x + 1]),) for x in range(e)]
    args = (fp8(a, "cuda"), torch.from_numpy(sa).cuda(), fp8(b, "cuda"),
            torch.from_numpy(sbe).cuda())
    c = kgen.moe_gemm(*args, swiglu=swiglu, **table)
    f = torch.compile(lambda *t: kgen.moe_gemm(*t, swiglu=swiglu, **table), fullgraph=True)
    cc = f(*args)
    got = f64(c)
    assert torch.equal(c, cc)
    ref.check_experts(got, owned, lambda x, rows: ref.block_gemm(
        a[rows], b[x], sa[rows], 2.0 ** (sbe[x].astype(np.int64) - 127)), 10.0 if swiglu else None)


def w4a8_table(masked, m):
    """Four experts' table on the GPU and their rows: masked 1, 0, m and m-2
    rows; contiguous 1, 0, 169 and 120 rows (rows past 290: nobody's)."""
    if masked:
        t = dict(counts=np.array([1, 0, m, m - 2], np.int32))
    else:
        t = dict(offsets=np.array([0, 1, 1, 170, 290], np.int32))
    return {x: torch.from_numpy(v).cuda() for x, v in t.items()}, ref.expert_rows(**t)


@gpu
@pytest.mark.parametrize("swiglu", [False, True], ids=["plain", "swiglu"])
@pytest.mark.parametrize("masked,m", [(False, 300), (True, 7), (True, 16)],
                         ids=["contiguous", "masked-8", "masked-16"])
def test_moe_gemm_w4a8_gpu(gen, masked, m, swiglu):
    """FP4 expert weights on the sm_90a W4A8 kernel, with and without the
    SwiGLU epilogue: torch's packed FP4 dtype where it has one, UE8M0
    exponents as float8_e8m0fnu."""
    rng = np.random.default_rng(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    e, n, k = 4, 512 if swiglu else 384, 512
    a, sa, w, sw = ref.w4a8_case(rng, e, n, k, m, masked)
    table, owned = w4a8_table(masked, m)
    wt = torch.from_numpy(w).cuda()
    if hasattr(torch, "float4_e2m1fn_x2"):
        wt = wt.view(torch.float4_e2m1fn_x2)
    swt = torch.from_numpy(sw).cuda()
    if hasattr(torch, "float8_e8m0fnu"):
        swt = swt.view(torch.float8_e8m0fnu)
    args = (fp8(a, "cuda"), torch.from_numpy(sa).cuda(), wt, swt)
    c = kgen.moe_gemm(*args, swiglu=swiglu, **table)
    f = torch.compile(lambda *t: kgen.moe_gemm(*t, swiglu=swiglu, **table), fullgraph=True)
    assert torch.equal(c, f(*args))
    ref.check_experts(f64(c), owned, lambda x, rows: ref.fp4_gemm(a[rows], w[x], sw[x], sa[rows]),
                      10.0 if swiglu else None)


@gpu
@pytest.mark.parametrize("masked", [False, True], ids=["contiguous", "masked"])
def test_moe_gemm_w4a8_fp8_pipeline_gpu(gen, masked):
    """W4A8 gate+up with the SwiGLU output quantized to FP8, read in place
    by the W4A8 down GEMM (docs/ABI.md, "W4A8 weights"), on the GPU."""
    rng = np.random.default_rng(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    e, n, k, m = 4, 512, 512, 7 if masked else 300
    a, sa, w, sw = ref.w4a8_case(rng, e, n, k, m, masked)
    table, owned = w4a8_table(masked, m)
    c, cs = kgen.moe_gemm(fp8(a, "cuda"), torch.from_numpy(sa).cuda(), torch.from_numpy(w).cuda(),
                          torch.from_numpy(sw).cuda(), swiglu=True, out_dtype=torch.float8_e4m3fn,
                          **table)
    cc = c.view(torch.uint8).cpu().numpy()
    s = cs.cpu().numpy().astype(np.float64)
    ref.check_fp8_experts(ref.E4M3[cc], owned,
                          lambda x, rows: ref.fp4_gemm(a[rows], w[x], sw[x], sa[rows]),
                          lambda x, rows: np.repeat(s[rows], 128, axis=-1), 10.0, amax_scale=True)
    w2 = rng.integers(0, 256, (e, 128, n // 4), dtype=np.uint8)
    sw2 = rng.integers(118, 126, (e, 128, n // 64), dtype=np.uint8)
    d = kgen.moe_gemm(c, cs, torch.from_numpy(w2).cuda(), torch.from_numpy(sw2).cuda(), **table)
    ref.check_experts(f64(d), owned, lambda x, rows: ref.fp4_gemm(
        cc[rows], w2[x], sw2[x], np.asarray(s[rows], np.float32)))


# ---- indexer -------------------------------------------------------------------

@pytest.mark.parametrize("device,score,per", [("cpu", "fma", 132),
                                              pytest.param("cuda", "fma", 132, marks=gpu),
                                              pytest.param("cuda", "wgmma", 132, marks=gpu),
                                              pytest.param("cuda", "wgmma", 68, marks=gpu)])
def test_indexer_torch(gen, device, score, per):
    from test_families import check_indexer, indexer_case

    rng = np.random.default_rng(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    if device == "cpu":
        b, sq, h, ps, pages, mp, topk, lens = 2, 2, 4, 16, 10, 6, 30, [90, 20]
    else:  # V3.2's shape on a long context: 64 heads, page 64, top-2048
        b, sq, h, ps, pages, mp, topk, lens = 3, 2, 64, 64, 300, 100, 2048, [6000, 1500, 6400]
    q, w, kc, bt, sl = indexer_case(rng, b, sq, h, ps, pages, mp, lens, per)
    t = [torch.from_numpy(x).to(device) for x in (q, w, kc, bt, sl)]
    t[0] = t[0].view(torch.float8_e4m3fn)
    # fma: split count chosen from the GPU; wgmma: kbench's measured 4
    splits = 4 if score == "wgmma" else None
    idx, lg = kgen.indexer(*t, topk, score=score, return_logits=True, num_splits=splits)
    assert idx.device.type == device and idx.dtype == torch.int32
    want, phys, bound = ref.indexer_logits(q, w, kc, bt, sl, mp * ps)
    check_indexer(idx.cpu().numpy(), lg.cpu().numpy(), want, phys, bound, topk)
    if device == "cuda":
        f = torch.compile(lambda *a: kgen.indexer(*a, topk, score=score, num_splits=splits),
                          fullgraph=True)
        ci = f(*t)
        check_indexer(ci.cpu().numpy(), lg.cpu().numpy(), want, phys, bound, topk)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=gpu)])
def test_indexer_logits_alone_torch(gen, device):
    # topk 0: the scoring alone returns the logits, eager and compiled
    from test_families import check_logits, indexer_case

    rng = np.random.default_rng(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    if device == "cpu":
        b, sq, h, ps, pages, mp, lens, score = 2, 2, 5, 16, 10, 6, [90, 1], "fma"
    else:
        b, sq, h, ps, pages, mp, lens, score = 3, 2, 64, 64, 300, 100, [6000, 1, 6399], "wgmma"
    q, w, kc, bt, sl = indexer_case(rng, b, sq, h, ps, pages, mp, lens)
    t = [torch.from_numpy(x).to(device) for x in (q, w, kc, bt, sl)]
    t[0] = t[0].view(torch.float8_e4m3fn)
    lg = kgen.indexer(*t, 0, score=score, num_splits=3)
    assert lg.device.type == device and lg.dtype == torch.float32 and lg.shape == (b, sq, mp * ps)
    want, _, bound = ref.indexer_logits(q, w, kc, bt, sl, mp * ps)
    check_logits(lg.cpu().numpy(), want, bound)
    f = torch.compile(lambda *a: kgen.indexer(*a, 0, score=score, num_splits=3), fullgraph=True)
    assert torch.equal(f(*t), lg)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=gpu)])
def test_module_ctas_per_sm(device):
    # the driver's occupancy of a loaded kernel (the indexer's default splits
    # keep one wave by it); the emulator does not know one
    from kgen import _cache, _native

    dev = _native.device("emu" if device == "cpu" else "cuda")
    mod = _cache.module(dev, "indexer", ("--target", "sm_90a", "--topk", "0", "--score", "wgmma"))
    if device == "cpu":
        assert mod.ctas_per_sm == -1
    else:  # 256 threads of 94 registers (96 allocated: 24576 a CTA, two in
        # 65536) and 59 KB of shared memory (three would fit): two
        assert mod.ctas_per_sm == 2


# ---- the custom ops' schemas and fake implementations (CPU, emulator) ------------

def opcheck_cases():
    rng = np.random.default_rng(11)
    a, b = ref.e4m3_codes(rng, 40, 128), ref.e4m3_codes(rng, 256, 128)
    a8, b8 = fp8(a, "cpu"), fp8(b, "cpu")
    sa = torch.rand(40, 1) + 0.5
    sb = torch.rand(2, 1) + 0.5
    b3 = fp8(ref.e4m3_codes(rng, 2, 256, 128), "cpu")
    sb3 = torch.rand(2, 2, 1) + 0.5
    offs = torch.tensor([0, 17, 40], dtype=torch.int32)
    q, w, kc, bt, sl = indexer_case_cpu(rng)
    return [
        ("topk", (torch.randn(3, 500), 20, "")),
        ("merge_attn_states", (torch.randn(2, 1, 2, 3, 512), torch.randn(2, 1, 3, 2), None, None,
                               "sm_90a")),
        ("fp8_gemm", (a8, sa, b8[:130], sb, "", "")),
        ("moe_gemm", (a8, sa, b3, sb3, offs, None, True, 10.0, "", "")),
        ("moe_gemm", (a8, sa, b3, sb3, offs, None, True, 10.0, "float8_e4m3fn", "")),
        ("indexer", (q, w, kc, bt, sl, 16, 0, "", 0, None, "sm_90a")),
        ("indexer", (q, w, kc, bt, sl, 0, 0, "", 0, None, "sm_90a")),
    ]


def indexer_case_cpu(rng):
    from test_families import indexer_case

    q, w, kc, bt, sl = indexer_case(rng, 2, 2, 4, 16, 6, 3, [40, 9])
    t = [torch.from_numpy(x) for x in (q, w, kc, bt, sl)]
    t[0] = t[0].view(torch.float8_e4m3fn)
    return t


@pytest.mark.parametrize("case", range(6))
def test_opcheck(case):
    name, args = opcheck_cases()[case]
    op = getattr(torch.ops.kgen, name).default
    # test_schema multiplies the inputs, which float8 tensors do not support
    fp8_in = any(isinstance(x, torch.Tensor) and x.dtype == torch.float8_e4m3fn for x in args)
    utils = ("test_faketensor",) if fp8_in else ("test_schema", "test_faketensor")
    torch.library.opcheck(op, args, test_utils=utils)


def test_compile_fullgraph_cpu():
    """Every new call traces whole under torch.compile (fullgraph=True) and
    gives the eager results (aot_eager: the fake implementations trace the
    graph, the ops run on the emulator)."""
    rng = np.random.default_rng(12)

    def same(fn, *args):
        want = fn(*args)
        got = torch.compile(fn, fullgraph=True, backend="aot_eager")(*args)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape and w.stride() == g.stride()
            assert torch.equal(w.view(torch.uint8) if w.element_size() == 1 else w,
                               g.view(torch.uint8) if g.element_size() == 1 else g)

    x = torch.randn(3, 700)
    same(lambda t: kgen.topk(t, 30), x)
    o, l = torch.randn(2, 1, 2, 3, 512), torch.randn(2, 1, 3, 2)
    same(lambda a, b: kgen.merge_attn_states([a[0], a[1]], [b[0], b[1]], target="sm_90a"), o, l)
    a, b = fp8(ref.e4m3_codes(rng, 40, 128), "cpu"), fp8(ref.e4m3_codes(rng, 2, 256, 128), "cpu")
    sa, sb = torch.rand(40, 1) + 0.5, torch.rand(2, 2, 1) + 0.5
    offs = torch.tensor([0, 17, 40], dtype=torch.int32)
    same(lambda *t: kgen.fp8_gemm(*t, out_dtype=torch.float32), a, sa, b[0], sb[0])
    same(lambda *t: kgen.moe_gemm(*t, offsets=offs, swiglu=True), a, sa, b, sb)
    same(lambda *t: kgen.moe_gemm(*t, offsets=offs, swiglu=True,
                                  out_dtype=torch.float8_e4m3fn), a, sa, b, sb)
    q, w, kc, bt, sl = indexer_case_cpu(rng)
    same(lambda *t: kgen.indexer(*t, 16, return_logits=True, target="sm_90a"), q, w, kc, bt, sl)


@gpu
def test_moe_gemm_masked_cuda_graph(gen):
    """Masked MoE as decode runs it: captured once, replayed with new
    activations and new counts (nothing on the host reads them)."""
    rng = np.random.default_rng(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    e, m, n, k = 4, 64, 256, 256
    b = ref.e4m3_codes(rng, e, n, k)
    sbe = rng.integers(118, 122, (e, n // 128, k // 128), dtype=np.uint8)
    bt, sbt = fp8(b, "cuda"), torch.from_numpy(sbe).cuda()
    a_t = torch.zeros(e, m, k, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
    sa_t = torch.ones(e, m, k // 128, device="cuda")
    counts_t = torch.zeros(e, dtype=torch.int32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        kgen.moe_gemm(a_t, sa_t, bt, sbt, counts=counts_t, swiglu=True)  # load outside
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = kgen.moe_gemm(a_t, sa_t, bt, sbt, counts=counts_t, swiglu=True)
    for _ in range(2):
        a = ref.e4m3_codes(rng, e, m, k)
        sa = rng.uniform(2.0 ** -10, 2.0 ** -6, (e, m, k // 128)).astype(np.float32)
        counts = rng.integers(0, m + 1, e).astype(np.int32)
        a_t.view(torch.uint8).copy_(torch.from_numpy(a))
        sa_t.copy_(torch.from_numpy(sa))
        counts_t.copy_(torch.from_numpy(counts))
        g.replay()
        torch.cuda.synchronize()
        got = f64(out)
        for x in range(e):
            rows = (x, slice(0, counts[x]))
            if counts[x] == 0:
                continue
            p, bound = ref.block_gemm(a[rows], b[x], sa[rows],
                                      2.0 ** (sbe[x].astype(np.int64) - 127))
            want, tol = ref.swiglu(p, bound, 10.0)
            within(got[rows], want, tol)
