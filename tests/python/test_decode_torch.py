"""kgen.sparse_decode on PyTorch tensors: CPU tensors on the emulator with
FlashMLA's positional call, torch.compile(fullgraph=True) through the fake;
CUDA tensors on the GPU at DeepSeek-V4 shapes (split-KV chosen by the call
and forced), CUDA graph capture. Against the float64 reference of ref.py
(the cache dequantized on its own). Skipped without torch; the GPU tests
without a GPU."""

import ctypes
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kgen  # noqa: E402
import ref  # noqa: E402
from kgen import _decode  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")


@pytest.fixture
def gen():
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    return torch.Generator().manual_seed(seed)


def make(gen, b, sq, hq, topk, ps, nb, extra=None, sink=False, lens=(None, None),
         device="cpu", fp8=True):
    """Inputs of one call (kwargs for kgen.sparse_decode) and the reference's
    sources. lens: None, "b" ([batch], FlashMLA's) or "bs" per source."""
    def cache(nb_, ps_):
        mag = torch.tensor([1.0, 1 / 64, 30.0])[torch.randint(0, 3, (nb_, ps_, 1, 1),
                                                               generator=gen)]
        k = (torch.randn(nb_, ps_, 1, 512, generator=gen) * mag *
             (1 + torch.arange(512) // 64)).to(torch.bfloat16).to(device)
        kc = kgen.quantize_kv_cache(k)
        return kc.view(torch.float8_e4m3fn) if fp8 else kc

    def idx(topk_, cap):
        x = torch.randint(0, cap, (b, sq, topk_), generator=gen)
        u = torch.randint(0, 100, (b, sq, topk_), generator=gen)
        x = torch.where(u < 10, -1, x)
        x = torch.where((u >= 10) & (u < 13), cap + 5, x)
        x[0, 0] = -1
        return x.to(torch.int32).to(device)

    def length(kind, topk_):
        if kind is None:
            return None
        shape = (b,) if kind == "b" else (b, sq)
        return torch.randint(0, topk_ + 1, shape, generator=gen).to(torch.int32).to(device)

    q = torch.randn(b, sq, hq, 512, generator=gen).to(torch.bfloat16).to(device)
    kc = cache(nb, ps)
    kw = dict(indices=idx(topk, nb * ps), topk_length=length(lens[0], topk))
    srcs = [(kc, kw["indices"], kw["topk_length"])]
    if extra:
        xtopk, xps, xnb = extra
        xkc = cache(xnb, xps)
        kw.update(extra_k_cache=xkc, extra_indices_in_kvcache=idx(xtopk, xnb * xps),
                  extra_topk_length=length(lens[1], xtopk))
        srcs.append((xkc, kw["extra_indices_in_kvcache"], kw["extra_topk_length"]))
    if sink:
        kw["attn_sink"] = (2 * torch.randn(hq, generator=gen)).to(device)
    return q, kc, kw, srcs


def reference(q, srcs, scale, sink):
    b, sq = q.shape[:2]
    rs = []
    for kc, x, l in srcs:
        nb, ps = kc.shape[:2]
        raw = torch.as_strided(kc.view(torch.uint8), (nb * ref.fp8_v4_page_bytes(ps),), (1,))
        lens = None
        if l is not None:
            lens = l.cpu().numpy()
            if lens.ndim == 1:
                lens = np.repeat(lens[:, None], sq, axis=1)
        rs.append((ref.fp8_v4_keys(raw.cpu().numpy(), ps), x.cpu().numpy(), lens))
    sk = None if sink is None else sink.cpu().numpy()
    return ref.sparse_decode(q.cpu().double().numpy(), rs, scale, sk)


def check(o, lse, q, srcs, scale, sink, tol=1e-2):
    wo, wl = reference(q, srcs, scale, sink)
    got = o.cpu().double().numpy()
    lg = lse.cpu().numpy()
    assert o.shape == q.shape[:3] + (512,) and o.dtype == torch.bfloat16
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == torch.float32
    den = np.abs(wo).max(axis=-1, keepdims=True)
    err = np.where(den > 0, np.abs(got - wo) / np.where(den > 0, den, 1), np.abs(got))
    assert err.max() < tol, err.max()
    fin = np.isfinite(wl)
    assert np.array_equal(np.isfinite(lg), fin) and (lg[~fin] == -np.inf).all()
    assert fin.any() and (np.abs(lg[fin] - wl[fin]) / np.maximum(1, np.abs(wl[fin]))).max() < 1e-3


@pytest.mark.parametrize("target", list(_decode.targets()))
def test_cpu_flashmla_positional_call(gen, target):
    q, kc, kw, srcs = make(gen, 2, 2, 5, 48, 61, 2, extra=(24, 2, 7), sink=True,
                           lens=("b", "bs"))
    scale = 0.05
    # flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
    #   tile_scheduler_metadata, num_splits, softmax_scale, causal, is_fp8_kvcache,
    #   indices, attn_sink, extra_k_cache, extra_indices_in_kvcache, topk_length,
    #   extra_topk_length)
    o, lse = kgen.sparse_decode(q, kc, None, None, 512, None, None, scale, False, True,
                                kw["indices"], kw["attn_sink"], kw["extra_k_cache"],
                                kw["extra_indices_in_kvcache"], kw["topk_length"],
                                kw["extra_topk_length"], target=target)
    check(o, lse, q, srcs, scale, kw["attn_sink"])


def test_cpu_uint8_cache_split_kv(gen):
    q, kc, kw, srcs = make(gen, 2, 1, 3, 200, 64, 4, fp8=False)
    o, lse = kgen.sparse_decode(q, kc, num_splits=3, **kw)
    check(o, lse, q, srcs, 512 ** -0.5, None)


def test_cpu_errors_name_the_argument():
    q = torch.zeros(1, 1, 4, 512, dtype=torch.bfloat16)
    kc = kgen.quantize_kv_cache(torch.zeros(1, 64, 1, 512, dtype=torch.bfloat16))
    idx = torch.zeros(1, 1, 8, dtype=torch.int32)
    with pytest.raises(TypeError, match=r"q\.dtype=f32: the decode kernels take bfloat16"):
        kgen.sparse_decode(q.float(), kc, indices=idx)
    with pytest.raises(ValueError, match=r"k_cache\.stride\(\)=\[37376, 584, 584, 1\]"):
        kgen.sparse_decode(q, torch.zeros(2, 64, 1, 584, dtype=torch.uint8), indices=idx)


def test_cpu_torch_compile_fullgraph(gen):
    q, kc, kw, _ = make(gen, 1, 2, 3, 40, 61, 2, sink=True, lens=("bs", None))

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(q, kc, idx, tl, sink):
        o, lse = kgen.sparse_decode(q * 2, kc, indices=idx, topk_length=tl, attn_sink=sink,
                                    softmax_scale=0.03)
        return o + 1, lse

    o, lse = f(q, kc, kw["indices"], kw["topk_length"], kw["attn_sink"])
    wo, wl = kgen.sparse_decode(q * 2, kc, indices=kw["indices"], topk_length=kw["topk_length"],
                                attn_sink=kw["attn_sink"], softmax_scale=0.03)
    assert torch.equal(o, wo + 1) and torch.equal(lse, wl)


def test_cpu_launcher_packs_every_address(gen, monkeypatch):
    # the CUDA launcher's argument packing, with its launch captured: each
    # address lands in its ABI slot, the lengths of FlashMLA's [batch] form
    # are spread over s_q, a source without lengths gets its whole list
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    q, kc, kw, _ = make(gen, 2, 3, 5, 40, 61, 2, extra=(24, 2, 7), sink=True,
                        lens=("b", None))
    c = _decode.plan(q, kc, softmax_scale=0.25, **kw)
    m = kgen._cache.module(c.dev, "decode", c.args)
    launcher = _decode.Launcher(c, m, 3)
    got = []

    def ints(addr, n):
        return np.ctypeslib.as_array((ctypes.c_int32 * n).from_address(addr)).copy()

    def launch(packed, stream):
        # the scratch lives until the launch is queued: read it now
        flat = m.struct.unpack(packed)
        v = {n: flat[launcher.slot[n]] for n in m.names}
        got.append((v, stream, ints(v["topk_length"], 6), ints(v["topk_length_extra"], 6),
                    ints(v["counters"], 6)))

    launcher.launch = launch
    launcher.stream = lambda ordinal: 1234
    o, lse = launcher(q, kc, kw["indices"], kw["topk_length"], kw["attn_sink"],
                      kw["extra_k_cache"], kw["extra_indices_in_kvcache"], None)
    (v, stream, tl, xtl, ctr), = got
    assert stream == 1234 and o.shape == (2, 3, 5, 512) and lse.shape == (2, 5, 3)
    assert v["Q"] == q.data_ptr() and v["O"] == o.data_ptr() and v["LSE"] == lse.data_ptr()
    assert v["KV"] == kc.data_ptr() and v["indices"] == kw["indices"].data_ptr()
    assert v["KV_extra"] == kw["extra_k_cache"].data_ptr()
    assert v["indices_extra"] == kw["extra_indices_in_kvcache"].data_ptr()
    assert v["sink"] == kw["attn_sink"].data_ptr()
    assert (v["batch"], v["s_q"], v["splits"]) == (2, 3, 3)
    assert (v["capacity"], v["capacity_extra"]) == (2 * 61, 7 * 2)
    assert v["softmax_scale"] == 0.25
    assert v["O_partial"] and v["LSE_partial"]
    assert np.array_equal(tl, np.repeat(kw["topk_length"].numpy(), 3))
    assert (xtl == 24).all() and (ctr == 0).all()


# ---- GPU -------------------------------------------------------------------

# (batch, s_q, heads, topk, page, pages, extra, sink, lens)
GPU_CASES = [
    (2, 1, 64, 512, 64, 40, (128, 256, 3), True, ("b", None)),      # V4-Flash, split-KV
    (3, 2, 128, 1024, 64, 60, (128, 256, 3), True, ("bs", "b")),    # V4-Pro, MTP
    (5, 1, 5, 300, 61, 20, (50, 1, 300), False, (None, None)),      # odd heads and pages
    (70, 1, 64, 512, 64, 40, None, True, (None, None)),             # a grid that fills the GPU
]


@gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "b%d_sq%d_h%d_k%dp%d" % c[:5])
def test_gpu_vs_reference(gen, case):
    b, sq, hq, topk, ps, nb, extra, sink, lens = case
    q, kc, kw, srcs = make(gen, b, sq, hq, topk, ps, nb, extra, sink, lens, device="cuda")
    for splits in (None, 1, 7):
        o, lse = kgen.sparse_decode(q, kc, num_splits=splits, **kw)
        torch.cuda.synchronize()
        check(o, lse, q, srcs, 512 ** -0.5, kw.get("attn_sink"))
    # a repeat with new data (the memo's launcher: only the addresses change)
    q2 = torch.randn(q.shape, generator=gen).to(torch.bfloat16).to("cuda")
    o, lse = kgen.sparse_decode(q2, kc, **kw)
    torch.cuda.synchronize()
    check(o, lse, q2, srcs, 512 ** -0.5, kw.get("attn_sink"))
    # the kernel leaves its completion counters zero for the next launch
    for t in _decode._counters.values():
        assert int(t.abs().sum()) == 0


@gpu
def test_gpu_cuda_graph_capture(gen):
    q, kc, kw, srcs = make(gen, 1, 1, 64, 512, 64, 20, (128, 256, 2), True, ("b", "b"),
                           device="cuda")
    kgen.sparse_decode(q, kc, num_splits=4, **kw)  # generate and load outside the capture
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            out, lse = kgen.sparse_decode(q, kc, num_splits=4, **kw)
    for _ in range(2):
        q.copy_(torch.randn(q.shape, generator=gen).to(torch.bfloat16))
        g.replay()
        torch.cuda.synchronize()
        check(out, lse, q, srcs, 512 ** -0.5, kw["attn_sink"])


@gpu
def test_gpu_torch_compile_fullgraph(gen):
    q, kc, kw, _ = make(gen, 4, 1, 64, 512, 64, 20, (128, 256, 2), True, device="cuda")

    @torch.compile(fullgraph=True)
    def f(q):
        return kgen.sparse_decode(q * 2, kc, softmax_scale=0.04, **kw)[0] + 1

    got = f(q)
    want = kgen.sparse_decode(q * 2, kc, softmax_scale=0.04, **kw)[0] + 1
    assert torch.equal(got, want)


@gpu
def test_gpu_device_mismatch():
    q = torch.zeros(1, 1, 64, 512, dtype=torch.bfloat16, device="cuda")
    kc = kgen.quantize_kv_cache(torch.zeros(1, 64, 1, 512, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"k_cache\.device=cpu: must be q's device, cuda:0"):
        kgen.sparse_decode(q, kc, indices=torch.zeros(1, 1, 8, dtype=torch.int32,
                                                       device="cuda"))
