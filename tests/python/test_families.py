"""kgen.topk and kgen.merge_attn_states on the emulator through NumPy
arrays: small odd shapes with fresh random inputs against float64
references, both targets, poisoned outputs (the emulator's launches start
every output as NaN/0xFF bytes)."""

import os

import numpy as np
import pytest

import kgen
import ref

TARGETS = ["sm_100a", "sm_90a"]


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    return np.random.default_rng(seed)


def bf16(bits):
    return (np.asarray(bits).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


# (rows, n, k): one chunk, a row shorter than k, several chunks with a partial one
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", [(3, 1001, 64), (2, 37, 64), (2, 16384 + 613, 100)],
                         ids=lambda c: "x".join(map(str, c)))
def test_topk(rng, target, case):
    rows, n, k = case
    x = rng.standard_normal((rows, n)).astype(np.float32)
    x[0, : n // 3] = x[0, 0]  # ties below the top (most rows): any of them
    idx = kgen.topk(x, k, target=target)
    assert idx.dtype == np.int32 and idx.shape == (rows, k)
    assert ref.topk_ok(x, idx, k)


def test_topk_ties_at_kth_and_out(rng):
    x = np.zeros((2, 300), np.float32)
    x[:, 7::11] = rng.standard_normal(27).astype(np.float32)[None] + 5  # 27 above, 13 of the zeros
    out = np.full((2, 40), -7, np.int32)
    r = kgen.topk(x, 40, out=out)
    assert r is out and ref.topk_ok(x, out, 40)


@pytest.mark.parametrize("target", TARGETS)
def test_merge_sink_and_empty_part(rng, target):
    p, b, sq, h = 3, 2, 3, 5
    outs = rng.standard_normal((p, b, sq, h, 512)).astype(np.float32)
    lses = (3 * rng.standard_normal((p, b, h, sq))).astype(np.float32)
    lses[1, 0, :, 0] = -np.inf           # a part with no key there
    outs[1, 0, 0] = 1e30                 # whose O must weigh 0
    lses[:, 1, 2, 1] = -np.inf           # no key at all in a row: the sink only
    sink = rng.standard_normal(h).astype(np.float32)
    o, lse = kgen.merge_attn_states(outs, lses, sink=sink, target=target)
    wo, wl = ref.merge_states(outs, lses, sink=sink)
    assert o.shape == (b, sq, h, 512) and lse.shape == (b, h, sq)
    assert np.abs(bf16(o) - wo).max() <= 2 ** -8 * np.abs(wo).max()
    assert np.abs(lse - wl).max() < 1e-5 * max(1, np.abs(wl).max())


def test_merge_parts_as_list_unnormalized_no_sink(rng):
    b, sq, h = 1, 2, 3
    outs = [rng.standard_normal((b, sq, h, 512)).astype(np.float32) for _ in range(2)]
    lses = [rng.standard_normal((b, h, sq)).astype(np.float32) for _ in range(2)]
    maxes = [(l - 1).astype(np.float32) for l in lses]
    lses[0][0, 1, 1] = lses[1][0, 1, 1] = -np.inf  # nothing to attend: 0 and -inf
    out = np.full((b, sq, h, 512), 0x7FC0, np.uint16)
    o, lse = kgen.merge_attn_states(outs, lses, maxes=maxes, out=out)
    wo, wl = ref.merge_states(np.stack(outs), np.stack(lses), np.stack(maxes))
    assert o is out
    assert np.abs(bf16(o) - wo).max() <= 2 ** -8 * np.abs(wo).max()
    assert (bf16(o)[0, 1, 1] == 0).all() and np.isneginf(lse[0, 1, 1])
    fin = np.isfinite(wl)
    assert np.array_equal(np.isfinite(lse), fin)
    assert np.abs(lse[fin] - wl[fin]).max() < 1e-5 * max(1, np.abs(wl[fin]).max())


# ---- fp8_gemm, moe_gemm ------------------------------------------------------

def bf16_or_f32(c):
    return bf16(c) if c.dtype == np.uint16 else np.asarray(c, np.float64)


within = ref.within


def block_scales(rng, rows, kb):
    return rng.uniform(2.0 ** -10, 2.0 ** -6, (rows, kb)).astype(np.float32)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("sa_layout", ["transposed", "row-major"])
def test_fp8_gemm_block128(rng, out_dtype, sa_layout):
    m, n, k = 70, 200, 256
    a, b = ref.e4m3_codes(rng, m, k), ref.e4m3_codes(rng, n, k)
    sa = block_scales(rng, m, k // 128)
    if sa_layout == "transposed":  # DeepSeek's: [K/128, M] storage, read in place
        sa = np.ascontiguousarray(sa.T).T
    sb = block_scales(rng, 2, k // 128)
    c = kgen.fp8_gemm(a, sa, b, sb, out_dtype=out_dtype)
    assert c.shape == (m, n)
    want, bound = ref.block_gemm(a, b, sa, sb)
    within(bf16_or_f32(c), want, ref.WGMMA_FP8_BOUND * bound)


def test_fp8_gemm_block128_ue8m0_weights(rng):
    m, n, k = 33, 130, 128
    a, b = ref.e4m3_codes(rng, m, k), ref.e4m3_codes(rng, n, k)
    sa = block_scales(rng, m, 1)
    sb = rng.integers(118, 122, (2, 1), dtype=np.uint8)
    out = np.full((m, n), np.nan, np.float32)
    c = kgen.fp8_gemm(a, sa, b, sb, out_dtype="float32", out=out)
    assert c is out
    want, bound = ref.block_gemm(a, b, sa, 2.0 ** (sb.astype(np.int64) - 127))
    within(c, want, ref.WGMMA_FP8_BOUND * bound)


@pytest.mark.parametrize("images", [False, True])
def test_fp8_gemm_mx32(rng, images):
    m, n, k = 70, 150, 256
    a, b = ref.e4m3_codes(rng, m, k), ref.e4m3_codes(rng, n, k)
    fa = rng.integers(118, 124, (m, k // 32), dtype=np.uint8)
    fb = rng.integers(118, 124, (n, k // 32), dtype=np.uint8)
    sa, sb = fa, fb
    if images:
        sa, sb = kgen._fp8gemm.mx_images(fa, m, 2), kgen._fp8gemm.mx_images(fb, n, 2)
    c = kgen.fp8_gemm(a, sa, b, sb, out_dtype="float32")
    want, bound = ref.mx_gemm(a, b, fa, fb)
    within(c, want, ref.WGMMA_FP8_BOUND * bound)


def moe_case(rng, mx, masked, swiglu):
    e, n, k = 3, 256, 256
    m = 37 if masked else 150
    a = ref.e4m3_codes(rng, *((e, m, k) if masked else (m, k)))
    b = ref.e4m3_codes(rng, e, n, k)
    if mx:
        sa = rng.integers(118, 124, a.shape[:-1] + (k // 32,), dtype=np.uint8)
        sb = rng.integers(118, 124, (e, n, k // 32), dtype=np.uint8)
    else:
        sa = rng.uniform(2.0 ** -10, 2.0 ** -6, a.shape[:-1] + (k // 128,)).astype(np.float32)
        sb = rng.uniform(2.0 ** -10, 2.0 ** -6, (e, n // 128, k // 128)).astype(np.float32)
    if masked:
        table = dict(counts=np.array([5, 0, m], np.int32))
        owned = [(x, slice(0, c)) for x, c in enumerate(table["counts"])]
    else:
        table = dict(offsets=np.array([3, 50, 50, 141], np.int32))  # rows past 141: nobody's
        o = table["offsets"]
        owned = [(slice(o[x], o[x + 1]),) for x in range(e)]
    return a, b, sa, sb, table, owned


@pytest.mark.parametrize("swiglu", [False, True], ids=["plain", "swiglu"])
@pytest.mark.parametrize("masked", [False, True], ids=["contiguous", "masked"])
@pytest.mark.parametrize("mx", [False, True], ids=["block128", "mx32"])
def test_moe_gemm(rng, mx, masked, swiglu):
    a, b, sa, sb, table, owned = moe_case(rng, mx, masked, swiglu)
    c = kgen.moe_gemm(a, sa, b, sb, swiglu=swiglu, swiglu_limit=7.5, **table)
    gemm = ref.mx_gemm if mx else ref.block_gemm
    ref.check_experts(bf16(c), owned, lambda x, rows: gemm(a[rows], b[x], sa[rows], sb[x]),
                      7.5 if swiglu else None)


def fp4_table(masked, m):
    """Three experts' table: masked m-1, 0 and m rows; contiguous 17, 0
    and 17 rows of 40 from row 3 (rows past 37: nobody's)."""
    if masked:
        return dict(counts=np.array([m - 1, 0, m], np.int32))
    return dict(offsets=np.array([3, 20, 20, 37], np.int32))


@pytest.mark.parametrize("swiglu", [False, True], ids=["plain", "swiglu"])
@pytest.mark.parametrize("masked,m", [(False, 40), (True, 6), (True, 12)],
                         ids=["contiguous", "masked-8", "masked-16"])
@pytest.mark.parametrize("mx", [False, True], ids=["w4a8", "mx32"])
def test_moe_gemm_fp4(rng, mx, masked, m, swiglu):
    """FP4 expert weights (docs/ABI.md "W4A8 weights"): the sm_90a W4A8
    kernel (float32 sa; 8 tokens a tile for slabs of up to 8, else 16) and
    the sm_100a E4M3 x E2M1 one (UE8M0 sa), on the emulator, with and
    without the SwiGLU epilogue."""
    e, n, k = 3, 256, 256
    a, sa, w, sw = ref.w4a8_case(rng, e, n, k, m, masked)
    if mx:
        sa = rng.integers(118, 124, a.shape[:-1] + (k // 32,), dtype=np.uint8)
    table = fp4_table(masked, m)
    owned = ref.expert_rows(**table)
    c = kgen.moe_gemm(a, sa, w, sw, swiglu=swiglu, swiglu_limit=7.5, **table)
    assert c.shape[-1] == (n // 2 if swiglu else n)
    ref.check_experts(bf16(c), owned, lambda x, rows: ref.fp4_gemm(a[rows], w[x], sw[x], sa[rows]),
                      7.5 if swiglu else None)


# ---- indexer -------------------------------------------------------------------

def indexer_case(rng, b, sq, h, ps, pages, mp, lens, per=132):
    """Random inputs of kgen.indexer; per: bytes a key (132 fp8, 68 fp4,
    72 nvfp4: random nibbles and scale codes)."""
    q = ref.e4m3_codes(rng, b, sq, h, 128)
    w = rng.standard_normal((b, sq, h)).astype(np.float32)
    kc = np.zeros((pages, ps * per), np.uint8)
    if per == 132:
        kc[:, :ps * 128] = ref.e4m3_codes(rng, pages, ps * 128)
        sc = rng.uniform(2.0 ** -12, 2.0 ** -8, (pages, ps)).astype(np.float32)
        kc[:, ps * 128:] = sc.view(np.uint8).reshape(pages, ps * 4)
    else:
        kc[:, :ps * 64] = rng.integers(0, 256, (pages, ps * 64), dtype=np.uint8)
        lo, hi = (118, 127) if per == 68 else (0x20, 0x40)  # UE8M0 / UE4M3 codes
        kc[:, ps * 64:] = rng.integers(lo, hi, (pages, ps * (per - 64)), dtype=np.uint8)
    bt = np.stack([rng.permutation(pages)[:mp] for _ in range(b)]).astype(np.int32)
    return q, w, kc.reshape(pages, ps, 1, per), bt, np.array(lens, np.int32)


def check_logits(lg, want, bound):
    """The indexer's logits against ref.indexer_logits: -inf exactly past
    the visible keys; returns which are finite."""
    fin = np.isfinite(want)
    assert np.array_equal(np.isfinite(lg), fin) and (lg[~fin] == -np.inf).all(), "-inf past the visible keys"
    # FP8 wgmma scoring truncates as the H100 does (ref.WGMMA_FP8_BOUND per
    # q·k, relu and the weights keep it); f32 sums of 128·H terms otherwise
    tol = ref.WGMMA_FP8_BOUND * bound[fin] + 1e-5 * np.abs(want[fin]).max()
    assert (np.abs(lg[fin] - want[fin]) <= tol).all()
    return fin


def check_indexer(idx, lg, want, phys, bound, topk):
    fin = check_logits(lg, want, bound)
    b, sq, _ = idx.shape
    for i in range(b):
        logical = {int(p): j for j, p in enumerate(phys[i])}
        for t in range(sq):
            n = int(fin[i, t].sum())
            got = idx[i, t]
            if n <= topk:
                assert list(got[:n]) == list(phys[i, :n]) and (got[n:] == -1).all()
            else:
                pos = np.array([logical[int(x)] for x in got])
                assert ref.topk_ok(lg[i, t, :n][None], pos[None], topk)


@pytest.mark.parametrize("target,score", [("sm_90a", "fma"), ("sm_100a", "fma"),
                                          ("sm_90a", "wgmma"), ("sm_100a", "tcgen05")])
def test_indexer(rng, target, score):
    # lengths: past the block table's capacity (clamped), longer than topk, shorter than s_q
    b, sq, h, ps, pages, mp, topk = 3, 3, 5, 16, 14, 6, 40
    q, w, kc, bt, sl = indexer_case(rng, b, sq, h, ps, pages, mp, [500, 61, 2])
    idx, lg = kgen.indexer(q, w, kc, bt, sl, topk, score=score, return_logits=True,
                           target=target)
    assert idx.dtype == np.int32 and idx.shape == (b, sq, topk) and lg.shape == (b, sq, mp * ps)
    want, phys, bound = ref.indexer_logits(q, w, kc, bt, sl, mp * ps)
    check_indexer(idx, lg, want, phys, bound, topk)


def test_indexer_max_len_and_splits(rng):
    b, sq, h, ps, pages, mp, topk = 2, 1, 3, 32, 9, 8, 30
    q, w, kc, bt, sl = indexer_case(rng, b, sq, h, ps, pages, mp, [200, 77])
    idx, lg = kgen.indexer(q, w, kc, bt, sl, topk, max_len=150, num_splits=3,
                           return_logits=True, target="sm_90a")
    assert lg.shape == (b, sq, 150)
    want, phys, bound = ref.indexer_logits(q, w, kc, bt, sl, 150)
    check_indexer(idx, lg, want, phys, bound, topk)


@pytest.mark.parametrize("target,score", [("sm_90a", "wgmma"), ("sm_100a", "tcgen05")])
def test_indexer_logits_alone(rng, target, score):
    # topk 0: the scoring without the select, split rows each filling its own -inf share
    b, sq, h, ps, pages, mp = 2, 2, 7, 16, 30, 13
    q, w, kc, bt, sl = indexer_case(rng, b, sq, h, ps, pages, mp, [190, 1])
    lg = kgen.indexer(q, w, kc, bt, sl, 0, score=score, max_len=201, num_splits=2, target=target)
    assert lg.dtype == np.float32 and lg.shape == (b, sq, 201)
    want, _, bound = ref.indexer_logits(q, w, kc, bt, sl, 201)
    check_logits(lg, want, bound)
    idx, lg2 = kgen.indexer(q, w, kc, bt, sl, 0, score=score, max_len=201, return_logits=True,
                            target=target)
    assert idx.shape == (b, sq, 0) and np.array_equal(lg2, lg)


@pytest.mark.parametrize("masked", [False, True], ids=["contiguous", "masked"])
@pytest.mark.parametrize("mx", [False, True], ids=["block128", "mx32"])
def test_moe_gemm_fp8_swiglu_feeds_the_down_gemm(rng, mx, masked):
    a, b, sa, sb, table, owned = moe_case(rng, mx, masked, True)
    c, cs = kgen.moe_gemm(a, sa, b, sb, swiglu=True, out_dtype="float8_e4m3fn", **table)
    assert c.dtype == np.uint8 and c.shape[-1] == 128
    m = c.shape[-2]
    slab = -(-m // 128)
    cv = ref.E4M3[c]

    def factors(x):  # the per-element scale of expert x's output rows
        if mx:
            img = cs[x * slab:(x + 1) * slab] if masked else cs
            return np.repeat(2.0 ** (ref.mx_factors(img, m).astype(np.int64) - 127), 32, axis=1)
        return np.repeat(np.asarray(cs[x] if masked else cs, np.float64), 128, axis=1)

    gemm = ref.mx_gemm if mx else ref.block_gemm
    ref.check_fp8_experts(cv, owned, lambda x, rows: gemm(a[rows], b[x], sa[rows], sb[x]),
                          lambda x, rows: factors(x)[rows[-1]], 10.0)
    # the down projection reads (c, cs) as its a and sa, in place
    e, n2 = b.shape[0], 128
    b2 = ref.e4m3_codes(rng, e, n2, 128)
    if mx:
        sb2 = rng.integers(118, 124, (e, n2, 4), dtype=np.uint8)
    else:
        sb2 = rng.uniform(2.0 ** -10, 2.0 ** -6, (e, 1, 1)).astype(np.float32)
    d = bf16(kgen.moe_gemm(c, cs, b2, sb2, out_dtype="bfloat16", **table))
    for x, rows in enumerate(owned):
        if cv[rows].shape[0] == 0:
            continue
        if mx:
            img = cs[x * slab:(x + 1) * slab] if masked else cs
            p, bound = ref.mx_gemm(c[rows], b2[x], ref.mx_factors(img, m)[rows[-1]], sb2[x])
        else:
            p, bound = ref.block_gemm(c[rows], b2[x], (cs[x] if masked else cs)[rows[-1]], sb2[x])
        within(d[rows], p, ref.WGMMA_FP8_BOUND * bound)


@pytest.mark.parametrize("masked", [False, True], ids=["contiguous", "masked"])
def test_moe_gemm_w4a8_fp8_swiglu_feeds_the_down_gemm(rng, masked):
    """Hopper's FP4 expert pipeline on the W4A8 kernels: gate+up with the
    SwiGLU epilogue quantized to FP8 (C and its fp32 scales per 1 x 128),
    read in place as the activations of the down GEMM's FP4 weights."""
    e, n, k, m = 3, 256, 256, 12 if masked else 40
    a, sa, w, sw = ref.w4a8_case(rng, e, n, k, m, masked)
    table = fp4_table(masked, m)
    owned = ref.expert_rows(**table)
    c, cs = kgen.moe_gemm(a, sa, w, sw, swiglu=True, out_dtype="float8_e4m3fn", **table)
    assert c.dtype == np.uint8 and c.shape[-1] == 128 and cs.shape[-1] == 1
    ref.check_fp8_experts(ref.E4M3[c], owned,
                          lambda x, rows: ref.fp4_gemm(a[rows], w[x], sw[x], sa[rows]),
                          lambda x, rows: np.repeat(np.asarray(cs[rows], np.float64), 128, axis=-1),
                          10.0, amax_scale=True)
    # the down GEMM: FP4 weights [E, N2, 64] against (c, cs), read in place
    n2 = 128
    w2 = rng.integers(0, 256, (e, n2, 64), dtype=np.uint8)
    sw2 = rng.integers(118, 126, (e, n2, 4), dtype=np.uint8)
    d = bf16(kgen.moe_gemm(c, cs, w2, sw2, **table))
    ref.check_experts(d, owned, lambda x, rows: ref.fp4_gemm(c[rows], w2[x], sw2[x],
                                                             np.asarray(cs[rows], np.float32)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("per", [68, 72], ids=["fp4", "nvfp4"])
def test_indexer_fp4_keys(rng, target, per):
    b, sq, h, ps, pages, mp, topk = 2, 2, 6, 32, 7, 4, 50
    q, w, kc, bt, sl = indexer_case(rng, b, sq, h, ps, pages, mp, [101, 128], per)
    kg = np.array([0.37], np.float32) if per == 72 else None
    idx, lg = kgen.indexer(q, w, kc, bt, sl, topk, k_global=kg, return_logits=True,
                           target=target)
    want, phys, bound = ref.indexer_logits(q, w, kc, bt, sl, mp * ps, kg)
    check_indexer(idx, lg, want, phys, bound, topk)


@pytest.mark.parametrize("target,score", [("sm_100a", "tcgen05"), ("sm_90a", "wgmma")])
def test_indexer_fp4_keys_on_tensor_cores(rng, target, score):
    # FP4 keys through sm_100a's block-scaled MMA (E2M1 x E4M3, the cache's UE8M0 words),
    # or turned into E4M3 for sm_90a's FP8 wgmma (each key's exponents folded)
    b, sq, h, ps, pages, mp, topk = 2, 2, 7, 32, 9, 5, 40
    q, w, kc, bt, sl = indexer_case(rng, b, sq, h, ps, pages, mp, [150, 33], 68)
    idx, lg = kgen.indexer(q, w, kc, bt, sl, topk, score=score, return_logits=True,
                           target=target)
    want, phys, bound = ref.indexer_logits(q, w, kc, bt, sl, mp * ps)
    check_indexer(idx, lg, want, phys, bound, topk)


def test_smallest_shapes(rng):
    """One row, one column, one K block; a merge of no parts."""
    a, b = ref.e4m3_codes(rng, 1, 128), ref.e4m3_codes(rng, 1, 128)
    sa, sb = block_scales(rng, 1, 1), block_scales(rng, 1, 1)
    want, bound = ref.block_gemm(a, b, sa, sb)
    within(kgen.fp8_gemm(a, sa, b, sb, out_dtype="float32"), want, ref.WGMMA_FP8_BOUND * bound)
    f = rng.integers(120, 130, (1, 4), dtype=np.uint8)
    want, bound = ref.mx_gemm(a, b, f, f)
    within(kgen.fp8_gemm(a, f, b, f, out_dtype="float32"), want, ref.WGMMA_FP8_BOUND * bound)
    assert kgen.topk(np.ones((1, 1), np.float32), 3).tolist() == [[0, -1, -1]]
    none_o, none_l = np.zeros((0, 1, 2, 3, 512), np.float32), np.zeros((0, 1, 3, 2), np.float32)
    o, lse = kgen.merge_attn_states(none_o, none_l)
    assert (bf16(o) == 0).all() and np.isneginf(lse).all()
    sink = np.array([0.5, -1, 2], np.float32)
    o, lse = kgen.merge_attn_states(none_o, none_l, sink=sink)
    assert (bf16(o) == 0).all() and (lse == sink[None, :, None]).all()


def test_indexer_feeds_sparse_decode_and_merge(rng):
    """DeepSeek-V3.2/V4's decode step on the emulator: the indexer picks
    top-k keys of the paged cache, sparse_decode attends them (its cache
    shares the page size and block table), a second source (the window)
    is decoded apart and merge_attn_states joins the two in one softmax."""
    from test_decode import bf16 as to_bf16, bf16_f64, keys

    b, h, ps, pages, mp, topk = 2, 4, 16, 6, 4, 24
    q8, w, kc8, bt, sl = indexer_case(rng, b, 1, h, ps, pages, mp, [50, 17])
    idx = kgen.indexer(q8, w, kc8, bt, sl, topk, target="sm_90a")
    kc = kgen.quantize_kv_cache(keys(rng, pages, ps))
    q = to_bf16(rng.standard_normal((b, 1, 8, 512)))
    win = np.stack([np.arange(8) + 3 * i for i in range(b)]).astype(np.int32)[:, None]
    o1, l1 = kgen.sparse_decode(q, kc, indices=idx, target="sm_90a")
    o2, l2 = kgen.sparse_decode(q, kc, indices=win, target="sm_90a")
    o, lse = kgen.merge_attn_states([o1, o2], [l1, l2])
    flat = np.lib.stride_tricks.as_strided(kc, (pages * ref.fp8_v4_page_bytes(ps),), (1,))
    kv = ref.fp8_v4_keys(flat, ps)
    both = np.concatenate([idx, win], axis=2)
    wo, wl = ref.sparse_decode(bf16_f64(q), [(kv, both, None)], 512 ** -0.5)
    # two bf16 roundings (the parts, then the merge) of values below max|O|
    assert np.abs(bf16(o) - wo).max() <= 2 ** -7 * np.abs(wo).max()
    assert np.abs(lse - wl).max() < 1e-4 * max(1, np.abs(wl).max())
