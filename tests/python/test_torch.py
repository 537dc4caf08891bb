"""kgen on PyTorch tensors: CPU tensors on the emulator (both targets), CUDA
tensors on the GPU against the float64 reference and
F.scaled_dot_product_attention, torch.compile(fullgraph=True) and CUDA graph
capture. Skipped without torch; the GPU tests without a GPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import kgen  # noqa: E402
import ref  # noqa: E402
from torchtest import f64, gpu  # noqa: E402


def randn(gen, *shape, dtype=torch.bfloat16, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


def check(o, q, k, v, causal=False, window=(-1, -1), scale=None, lse=None, tol=1e-2):
    b, sq, hq, d = q.shape
    sk, hkv, dv = k.shape[1], k.shape[2], v.shape[3]
    wo, wl = ref.attention(f64(q).reshape(b * sq, hq, d), f64(k).reshape(b * sk, hkv, d),
                           f64(v).reshape(b * sk, hkv, dv), [i * sq for i in range(b + 1)],
                           [i * sk for i in range(b + 1)], causal, window, scale)
    assert ref.rel_err(f64(o).reshape(b * sq, hq, dv), wo) < tol
    if lse is not None:
        got = f64(lse).transpose(1, 0, 2).reshape(hq, b * sq)
        fin = np.isfinite(wl)
        assert np.abs(got[fin] - wl[fin]).max() < 1e-3 * max(1, np.abs(wl[fin]).max())


def test_acceptance_shape():
    q = torch.randn(1, 70, 4, 64, dtype=torch.bfloat16)
    assert kgen.attention(q, q, q, causal=True).shape == torch.Size([1, 70, 4, 64])


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
def test_cpu_bf16_gqa_causal_lse(gen, target):
    q, k, v = randn(gen, 2, 29, 4, 64), randn(gen, 2, 41, 2, 64), randn(gen, 2, 41, 2, 64)
    o, lse = kgen.attention(q, k, v, causal=True, return_lse=True, softmax_scale=0.2,
                            target=target)
    assert o.dtype == torch.bfloat16 and lse.shape == (2, 4, 29)
    check(o, q, k, v, causal=True, scale=0.2, lse=lse)


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
def test_cpu_gemm(gen, target):
    a, b = randn(gen, 33, 40), randn(gen, 50, 40)
    c = kgen.gemm(a, b, target=target)
    assert c.dtype == torch.bfloat16
    want = f64(a) @ f64(b).T
    assert ref.rel_err(f64(c), want) < 1e-2


def test_cpu_errors_name_the_argument():
    q = torch.zeros(1, 5, 4, 64, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"q\.dtype=f32"):
        kgen.attention(q.float(), q, q)
    with pytest.raises(ValueError, match=r"k\.stride\(\)=.*\(stride 1\)"):
        kgen.attention(q, torch.zeros(1, 5, 4, 128, dtype=torch.bfloat16)[..., ::2], q)


# ---- GPU -------------------------------------------------------------------


@gpu
@pytest.mark.parametrize("case", [(2, 300, 300, 8, 8, 128, True), (1, 257, 513, 8, 2, 64, False),
                                  (3, 1, 777, 16, 1, 128, False), (1, 128, 200, 4, 4, 256, True)])
def test_gpu_vs_reference_and_sdpa(gen, case):
    b, sq, sk, hq, hkv, d, causal = case
    dev = "cuda"
    q, k, v = (randn(gen, b, s, h, d, device=dev) for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))
    o, lse = kgen.attention(q, k, v, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    check(o, q, k, v, causal=causal, lse=lse)
    if sq == sk or not causal:
        rep = hq // hkv
        s = F.scaled_dot_product_attention(q.transpose(1, 2), k.repeat_interleave(rep, 2).transpose(1, 2),
                                           v.repeat_interleave(rep, 2).transpose(1, 2),
                                           is_causal=causal)
        assert (o.float() - s.transpose(1, 2).float()).abs().max() < 2e-2 * s.abs().max()


@gpu
def test_gpu_varlen_window_and_kv_shared(gen):
    lens = [17, 0, 300, 64]
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int32, device="cuda")
    q, k = randn(gen, cu[-1].item(), 4, 128, device="cuda"), randn(gen, cu[-1].item(), 4, 128,
                                                                     device="cuda")
    o = kgen.attention(q, k, k, window=(50, 7), cu_seqlens_q=cu, cu_seqlens_k=cu,
                       max_seqlen_q=max(lens), max_seqlen_k=max(lens))
    wo, _ = ref.attention(f64(q), f64(k), f64(k), cu.tolist(), cu.tolist(), False, (50, 7))
    assert ref.rel_err(f64(o), wo) < 1e-2


@gpu
def test_gpu_gemm(gen):
    a, b = randn(gen, 300, 256, device="cuda"), randn(gen, 200, 256, device="cuda")
    c = kgen.gemm(a, b)
    assert ref.rel_err(f64(c), f64(a) @ f64(b).T) < 1e-2


@gpu
def test_gpu_device_mismatch():
    q = torch.zeros(1, 5, 4, 64, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match=r"k\.device=cpu: must be q's device, cuda:0"):
        kgen.attention(q, q.cpu(), q)


@gpu
def test_gpu_torch_compile_fullgraph(gen):
    q, k, v = (randn(gen, 2, 100, 4, 64, device="cuda") for _ in range(3))

    @torch.compile(fullgraph=True)
    def f(q, k, v):
        return kgen.attention(q * 2, k, v, causal=True, softmax_scale=0.0625) + 1

    got = f(q, k, v)
    want = kgen.attention(q * 2, k, v, causal=True, softmax_scale=0.0625) + 1
    assert torch.equal(got, want)


@gpu
def test_gpu_cuda_graph_capture(gen):
    q, k, v = (randn(gen, 1, 200, 8, 128, device="cuda") for _ in range(3))
    kgen.attention(q, k, v, causal=True)  # generate and load outside the capture
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            out = kgen.attention(q, k, v, causal=True)
    for _ in range(2):
        q.copy_(randn(gen, 1, 200, 8, 128, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        check(out, q, k, v, causal=True)


def test_cpu_torch_compile_fullgraph_traces_the_operators(gen):
    # aot_eager: dynamo + the fake implementations, no C++ compiler needed
    q = randn(gen, 1, 20, 2, 64)
    a = randn(gen, 16, 64)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(q, k, v, a):
        o, lse = kgen.attention(q * 2, k, v, causal=True, softmax_scale=0.0625, return_lse=True)
        return o + 1, lse, kgen.gemm(a, a) * 2

    o, lse, c = f(q, q, q, a)
    wo, wl = kgen.attention(q * 2, q, q, causal=True, softmax_scale=0.0625, return_lse=True)
    assert torch.equal(o, wo + 1) and torch.equal(lse, wl) and torch.equal(c, kgen.gemm(a, a) * 2)
