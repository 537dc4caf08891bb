"""kgen.sparse_decode on the emulator through NumPy arrays (no PyTorch
needed): real fp8-v4 caches, index lists with -1, out-of-range and
duplicate entries, rows that skip everything, topk_length below topk, odd
head counts, page sizes that divide nothing (61), the extra source, the
sink, split-KV; against a float64 reference that dequantizes the cache on
its own (ref.py). And the NumPy quantizer byte for byte against the C one
(tests/ref/decode_ref.c)."""

import ctypes
import os

import numpy as np
import pytest

import kgen
import ref
from kgen import _decode, _fp8v4

TARGETS = list(_decode.targets())


@pytest.fixture
def rng(request):
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    return np.random.default_rng(seed)


def bf16(x):
    """float32 values rounded to bf16, as uint16 bit patterns."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_f64(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def keys(rng, nb, ps):
    """BF16 K [nb, ps, 1, 512] of mixed magnitudes (by token and by group),
    so the scales differ, as tools/check_decode.c draws them."""
    mag = rng.choice([1.0, 1.0 / 64, 30.0], size=(nb, ps, 1, 1))
    grp = 1.0 + np.arange(512) // 64
    return bf16(rng.standard_normal((nb, ps, 1, 512)) * mag * grp)


def indices(rng, b, sq, topk, cap):
    """Mostly uniform tokens (pages in random order), ~10 % -1, ~5 % outside
    [0, cap) (skipped too), ~10 % duplicates; row (0, 0) skips everything."""
    x = rng.integers(0, cap, (b, sq, topk))
    u = rng.integers(0, 100, (b, sq, topk))
    x = np.where(u < 10, -1, x)
    x = np.where((u >= 10) & (u < 13), cap + rng.integers(0, 1000, x.shape), x)
    x = np.where((u >= 13) & (u < 15), -2 - rng.integers(0, 1 << 30, x.shape), x)
    for i in range(b):
        for s in range(sq):
            for j in range(1, topk):
                if 15 <= u[i, s, j] < 25:
                    x[i, s, j] = x[i, s, rng.integers(0, j)]
    x[0, 0] = -1
    return x.astype(np.int32)


def lengths(rng, b, sq, topk, per_row):
    """Uniform in 0 .. topk, the last entry past top-k and, with more than
    two, the second negative: the kernel clamps both to [0, topk]."""
    x = rng.integers(0, topk + 1, (b, sq) if per_row else (b,)).astype(np.int32)
    flat = x.reshape(-1)
    flat[-1] = topk + 1 + rng.integers(0, 1 << 20)
    if flat.size > 2:
        flat[1] = -1 - rng.integers(0, 1 << 20)
    return x


def rows(lens, b, sq):
    if lens is None:
        return None
    return lens if lens.ndim == 2 else np.repeat(lens[:, None], sq, axis=1)


# (batch, s_q, heads, topk, page, pages, extra (topk, page, pages) or None, sink,
#  topk_length: None / "b" / "bs" for (main, extra), num_splits)
CASES = [
    (2, 4, 3, 40, 61, 2, None, False, (None, None), None),
    (1, 3, 5, 70, 61, 3, (20, 2, 9), True, ("b", "bs"), 3),
    (3, 1, 16, 33, 1, 50, (16, 7, 4), True, ("bs", None), None),
    (1, 2, 65, 64, 64, 2, (8, 256, 1), False, (None, "b"), 2),
]


def case_id(c):
    b, sq, h, topk, ps, _, x, sink, lens, splits = c
    s = "b%d_sq%d_h%d_k%dp%d" % (b, sq, h, topk, ps)
    if x:
        s += "_x%dp%d" % x[:2]
    return s + ("_sink" if sink else "") + "".join("_len" + (l or "-") for l in lens) + \
        ("_split%d" % splits if splits else "")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_sparse_decode(rng, target, case):
    b, sq, hq, topk, ps, nb, extra, sink, lens, splits = case
    q = bf16(rng.standard_normal((b, sq, hq, 512)))
    kc = kgen.quantize_kv_cache(keys(rng, nb, ps))
    idx = indices(rng, b, sq, topk, nb * ps)
    tl = lengths(rng, b, sq, topk, lens[0] == "bs") if lens[0] else None
    kw = dict(indices=idx, topk_length=tl)
    srcs = [(kc, idx, tl)]
    if extra:
        xtopk, xps, xnb = extra
        xkc = kgen.quantize_kv_cache(keys(rng, xnb, xps))
        xidx = indices(rng, b, sq, xtopk, xnb * xps)
        xtl = lengths(rng, b, sq, xtopk, lens[1] == "bs") if lens[1] else None
        kw.update(extra_k_cache=xkc, extra_indices_in_kvcache=xidx, extra_topk_length=xtl)
        srcs.append((xkc, xidx, xtl))
    sk = (2 * rng.standard_normal(hq)).astype(np.float32) if sink else None
    scale = float(rng.uniform(0.5, 1.5) / np.sqrt(512))
    out = np.full((b, sq, hq, 512), 0x7FC1, np.uint16)  # NaN
    o, lse = kgen.sparse_decode(q, kc, attn_sink=sk, softmax_scale=scale, num_splits=splits,
                                out=out, target=target, **kw)
    assert o is out and lse.shape == (b, hq, sq) and lse.dtype == np.float32
    ref_src = []
    for c, x, l in srcs:
        ps_ = c.shape[1]
        flat = np.lib.stride_tricks.as_strided(c, (c.shape[0] * ref.fp8_v4_page_bytes(ps_),),
                                               (1,))
        ref_src.append((ref.fp8_v4_keys(flat, ps_), x, rows(l, b, sq)))
    wo, wl = ref.sparse_decode(bf16_f64(q), ref_src, scale, sk)
    got = bf16_f64(o)
    assert not np.isnan(got).any() and not np.isnan(lse).any()
    # per head row, relative to the row's largest value (tools/check_decode.c)
    for i in range(b):
        for s in range(sq):
            for h in range(hq):
                w = wo[i, s, h]
                den = np.abs(w).max()
                if den == 0:
                    assert (got[i, s, h] == 0).all(), (i, s, h)
                else:
                    assert np.abs(got[i, s, h] - w).max() / den < 1e-2, (i, s, h)
    fin = np.isfinite(wl)
    assert np.array_equal(np.isfinite(lse), fin) and (lse[~fin] == -np.inf).all()
    assert (np.abs(lse[fin] - wl[fin]) / np.maximum(1, np.abs(wl[fin]))).max() < 1e-3
    # row (0, 0) skips everything: O = 0, LSE = -inf or the sink
    assert (got[0, 0] == 0).all()
    if sink:
        assert np.abs(lse[0, :, 0] - sk).max() <= 1e-6 * max(1, np.abs(sk).max())
    else:
        assert (lse[0, :, 0] == -np.inf).all()


def test_split_kv_agrees_with_one_part(rng):
    b, sq, hq, topk, ps, nb = 1, 1, 8, 300, 64, 6
    q = bf16(rng.standard_normal((b, sq, hq, 512)))
    kc = kgen.quantize_kv_cache(keys(rng, nb, ps))
    idx = rng.integers(0, nb * ps, (b, sq, topk)).astype(np.int32)
    o1, l1 = kgen.sparse_decode(q, kc, indices=idx, num_splits=1)
    o4, l4 = kgen.sparse_decode(q, kc, indices=idx, num_splits=4)
    # the parts' O is rounded to bf16 before the combine (docs/ABI.md)
    assert np.abs(bf16_f64(o1) - bf16_f64(o4)).max() <= 1e-2 * np.abs(bf16_f64(o1)).max()
    assert np.abs(l1 - l4).max() < 1e-4 * max(1, np.abs(l1).max())


def test_choose_splits():
    # a grid that fills the GPU: one part; else parts to fill it, each at
    # least two 64-key tiles
    assert _decode.choose_splits(132, 132, 640) == 1
    assert _decode.choose_splits(1, 132, 640) == 5
    assert _decode.choose_splits(4, 132, 640 * 8) == 33
    assert _decode.choose_splits(1, 132, 64) == 1


def test_default_target_is_the_first_generated():
    assert TARGETS, "the generator makes no decode kernels"
    assert TARGETS == [t for t in _decode.PREFERENCE if t in TARGETS]
    q = np.zeros((1, 1, 2, 512), np.uint16)
    kc = kgen.quantize_kv_cache(np.zeros((1, 4, 1, 512), np.float32))
    before = {k for k in _decode._cache._modules}
    kgen.sparse_decode(q, kc, indices=np.zeros((1, 1, 4), np.int32))
    new = [k for k in _decode._cache._modules if k not in before]
    assert new and new[0][3][:2] == ("--target", TARGETS[0])


def test_quantizer_round_trip(rng):
    k = keys(rng, 3, 5)
    k[0, 0, 0, :64] = 0  # an all-zero group: the scale floor 1e-4
    k[0, 1, 0, :64] = bf16(np.full(64, 448.0))  # amax/448 a power of two
    kc = kgen.quantize_kv_cache(k)
    pb = _fp8v4.page_bytes(5)
    assert kc.shape == (3, 5, 1, 584) and kc.strides == (pb, 584, 584, 1) and pb == 3456
    got = kgen.dequantize_kv_cache(kc)[:, :, 0].astype(np.float64)
    want = bf16_f64(k)[:, :, 0]
    flat = np.lib.stride_tricks.as_strided(kc, (3 * pb,), (1,))
    assert np.array_equal(ref.fp8_v4_keys(flat, 5).reshape(3, 5, 512), got)
    assert np.array_equal(got[..., 448:], want[..., 448:])  # RoPE kept BF16
    # E4M3 keeps 3 mantissa bits: within 2^-4 of each group's amax
    g = np.abs(want[..., :448]).reshape(3, 5, 7, 64).max(-1, keepdims=True)
    err = np.abs(got[..., :448] - want[..., :448]).reshape(3, 5, 7, 64)
    assert (err <= g * 2.0 ** -4 + 1e-30).all()


@pytest.mark.skipif("KGEN_REF_LIB" not in os.environ,
                    reason="KGEN_REF_LIB (meson test sets it) names tests/ref's libkref")
def test_quantizer_matches_the_c_reference(rng):
    lib = ctypes.CDLL(os.environ["KGEN_REF_LIB"])
    u8p = ctypes.POINTER(ctypes.c_uint8)
    # tests/ref/decode_ref.h: a DecodeRefFormat resolved by name (an opaque
    # buffer here, larger than the struct), then quantize/dequantize with it
    fmt = ctypes.create_string_buffer(256)
    lib.decode_ref_format.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    assert lib.decode_ref_format(b"fp8-v4", 512, fmt) == 0
    lib.decode_ref_quantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, u8p, u8p]
    lib.decode_ref_dequantize.argtypes = [ctypes.c_void_p, u8p, u8p, ctypes.POINTER(ctypes.c_double)]
    lib.decode_ref_page_bytes.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.decode_ref_page_bytes.restype = ctypes.c_size_t
    nb, ps = 3, 7
    k = keys(rng, nb, ps)
    k[0, 0, 0, :64] = 0
    k[0, 1, 0, 64:128] = bf16(np.full(64, 448.0 * 4))
    k[0, 2, 0, 128:192] = bf16(rng.standard_normal(64) * 1e-6)  # E4M3 subnormals
    k[1, 0, 0, :448] = bf16(rng.standard_normal(448) * 1e4)
    kc = kgen.quantize_kv_cache(k)
    pb = lib.decode_ref_page_bytes(fmt, ps)
    assert pb == _fp8v4.page_bytes(ps)
    cbuf = np.zeros(nb * pb, np.uint8)
    p = cbuf.ctypes.data
    for t in range(nb * ps):
        pg, off = divmod(t, ps)
        kt = np.ascontiguousarray(k[pg, off, 0])
        lib.decode_ref_quantize(fmt, kt.ctypes.data,
                               ctypes.cast(p + pg * pb + off * 576, u8p),
                               ctypes.cast(p + pg * pb + ps * 576 + off * 8, u8p))
    ours = np.lib.stride_tricks.as_strided(kc, (nb * pb,), (1,))
    assert np.array_equal(ours, cbuf)
    deq = kgen.dequantize_kv_cache(kc)
    want = np.zeros(512)
    for t in (0, 1, 2, 7, nb * ps - 1):
        pg, off = divmod(t, ps)
        lib.decode_ref_dequantize(fmt, ctypes.cast(p + pg * pb + off * 576, u8p),
                                 ctypes.cast(p + pg * pb + ps * 576 + off * 8, u8p),
                                 want.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
        assert np.array_equal(deq[pg, off, 0].astype(np.float64), want)


def test_cpu_default_falls_back_to_a_target_that_takes_the_configuration(monkeypatch):
    # a target listed first whose generator refuses the configuration: the
    # call takes the next one instead of failing
    if "sm_100a" in TARGETS:
        pytest.skip("sm_100a generates decode kernels: no refusing target to list first")
    monkeypatch.setattr(_decode, "_targets", ("sm_100a",) + tuple(TARGETS))
    monkeypatch.setattr(_decode, "_chosen", {})
    q = np.zeros((1, 1, 6, 512), np.uint16)
    kc = kgen.quantize_kv_cache(np.ones((1, 3, 1, 512), np.float32))
    o, lse = kgen.sparse_decode(q, kc, indices=np.array([[[0, 2, -1]]], np.int32))
    assert (o == 0x3F80).all() and np.allclose(lse, np.log(2))  # O = 1.0, two keys
    assert list(_decode._chosen.values()) == [TARGETS[0]]
    with pytest.raises(ValueError, match=r"target='sm_100a'|--target=sm_100a"):
        kgen.sparse_decode(q, kc, indices=np.zeros((1, 1, 3), np.int32), target="sm_100a")
