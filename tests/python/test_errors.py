"""Every input rule of kgen.attention and kgen.gemm: a ValueError/TypeError
naming the argument, its value and the rule, raised before anything is
generated or launched (NumPy arrays on the emulator; the checks are the
same code for CUDA tensors)."""

import numpy as np
import pytest

import kgen
from kgen import _cache


def z(*shape, dtype=np.float16):
    return np.zeros(shape, dtype)


Q = z(1, 5, 4, 64)


@pytest.fixture(autouse=True)
def nothing_generated():
    before = dict(_cache.stats)
    yield
    assert _cache.stats["generated"] == before["generated"], "a refused call generated a kernel"


def refused(exc, pattern, *args, **kw):
    fn = kw.pop("fn", kgen.attention)
    with pytest.raises(exc, match=pattern):
        fn(*args, **kw)


def test_dtype():
    refused(TypeError, r"q\.dtype=f32: .*bfloat16 or float16", Q.astype(np.float32), Q, Q)
    refused(TypeError, r"k\.dtype=f32: must be q's dtype", Q, Q.astype(np.float32), Q)
    refused(TypeError, r"v\.dtype=f32: must be q's dtype", Q, Q, Q.astype(np.float32))
    refused(TypeError, r"q: a list; kgen takes torch.Tensor .* or numpy.ndarray", [1.0], Q, Q)


def test_shape():
    refused(ValueError, r"q\.shape=\[5, 4, 64\]: want \[batch, seqlen, heads, head_dim\]",
            z(5, 4, 64), Q, Q)
    refused(ValueError, r"k\.shape=\[2, 5, 4, 64\]: batch must be q's, 1", Q, z(2, 5, 4, 64), Q)
    refused(ValueError, r"v\.shape=\[1, 6, 4, 64\]: batch and seqlen must be k's", Q, Q,
            z(1, 6, 4, 64))
    refused(ValueError, r"v\.shape\[-2\]=2: V's heads must be K's, 4", Q, Q, z(1, 5, 2, 64))


def test_head_count():
    refused(ValueError, r"k\.shape\[-2\]=3: the query heads \(4\) must be a multiple",
            Q, z(1, 5, 3, 64), z(1, 5, 3, 64))
    refused(ValueError, r"q\.shape\[-2\]=300: at most 256 heads", z(1, 1, 300, 64),
            z(1, 1, 300, 64), z(1, 1, 300, 64))


def test_head_dim():
    refused(ValueError, r"q\.shape\[-1\]=96: head_dim is one of 64, 128, 256, 512",
            z(1, 5, 4, 96), z(1, 5, 4, 96), z(1, 5, 4, 96))
    refused(ValueError, r"k\.shape\[-1\]=128: K's head_dim must be q's, 64", Q, z(1, 5, 4, 128), Q)
    refused(ValueError, r"v\.shape\[-1\]=32: V's head_dim is one of", Q, Q, z(1, 5, 4, 32))


def test_strides():
    wide = z(1, 5, 4, 128)[..., ::2]
    refused(ValueError, r"q\.stride\(\)=\[2560, 512, 128, 2\]: the last dimension .*\(stride 1\)",
            wide, Q, Q)
    odd = z(1, 5, 4, 68)[..., :64]   # a 136-byte head stride
    refused(ValueError, r"q\.stride\(\)=.*head stride is 136 bytes; .*multiples of 16 bytes",
            odd, Q, Q)
    b2 = z(2, 8, 4, 64)[:, :5]       # batch stride 8 rows, seqlen 5
    refused(ValueError, r"q\.stride\(\)=.*batch stride must be seqlen x the seqlen stride",
            b2, b2, b2)
    raw = np.zeros(1 * 5 * 4 * 64 + 1, np.float16)[1:].reshape(1, 5, 4, 64)
    refused(ValueError, r"q\.data_ptr\(\)=0x[0-9a-f]+: .*16-byte aligned", raw, Q, Q)


def test_window_and_scale():
    refused(TypeError, r"window=5: want \(left, right\)", Q, Q, Q, window=5)
    refused(ValueError, r"window=\(-2, 0\): left is -2", Q, Q, Q, window=(-2, 0))
    refused(ValueError, r"window=\(4, 3\): with causal=True the right side is 0", Q, Q, Q,
            causal=True, window=(4, 3))
    refused(ValueError, r"window=\(2000000, 0\): left is 2000000: each side is -1 .* 1048576",
            Q, Q, Q, window=(2000000, 0))
    refused(ValueError, r"softmax_scale=-1\.0: a positive finite number", Q, Q, Q,
            softmax_scale=-1.0)
    refused(ValueError, r"softmax_scale=nan", Q, Q, Q, softmax_scale=float("nan"))
    refused(TypeError, r"softmax_scale='x': a number", Q, Q, Q, softmax_scale="x")


def test_sink_is_refused():
    with pytest.raises(NotImplementedError, match=r"sink=.*attention sinks are not in"):
        kgen.attention(Q, Q, Q, sink=z(4))


def test_varlen():
    q = z(10, 4, 64)
    cu = np.array([0, 4, 10], np.int32)
    refused(ValueError, r"cu_seqlens_k=None: varlen takes both", q, q, q, cu_seqlens_q=cu,
            max_seqlen_q=6)
    refused(TypeError, r"cu_seqlens_q\.dtype=int64: cu_seqlens are int32", q, q, q,
            cu_seqlens_q=cu.astype(np.int64), cu_seqlens_k=cu, max_seqlen_q=6)
    refused(ValueError, r"max_seqlen_q=None: varlen needs the longest query sequence", q, q, q,
            cu_seqlens_q=cu, cu_seqlens_k=cu)
    refused(ValueError, r"max_seqlen_q=5: cu_seqlens_q holds a sequence of 6 queries", q, q, q,
            cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5)
    refused(ValueError, r"cu_seqlens_q=\[0, 4, 9\]: must start at 0, never decrease and end at "
            r"the total rows, 10", q, q, q, cu_seqlens_q=np.array([0, 4, 9], np.int32),
            cu_seqlens_k=cu, max_seqlen_q=6)
    refused(ValueError, r"cu_seqlens_k\.shape=\[2\]: must be cu_seqlens_q's", q, q, q,
            cu_seqlens_q=cu, cu_seqlens_k=np.array([0, 10], np.int32), max_seqlen_q=6)
    refused(ValueError, r"cu_seqlens_q\.shape=\[1\]: want \[batch\+1\]", q, q, q,
            cu_seqlens_q=cu[:1], cu_seqlens_k=cu[:1], max_seqlen_q=6)
    refused(ValueError, r"q\.shape=\[1, 10, 4, 64\]: want \[total, heads, head_dim\] \(varlen\)",
            z(1, 10, 4, 64), q, q, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=6)


def test_out():
    refused(TypeError, r"out\.dtype=f32: must be q's dtype", Q, Q, Q, out=z(1, 5, 4, 64,
                                                                          dtype=np.float32))
    refused(ValueError, r"out\.shape=\[1, 5, 4, 128\]: want \[1, 5, 4, 64\]", Q, Q, Q,
            out=z(1, 5, 4, 128))
    refused(ValueError, r"out\.stride\(\)=.*out must be contiguous", Q, Q, Q,
            out=z(1, 5, 4, 128)[..., ::2])


def test_index_range():
    # a [total, heads, dim] view with 2^31 elements: strides 0 keep it tiny
    big = np.lib.stride_tricks.as_strided(z(1, 1, 64), shape=(1 << 19, 64, 64),
                                          strides=(0, 0, 2))
    refused(ValueError, r"q\.stride\(\)=\[0, 0, 1\]: the head stride is 0 bytes", big, big, big,
            cu_seqlens_q=np.array([0, 1 << 19], np.int32),
            cu_seqlens_k=np.array([0, 1 << 19], np.int32), max_seqlen_q=1 << 19)
    big = np.lib.stride_tricks.as_strided(z(1, 1, 64), shape=(1 << 20, 32, 64),
                                          strides=(16, 16, 2))
    refused(ValueError, r"q\.shape=\[1048576, 32, 64\]: 2147483648 elements: past the kernel's "
            r"32-bit index range", big, big, big, cu_seqlens_q=np.array([0, 1 << 20], np.int32),
            cu_seqlens_k=np.array([0, 1 << 20], np.int32), max_seqlen_q=1 << 20)


def test_target():
    refused(ValueError, r"target='sm_80': the emulator runs sm_90a or sm_100a kernels", Q, Q, Q,
            target="sm_80")


def test_gemm_rules():
    a, b = z(70, 64), z(45, 64)
    g = dict(fn=kgen.gemm)
    refused(TypeError, r"a\.dtype=f32: kgen.gemm takes bfloat16 or float16",
            a.astype(np.float32), b, **g)
    refused(TypeError, r"b\.dtype=f32: must be a's dtype", a, b.astype(np.float32), **g)
    refused(ValueError, r"a\.shape=\[70\]: want \[M, K\]", z(70), b, **g)
    refused(ValueError, r"b\.shape=\[45, 72\]: b's K must be a's, 64", a, z(45, 72), **g)
    refused(ValueError, r"a\.shape\[1\]=60: K is a positive multiple of 8", z(70, 60), z(45, 60),
            **g)
    refused(ValueError, r"a\.stride\(\)=\[128, 2\]: K must be contiguous", z(70, 128)[:, ::2], b,
            **g)
    refused(ValueError, r"a\.stride\(\)=\[68, 1\]: the row stride is 136 bytes", z(70, 68)[:, :64],
            b, **g)
    refused(ValueError, r"out_dtype='int8': bfloat16 or float32", a, b, out_dtype="int8", **g)
    refused(ValueError, r"out=.*want a contiguous f32 \[70, 45\]", a, b, out=z(45, 70,
                                                                          dtype=np.float32), **g)


# ---- kgen.sparse_decode ------------------------------------------------------

DQ = np.zeros((2, 1, 3, 512), np.uint16)   # bf16 bit patterns


def dcache(nb=2, ps=61):
    return kgen.quantize_kv_cache(np.zeros((nb, ps, 1, 512), np.float32))


KC = dcache()
IDX = np.zeros((2, 1, 16), np.int32)


def drefused(exc, pattern, q=None, k_cache=None, **kw):
    kw.setdefault("indices", IDX)
    refused(exc, pattern, DQ if q is None else q, KC if k_cache is None else k_cache,
            fn=kgen.sparse_decode, **kw)


def test_decode_q():
    drefused(TypeError, r"sparse_decode: q\.dtype=fp16: .*bfloat16 queries", q=DQ.view(np.float16))
    drefused(ValueError, r"q\.shape=\[2, 3, 512\]: want \[batch, seq_len_q, num_heads_q, "
             r"head_dim\]", q=DQ[:, 0])
    drefused(ValueError, r"q\.shape\[-1\]=576: head_dim is 512 .*576 \(fp8-v32\) is generated "
             r".* not taken by this call", q=np.zeros((2, 1, 3, 576), np.uint16))
    drefused(ValueError, r"q\.shape\[2\]=129: 1 \.\. 128 query heads",
             q=np.zeros((2, 1, 129, 512), np.uint16))
    drefused(ValueError, r"q\.stride\(\)=.*dense \[batch, seq_len_q, num_heads_q, 512\]",
             q=np.zeros((2, 1, 6, 512), np.uint16)[:, :, ::2])
    raw = np.zeros(2 * 3 * 512 + 1, np.uint16)[1:].reshape(2, 1, 3, 512)
    drefused(ValueError, r"q\.data_ptr\(\)=0x[0-9a-f]+: must be 16-byte aligned", q=raw)


def test_decode_cache():
    drefused(TypeError, r"k_cache\.dtype=f32: the fp8-v4 cache is bytes",
             k_cache=np.zeros((2, 61, 1, 584), np.float32))
    drefused(ValueError, r"k_cache\.shape=\[2, 61, 584\]: want \[num_blocks, page_block_size, "
             r"1, 584\]", k_cache=np.zeros((2, 61, 584), np.uint8))
    drefused(ValueError, r"k_cache\.shape\[2\]=2: one KV head",
             k_cache=np.zeros((2, 61, 2, 584), np.uint8))
    drefused(ValueError, r"k_cache\.shape\[3\]=656: an fp8-v4 token is 584 bytes",
             k_cache=np.zeros((2, 61, 1, 656), np.uint8))
    drefused(ValueError, r"k_cache\.shape\[1\]=5000: the page size is 1 \.\. 4096",
             k_cache=np.zeros((1, 5000, 1, 584), np.uint8))
    # a dense [2, 61, 1, 584] array: its pages are 35624 bytes, not 35712
    drefused(ValueError, r"k_cache\.stride\(\)=\[35624, 584, 584, 1\]: a page of 61 tokens is "
             r"35712 bytes .*want strides \(35712, 584, 584, 1\)",
             k_cache=np.zeros((2, 61, 1, 584), np.uint8))


def test_decode_indices_and_lengths():
    drefused(NotImplementedError, r"indices=None: .*dense paged decode .*--addressing paged",
             indices=None)
    drefused(TypeError, r"indices\.dtype=int64: must be int32", indices=IDX.astype(np.int64))
    drefused(ValueError, r"indices\.shape=\[1, 1, 16\]: want \[batch, seq_len_q, topk\] = "
             r"\[2, 1, topk\]", indices=IDX[:1])
    drefused(ValueError, r"indices\.shape\[2\]=0: topk is 1 \.\. 4096", indices=IDX[..., :0])
    drefused(ValueError, r"indices\.shape\[2\]=5000: topk is 1 \.\. 4096",
             indices=np.zeros((2, 1, 5000), np.int32))
    drefused(ValueError, r"indices\.stride\(\)=.*must be contiguous",
             indices=np.zeros((2, 1, 32), np.int32)[..., ::2])
    drefused(ValueError, r"topk_length\.shape=\[3\]: want \[batch\] .* or \[batch, seq_len_q\]",
             topk_length=np.zeros(3, np.int32))
    drefused(TypeError, r"topk_length\.dtype=int64: must be int32",
             topk_length=np.zeros(2, np.int64))


def test_decode_extra_source_and_sink():
    drefused(ValueError, r"extra_indices_in_kvcache=None: the extra source takes both",
             extra_k_cache=KC)
    drefused(ValueError, r"extra_k_cache=None: the extra source takes both",
             extra_indices_in_kvcache=IDX)
    drefused(ValueError, r"extra_topk_length=a tensor: needs the extra source",
             extra_topk_length=np.zeros(2, np.int32))
    drefused(ValueError, r"extra_k_cache\.stride\(\)=\[35624, .*a page of 61 tokens",
             extra_k_cache=np.zeros((2, 61, 1, 584), np.uint8), extra_indices_in_kvcache=IDX)
    drefused(ValueError, r"extra_indices_in_kvcache\.shape=\[2, 2, 16\]: want \[batch, "
             r"seq_len_q, extra_topk\]", extra_k_cache=KC,
             extra_indices_in_kvcache=np.zeros((2, 2, 16), np.int32))
    drefused(TypeError, r"attn_sink\.dtype=f64: must be float32", attn_sink=np.zeros(3))
    drefused(ValueError, r"attn_sink\.shape=\[4\]: want \[num_heads_q\] = \[3\]",
             attn_sink=np.zeros(4, np.float32))


def test_decode_options():
    drefused(ValueError, r"causal=True: sparse decode has no causal mask", causal=True)
    drefused(ValueError, r"is_fp8_kvcache=False: .*fp8-v4 cache; the bf16 cache is generated",
             is_fp8_kvcache=False)
    drefused(ValueError, r"head_dim_v=576: .*head_dim_v is 512", head_dim_v=576)
    drefused(ValueError, r"softmax_scale=0\.0: a positive finite number", softmax_scale=0.0)
    drefused(ValueError, r"num_splits=0: None .* an int 1 \.\. 256", num_splits=0)
    drefused(ValueError, r"num_splits=True: ", num_splits=True)
    drefused(ValueError, r"out\.shape=\[2, 1, 3, 256\]: want \[2, 1, 3, 512\]",
             out=np.zeros((2, 1, 3, 256), np.uint16))
    drefused(TypeError, r"out\.dtype=f32: must be q's dtype, u16",
             out=np.zeros((2, 1, 3, 512), np.float32))
    raw = np.zeros(2 * 3 * 512 + 1, np.uint16)[1:].reshape(2, 1, 3, 512)
    drefused(ValueError, r"out\.data_ptr\(\)=0x[0-9a-f]+: must be 16-byte aligned", out=raw)
    drefused(ValueError, r"target='sm_80': the emulator runs sm_90a or sm_100a kernels",
             target="sm_80")


def test_decode_target_rule():
    have = kgen._decode.targets()
    missing = [t for t in ("sm_90a", "sm_100a") if t not in have]
    if not missing:
        pytest.skip("every target generates decode kernels")
    drefused(ValueError, r"target='%s': decode kernels are generated for %s in this kgen"
             % (missing[0], " and ".join(have)), target=missing[0])


# ---- topk, merge_attn_states ---------------------------------------------

def test_topk_rules():
    x = np.zeros((3, 50), np.float32)
    refused(TypeError, r"kgen\.topk: logits\.dtype=fp16: must be float32", x.astype(np.float16),
            8, fn=kgen.topk)
    refused(ValueError, r"logits\.shape=\[150\]: want \[rows, n\]", x.reshape(-1), 8,
            fn=kgen.topk)
    refused(ValueError, r"k=0: indices kept per row, an int 1 \.\. 2048", x, 0, fn=kgen.topk)
    refused(ValueError, r"k=2049: ", x, 2049, fn=kgen.topk)
    refused(TypeError, r"k=8\.0: ", x, 8.0, fn=kgen.topk)
    refused(ValueError, r"logits\.shape\[1\]=0: a row has at least one logit",
            np.zeros((3, 0), np.float32), 8, fn=kgen.topk)
    refused(ValueError, r"logits\.shape\[0\]=65536: rows are 1 \.\. 65535",
            np.zeros((65536, 1), np.float32), 8, fn=kgen.topk)
    refused(ValueError, r"logits\.stride\(\)=\[1, 3\]: must be contiguous", x.T.copy().T, 8,
            fn=kgen.topk)
    refused(ValueError, r"out\.shape=\[3, 7\]: want \[rows, k\] = \[3, 8\]", x, 8,
            out=np.zeros((3, 7), np.int32), fn=kgen.topk)
    refused(TypeError, r"out\.dtype=f32: must be int32", x, 8, out=np.zeros((3, 8), np.float32),
            fn=kgen.topk)
    refused(ValueError, r"target='sm_80': kgen\.topk kernels are generated for", x, 8,
            target="sm_80", fn=kgen.topk)


def test_merge_rules():
    o = np.zeros((2, 1, 3, 4, 512), np.float32)
    l = np.zeros((2, 1, 4, 3), np.float32)
    m = kgen.merge_attn_states
    refused(TypeError, r"kgen\.merge_attn_states: outs\.dtype=fp16: must be float32",
            o.astype(np.float16), l, fn=m)
    refused(ValueError, r"outs\.shape\[-1\]=256: the merged rows are 512 values",
            o[..., :256].copy(), l, fn=m)
    refused(ValueError, r"outs\.shape\[3\]=129: heads are 1 \.\. 128",
            np.zeros((1, 1, 1, 129, 512), np.float32), np.zeros((1, 1, 129, 1), np.float32), fn=m)
    refused(ValueError, r"lses\.shape=\[2, 1, 3, 4\]: want \[parts, batch, heads, s_q\] = "
            r"\[2, 1, 4, 3\]", o, l.reshape(2, 1, 3, 4), fn=m)
    refused(ValueError, r"maxes\.shape=\[1, 1, 4, 3\]: want", o, l, maxes=l[:1].copy(), fn=m)
    refused(ValueError, r"sink\.shape=\[3\]: want \[heads\] = \[4\]", o, l,
            sink=np.zeros(3, np.float32), fn=m)
    refused(TypeError, r"sink\.dtype=f64: must be float32", o, l, sink=np.zeros(4), fn=m)
    refused(ValueError, r"outs\[1\]\.shape=\[1, 3, 4, 256\]: every part must have outs\[0\]'s",
            [o[0], o[1, ..., :256]], [l[0], l[1]], fn=m)
    refused(ValueError, r"outs=\[\]: at least one part", [], [], fn=m)
    refused(ValueError, r"outs\.stride\(\)=.*: must be contiguous", o[:, :, ::-1], l, fn=m)
    refused(ValueError, r"out\.shape=\[1, 3, 4, 256\]: want", o, l,
            out=np.zeros((1, 3, 4, 256), np.uint16), fn=m)


# ---- fp8_gemm, moe_gemm --------------------------------------------------------

A8 = np.zeros((64, 256), np.uint8)
SA = np.zeros((64, 2), np.float32)
SB = np.zeros((1, 2), np.float32)


def test_fp8_gemm_rules():
    f = kgen.fp8_gemm
    refused(TypeError, r"kgen\.fp8_gemm: a\.dtype=fp16: must be float8_e4m3fn or uint8",
            A8.astype(np.float16), SA, A8, SB, fn=f)
    refused(ValueError, r"b\.shape=\[64, 128\]: b's K must be a's, 256", A8, SA, A8[:, :128],
            SB, fn=f)
    refused(ValueError, r"a\.shape\[1\]=144: K is a positive multiple of 128",
            np.zeros((64, 144), np.uint8), SA, np.zeros((64, 144), np.uint8), SB, fn=f)
    refused(ValueError, r"a\.stride\(\)=\[1, 64\]: K must be contiguous", A8.T.copy().T, SA,
            A8, SB, fn=f)
    refused(TypeError, r"sa\.dtype=f64: float32 \(DeepSeek's block scales", A8,
            SA.astype(np.float64), A8, SB, fn=f)
    refused(ValueError, r"sa\.shape=\[64, 3\]: want \[M, K/128\] = \[64, 2\]", A8,
            np.zeros((64, 3), np.float32), A8, SB, fn=f)
    refused(ValueError, r"sb\.shape=\[2, 2\]: want \[N/128, K/128\] = \[1, 2\]", A8, SA, A8,
            np.zeros((2, 2), np.float32), fn=f)
    refused(ValueError, r"sb\.shape=\[64, 4\]: want \[64, 8\] \(one UE8M0 per 32 of K",
            A8, np.zeros((64, 8), np.uint8), A8, np.zeros((64, 4), np.uint8), fn=f)
    refused(ValueError, r"target='sm_100a': the scales' dtype picks sm_90a", A8, SA, A8, SB,
            target="sm_100a", fn=f)
    refused(ValueError, r"out_dtype='float16': bfloat16 or float32", A8, SA, A8, SB,
            out_dtype="float16", fn=f)
    refused(ValueError, r"out\.shape=\[64, 32\]: want the output = \[64, 64\]", A8, SA, A8, SB,
            out_dtype="float32", out=np.zeros((64, 32), np.float32), fn=f)


def test_moe_gemm_rules():
    f = kgen.moe_gemm
    b = np.zeros((2, 256, 256), np.uint8)
    sb = np.zeros((2, 2, 2), np.float32)
    off = np.array([0, 10, 64], np.int32)
    refused(ValueError, r"kgen\.moe_gemm: offsets=None: pass exactly one of offsets", A8, SA,
            b, sb, fn=f)
    refused(ValueError, r"counts=a tensor: pass exactly one", A8, SA, b, sb, offsets=off,
            counts=np.zeros(2, np.int32), fn=f)
    refused(ValueError, r"offsets\.shape=\[2\]: want \[E\+1\] = \[3\]", A8, SA, b, sb,
            offsets=off[:2].copy(), fn=f)
    refused(TypeError, r"offsets\.dtype=int64: must be int32", A8, SA, b, sb,
            offsets=off.astype(np.int64), fn=f)
    refused(ValueError, r"offsets\[1\]=-1: offsets never decrease", A8, SA, b, sb,
            offsets=np.array([0, -1, 5], np.int32), fn=f)
    refused(ValueError, r"offsets\[0\]=-2: offsets start at 0", A8, SA, b, sb,
            offsets=np.array([-2, 1, 5], np.int32), fn=f)
    refused(ValueError, r"offsets\[2\]=65: offsets end at most at a's rows, 64", A8, SA, b, sb,
            offsets=np.array([0, 1, 65], np.int32), fn=f)
    a3 = np.zeros((2, 16, 256), np.uint8)
    refused(ValueError, r"counts\[1\]=17: a count is 0 \.\. M \(16", a3,
            np.zeros((2, 16, 2), np.float32), b, sb, counts=np.array([1, 17], np.int32), fn=f)
    refused(ValueError, r"a\.shape=\[3, 16, 256\]: masked a is \[E, M, K\], E = b's experts, 2",
            np.zeros((3, 16, 256), np.uint8), SA, b, sb, counts=np.zeros(2, np.int32), fn=f)
    refused(ValueError, r"b\.shape\[1\]=128: with swiglu N is the gate rows then the up rows",
            A8, SA, b[:, :128].copy(), sb[:, :1].copy(), offsets=off, swiglu=True, fn=f)
    refused(ValueError, r"out_dtype='float32': bfloat16 or float8_e4m3fn \(with swiglu\)", A8,
            SA, b, sb, offsets=off, swiglu=True, out_dtype="float32", fn=f)
    refused(ValueError, r"out_dtype='float8_e4m3fn': bfloat16 or float32", A8, SA, b, sb,
            offsets=off, out_dtype="float8_e4m3fn", fn=f)
    refused(ValueError, r"swiglu_limit=0: a positive number", A8, SA, b, sb, offsets=off,
            swiglu=True, swiglu_limit=0, fn=f)
    refused(ValueError, r"sb\.shape=\[2, 2\]: want \[E, N/128, K/128\]", A8, SA,
            b, sb[0], offsets=off, fn=f)
    # FP4 weights [E, N, K/2] (uint8 rows of half a's K)
    w4, s4 = np.zeros((2, 256, 128), np.uint8), np.zeros((2, 256, 8), np.uint8)
    refused(ValueError, r"b\.shape=\[2, 256, 96\]: b's K must be a's, 256 \(FP4 weights: K/2",
            A8, SA, np.zeros((2, 256, 96), np.uint8), s4, offsets=off, fn=f)
    refused(ValueError, r"sb\.shape=\[2, 256, 4\]: want \[E, N, K/32\] = \[2, 256, 8\]", A8, SA,
            w4, s4[:, :, :4].copy(), offsets=off, fn=f)
    refused(TypeError, r"sb\.dtype=f32: must be float8_e8m0fnu or uint8", A8, SA, w4,
            s4.astype(np.float32), offsets=off, fn=f)
    refused(ValueError, r"out_dtype='float8_e4m3fn': bfloat16 or float32$", A8, SA, w4, s4,
            offsets=off, out_dtype="float8_e4m3fn", fn=f)
    refused(ValueError, r"b\.stride\(\)=\[\d+, 136, 1\]: the row stride is 136 bytes; sm_90a's tensor map",
            A8, SA, np.zeros((2, 256, 136), np.uint8)[:, :, :128], s4, offsets=off, fn=f)


# ---- indexer ---------------------------------------------------------------------

def test_indexer_rules():
    f = kgen.indexer
    q = np.zeros((2, 1, 4, 128), np.uint8)
    w = np.zeros((2, 1, 4), np.float32)
    kc = np.zeros((3, 16, 1, 132), np.uint8)
    bt = np.zeros((2, 2), np.int32)
    sl = np.zeros(2, np.int32)
    refused(TypeError, r"kgen\.indexer: q\.dtype=f32: must be float8_e4m3fn or uint8",
            q.astype(np.float32), w, kc, bt, sl, 8, fn=f)
    refused(ValueError, r"q\.shape\[-1\]=64: the indexer's head_dim is 128", q[..., :64].copy(),
            w, kc, bt, sl, 8, fn=f)
    refused(ValueError, r"weights\.shape=\[2, 1, 3\]: want \[batch, s_q, heads\] = \[2, 1, 4\]",
            q, w[..., :3].copy(), kc, bt, sl, 8, fn=f)
    refused(ValueError, r"k_cache\.shape=\[3, 16, 1, 128\]: want \[num_blocks, page_size, 1, "
            r"132 \| 68 \| 72\]", q, w, kc[..., :128].copy(), bt, sl, 8, fn=f)
    refused(ValueError, r"k_cache\.shape\[1\]=8: the page size is one of 16, 32, 64, 128", q, w,
            np.zeros((3, 8, 1, 132), np.uint8), bt, sl, 8, fn=f)
    refused(ValueError, r"block_table\.shape=\[1, 2\]: want \[batch, max_pages\] = \[2, ",
            q, w, kc, bt[:1].copy(), sl, 8, fn=f)
    refused(TypeError, r"cache_seqlens\.dtype=int64: must be int32", q, w, kc, bt,
            sl.astype(np.int64), 8, fn=f)
    refused(ValueError, r"topk=2049: indices kept per query row", q, w, kc, bt, sl, 2049, fn=f)
    refused(ValueError, r"score='mma': 'fma' \(default\)", q, w, kc, bt, sl, 8, score="mma",
            fn=f)
    refused(ValueError, r"block_table=an entry outside 0 \.\. 2: pages of k_cache", q, w, kc,
            np.full((2, 2), 3, np.int32), sl, 8, fn=f)
    refused(ValueError, r"max_len=0: the logits' row length", q, w, kc, bt, sl, 8, max_len=0,
            fn=f)
    refused(ValueError, r"num_splits=0: None \(chosen from the grid", q, w, kc, bt, sl, 8,
            num_splits=0, fn=f)
    k4, k72 = np.zeros((3, 16, 1, 68), np.uint8), np.zeros((3, 16, 1, 72), np.uint8)
    refused(ValueError, r"k_global=None: NVFP4 keys \(72 bytes\) take the cache's per-tensor",
            q, w, k72, bt, sl, 8, fn=f)
    refused(ValueError, r"k_global\.shape=\[2\]: want \[1\]", q, w, k72, bt, sl, 8,
            k_global=np.ones(2, np.float32), fn=f)
    refused(ValueError, r"k_global=a tensor: only NVFP4 keys .* this cache is fp4", q, w, k4, bt,
            sl, 8, k_global=np.ones(1, np.float32), fn=f)
    for score in ("wgmma", "tcgen05"):
        refused(ValueError, r"score='%s': tensor-core scoring takes FP8 and FP4 keys; nvfp4 keys"
                % score, q, w, k72, bt, sl, 8, k_global=np.ones(1, np.float32), score=score, fn=f)
