"""float64 references for the Python tests (NumPy), on the inputs as the
kernel sees them (already rounded to bf16/fp16)."""

import numpy as np


def attention(q, k, v, cu_q, cu_k, causal=False, window=(-1, -1), scale=None):
    """q [total_q, Hq, D], k [total_k, Hkv, D], v [total_k, Hkv, Dv] as
    float64; cu_q/cu_k lists. Returns (O [total_q, Hq, Dv], LSE [Hq,
    total_q]), bottom-right causal and windows as docs/ABI.md says."""
    tq, hq, d = q.shape
    hkv, dv = k.shape[1], v.shape[2]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    o = np.zeros((tq, hq, dv))
    lse = np.full((hq, tq), -np.inf)
    left, right = window
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        sq, sk = q1 - q0, k1 - k0
        if sq == 0 or sk == 0:
            continue
        i = np.arange(sq)[:, None] + sk - sq
        j = np.arange(sk)[None, :]
        vis = np.ones((sq, sk), bool)
        if causal:
            vis &= j <= i
        if left >= 0:
            vis &= j >= i - left
        if right >= 0 and not causal:
            vis &= j <= i + right
        for h in range(hq):
            kh = h // (hq // hkv)
            s = scale * q[q0:q1, h] @ k[k0:k1, kh].T
            s = np.where(vis, s, -np.inf)
            m = s.max(axis=1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)
            p = np.exp(s - m)
            l = p.sum(axis=1, keepdims=True)
            rows = l[:, 0] > 0
            o[q0:q1, h][rows] = (p @ v[k0:k1, kh])[rows] / l[rows]
            lse[h, q0:q1][rows] = (np.log(l[:, 0]) + m[:, 0])[rows]
    return o, lse


def rel_err(got, want):
    """max |got - want| over max |want| (row scale of attention outputs)."""
    got = np.asarray(got, np.float64)
    den = max(np.abs(want).max(), 1e-30)
    return float(np.abs(got - want).max() / den)


# ---- decode (docs/ABI.md "decode"), written apart from kgen._fp8v4 ---------

def _e4m3_table():
    t = np.empty(256)
    for x in range(256):
        e, m = (x >> 3) & 15, x & 7
        v = (1 + m / 8) * 2.0 ** (e - 7) if e else m / 8 * 2.0 ** -6
        t[x] = np.nan if x & 0x7F == 0x7F else (-v if x & 0x80 else v)
    return t


E4M3 = _e4m3_table()


def fp8_v4_page_bytes(ps):
    pb = ps * (576 + 8)
    return -(-pb // 576) * 576


def fp8_v4_keys(raw, ps):
    """float64 [capacity, 512]: every token of an fp8-v4 cache given as its
    flat page bytes (pages of fp8_v4_page_bytes(ps))."""
    raw = np.asarray(raw, np.uint8).reshape(-1)
    pb = fp8_v4_page_bytes(ps)
    pages = raw.size // pb
    out = np.empty((pages * ps, 512))
    for t in range(pages * ps):
        base = (t // ps) * pb
        row = raw[base + (t % ps) * 576: base + (t % ps) * 576 + 576]
        sc = raw[base + ps * 576 + (t % ps) * 8: base + ps * 576 + (t % ps) * 8 + 7]
        out[t, :448] = E4M3[row[:448]] * np.repeat(2.0 ** (sc.astype(np.int64) - 127), 64)
        rope = row[448:].view("<u2").astype(np.uint32) << 16
        out[t, 448:] = rope.view(np.float32)
    return out


def sparse_decode(q, sources, scale, sink=None):
    """q float64 [b, s_q, h, 512]; sources: [(keys [capacity, 512] float64,
    indices [b, s_q, topk] int, lengths [b, s_q] or None)]. An entry counts
    when its position is below the row's length (clamped to [0, topk]) and
    its index is in [0, capacity); the rows attend the valid entries of all
    sources in one softmax, exp(sink[h]) joining the denominator. Returns
    O [b, s_q, h, 512] and LSE [b, h, s_q] (natural log, sink included; no
    entry: O = 0 and LSE = -inf, or the sink)."""
    b, sq, h, _ = q.shape
    o = np.zeros((b, sq, h, 512))
    lse = np.full((b, h, sq), -np.inf)
    for i in range(b):
        for s in range(sq):
            rows = []
            for keys, idx, lens in sources:
                topk = idx.shape[2]
                n = topk if lens is None else min(max(int(lens[i, s]), 0), topk)
                for x in idx[i, s, :n]:
                    if 0 <= x < keys.shape[0]:
                        rows.append(keys[x])
            k = np.array(rows).reshape(-1, 512)
            sc = scale * q[i, s] @ k.T  # [h, n]
            if sink is not None:
                sc = np.concatenate([sc, np.asarray(sink, np.float64)[:, None]], axis=1)
            if sc.shape[1] == 0:
                continue
            m = sc.max(axis=1, keepdims=True)
            p = np.exp(sc - m)
            l = p.sum(axis=1)
            o[i, s] = (p[:, :k.shape[0]] @ k) / l[:, None]
            lse[i, :, s] = m[:, 0] + np.log(l)
    return o, lse


# ---- topk, decode_merge (docs/ABI.md "topk", "decode_merge") ---------------

def topk_ok(logits, idx, k):
    """Whether idx [rows, k] is a top-k of each row of logits [rows, n] by
    docs/ABI.md "topk": n <= k gives 0 .. n-1 then -1; else k distinct
    indices whose values are the k largest (ties: any of them)."""
    logits = np.asarray(logits, np.float64)
    rows, n = logits.shape
    for r in range(rows):
        got = np.asarray(idx[r], np.int64)
        if n <= k:
            if not (got[:n] == np.arange(n)).all() or not (got[n:] == -1).all():
                return False
            continue
        if got.min() < 0 or got.max() >= n or len(set(got.tolist())) != k:
            return False
        if not np.array_equal(np.sort(logits[r, got]), np.sort(logits[r])[-k:]):
            return False
    return True


def merge_states(outs, lses, maxes=None, sink=None):
    """outs [P, b, s_q, h, 512], lses/maxes [P, b, h, s_q] float64: the
    merged (O [b, s_q, h, 512], LSE [b, h, s_q]): G = max(sink, max_p
    lse_p), L = e^(sink-G) + sum_p e^(lse_p-G), O = sum_p e^(m_p-G) O_p / L."""
    outs, lses = np.asarray(outs, np.float64), np.asarray(lses, np.float64)
    maxes = lses if maxes is None else np.asarray(maxes, np.float64)
    s = np.full(lses.shape[1:], -np.inf) if sink is None else \
        np.broadcast_to(np.asarray(sink, np.float64)[None, :, None], lses.shape[1:])
    g = np.maximum(s, lses.max(axis=0)) if lses.shape[0] else s.copy()
    gs = np.where(np.isfinite(g), g, 0)
    w = np.where(np.isfinite(lses), np.exp(lses - gs), 0)
    wm = np.where(np.isfinite(lses), np.exp(maxes - gs), 0)
    den = w.sum(axis=0) + np.exp(s - gs)
    num = np.einsum("pbhs,pbshd->bshd", wm, outs)
    dt = np.transpose(den, (0, 2, 1))[..., None]
    o = np.where(dt > 0, num / np.where(dt > 0, dt, 1), 0)
    lse = np.where(den > 0, gs + np.log(np.where(den > 0, den, 1)), -np.inf)
    return o, lse


# ---- block-scaled FP8 gemm (docs/ABI.md "gemm") ------------------------------

# tests/ref/gemm_ref.h GEMM_WGMMA_FP8_BOUND: the worst error of an FP8 wgmma
# K block (13 fraction bits below each k32 step's largest term, truncated),
# as a fraction of that block's sum of |a·b|·scales
WGMMA_FP8_BOUND = 136.0 * 2.0 ** -13


def e4m3_codes(rng, *shape):
    """Random E4M3 bytes over every finite code (NaN codes 0x7f/0xff made 0)."""
    c = rng.integers(0, 256, shape, dtype=np.uint8)
    c[(c & 0x7F) == 0x7F] = 0
    return c


def block_gemm(a, b, sa, sb):
    """E4M3 codes a [M, K], b [N, K]; sa [M, K/128], sb [cdiv(N,128), K/128]
    float scales: (C, bound) float64 [M, N], C = sum over K blocks of
    sa·sb·(a·bᵀ), bound the same sum over |a|·|b|ᵀ (the FP8 error's
    scale)."""
    av, bv = E4M3[a], E4M3[b]
    n = b.shape[0]
    c = np.zeros((a.shape[0], n))
    bound = np.zeros_like(c)
    for j in range(a.shape[1] // 128):
        s = slice(128 * j, 128 * j + 128)
        sc = np.asarray(sa, np.float64)[:, j][:, None] * \
            np.repeat(np.asarray(sb, np.float64)[:, j], 128)[None, :n]
        c += sc * (av[:, s] @ bv[:, s].T)
        bound += np.abs(sc) * (np.abs(av[:, s]) @ np.abs(bv[:, s]).T)
    return c, bound


def mx_gemm(a, b, fa, fb):
    """E4M3 codes a [M, K], b [N, K] with UE8M0 factors fa [M, K/32], fb
    [N, K/32]: (C, bound) float64 as block_gemm's."""
    av = E4M3[a] * np.repeat(2.0 ** (fa.astype(np.int64) - 127), 32, axis=1)
    bv = E4M3[b] * np.repeat(2.0 ** (fb.astype(np.int64) - 127), 32, axis=1)
    return av @ bv.T, np.abs(av) @ np.abs(bv).T


def fp4_weights(w, sw):
    """FP4 weights w uint8 [N, K/2] (two E2M1 codes a byte, K index 2j in
    byte j's low nibble) with UE8M0 exponents sw [N, K/32]: float64 [N, K]."""
    v = np.empty((w.shape[0], 2 * w.shape[1]))
    v[:, 0::2], v[:, 1::2] = E2M1[w & 15], E2M1[w >> 4]
    return v * np.repeat(2.0 ** (sw.astype(np.int64) - 127), 32, axis=1)


def fp4_gemm(a, w, sw, sa):
    """E4M3 codes a [M, K] times FP4 weights (w, sw as fp4_weights'): sa
    float [M, K/128] (one scale per 1 x 128) or uint8 UE8M0 [M, K/32]
    (MXFP8 factors): (C, bound) float64 [M, N] as block_gemm's."""
    wv = fp4_weights(w, sw)
    if sa.dtype == np.uint8:
        av = E4M3[a] * np.repeat(2.0 ** (sa.astype(np.int64) - 127), 32, axis=1)
        return av @ wv.T, np.abs(av) @ np.abs(wv).T
    av = E4M3[a]
    c = np.zeros((a.shape[0], w.shape[0]))
    bound = np.zeros_like(c)
    for j in range(a.shape[1] // 128):
        s, sc = slice(128 * j, 128 * j + 128), np.asarray(sa, np.float64)[:, j][:, None]
        c += sc * (av[:, s] @ wv[:, s].T)
        bound += np.abs(sc) * (np.abs(av[:, s]) @ np.abs(wv[:, s]).T)
    return c, bound


def within(got, want, tol):
    """Every element within tol plus its output rounding (bf16: 2^-8)."""
    err = np.abs(got - want)
    lim = tol + 2.0 ** -8 * np.abs(want) + 1e-30
    assert (err <= lim).all(), "worst %g over %g" % ((err / lim).max(), 1)


def w4a8_case(rng, e, n, k, m, masked):
    """Random inputs of a W4A8 MoE GEMM: E4M3 tokens a ([E, M, K] masked,
    else [M, K]), fp32 sa per 1 x 128, FP4 weights w [E, N, K/2] and UE8M0
    sw [E, N, K/32] whose spans stay under 14 (the fold is exact)."""
    a = e4m3_codes(rng, *((e, m, k) if masked else (m, k)))
    sa = rng.uniform(2.0 ** -10, 2.0 ** -6, a.shape[:-1] + (k // 128,)).astype(np.float32)
    w = rng.integers(0, 256, (e, n, k // 2), dtype=np.uint8)
    sw = rng.integers(118, 126, (e, n, k // 32), dtype=np.uint8)
    return a, sa, w, sw


def expert_rows(counts=None, offsets=None):
    """Each expert's rows of a MoE output: masked (counts [E]: slab x's
    first counts[x]) or contiguous (offsets [E+1])."""
    if counts is not None:
        return [(x, slice(0, int(c))) for x, c in enumerate(counts)]
    return [(slice(int(offsets[x]), int(offsets[x + 1])),) for x in range(len(offsets) - 1)]


def check_experts(got, owned, product, limit=None):
    """A MoE output got (float64) against each expert's float64 product:
    owned[x] indexes expert x's rows, product(x, rows) gives (C, bound) of
    those rows (the FP8 wgmma's error scale), limit (or None) applies the
    SwiGLU epilogue; every row no expert owns must still be 0."""
    mine = np.zeros(got.shape, bool)
    for x, rows in enumerate(owned):
        p, bound = product(x, rows)
        tol = WGMMA_FP8_BOUND * bound
        if limit is not None:
            p, tol = swiglu(p, bound, limit)
        within(got[rows], p, tol)
        mine[rows] = True
    assert (got[~mine] == 0).all(), "a row no expert owns was written"


def check_fp8_experts(cv, owned, product, scale, limit, amax_scale=False):
    """A SwiGLU output quantized to E4M3 (cv: its decoded codes) against
    float64, expert by expert: product(x, rows) gives the gate+up (C,
    bound) of expert x's rows, scale(x, rows) each output's factor (the
    shape of cv[rows]). E4M3 keeps 3 fraction bits (2^-4 relative) and its
    subnormals reach 2^-9 of the scale. amax_scale: the factor of each
    token and 128 columns is their amax / 448 (1 when all are 0), as the
    W4A8 kernel writes it."""
    for x, rows in enumerate(owned):
        if cv[rows].shape[0] == 0:
            continue
        p, bound = product(x, rows)
        want, tol = swiglu(p, bound, limit)
        s = scale(x, rows)
        if amax_scale:
            amax = np.abs(want).reshape(want.shape[0], -1, 128).max(axis=2)
            assert np.allclose(s[:, ::128], np.where(amax > 0, amax / 448, 1.0), rtol=2e-2)
        err = np.abs(cv[rows] * s - want)
        assert (err <= tol + 2.0 ** -4 * np.abs(want) + 2.0 ** -10 * s).all()


def swiglu(p, bound, limit):
    """The SwiGLU epilogue of p [rows, N] (gate half, then up half) and
    its error bound from the product's: (out [rows, N/2], tol)."""
    h = p.shape[1] // 2
    g, u = np.minimum(p[:, :h], limit), np.clip(p[:, h:], -limit, limit)
    with np.errstate(over="ignore"):
        silu = g / (1 + np.exp(-g))
    dg, du = WGMMA_FP8_BOUND * bound[:, :h], WGMMA_FP8_BOUND * bound[:, h:]
    # silu's slope is below 1.1 everywhere; the clamps are 1-Lipschitz
    tol = 1.1 * dg * (np.abs(u) + du) + np.abs(silu) * du
    return silu * u, tol


# ---- indexer (docs/ABI.md "indexer", cache format fp8) -----------------------

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def indexer_keys(k_cache, k_global=None):
    """float64 keys [pages, ps, 128] of an indexer cache [pages, ps, 1, B]
    by its bytes per key B (docs/ABI.md "indexer"): 132 (fp8: ps rows of
    128 E4M3, then ps fp32 scales), 68 (fp4: ps rows of 64 bytes, value 2i
    in the low nibble of byte i, then ps words of 4 UE8M0, one per 32),
    72 (nvfp4: the same rows, then ps rows of 8 UE4M3, one per 16, times
    k_global)."""
    pages, ps, _, per = k_cache.shape
    raw = np.asarray(k_cache).reshape(pages, ps * per)
    if per == 132:
        vals = E4M3[raw[:, :ps * 128].reshape(pages, ps, 128)]
        scale = raw[:, ps * 128:].copy().view("<f4").reshape(pages, ps).astype(np.float64)
        return vals * scale[..., None]
    rows = raw[:, :ps * 64].reshape(pages, ps, 64)
    vals = np.empty((pages, ps, 128))
    vals[..., 0::2], vals[..., 1::2] = E2M1[rows & 15], E2M1[rows >> 4]
    sc = raw[:, ps * 64:].reshape(pages, ps, per - 64)
    if per == 68:
        return vals * np.repeat(2.0 ** (sc.astype(np.int64) - 127), 32, axis=-1)
    return vals * np.repeat(E4M3[sc], 16, axis=-1) * float(np.asarray(k_global).reshape(-1)[0])


def indexer_logits(q, w, k_cache, block_table, seq_lens, max_len, k_global=None):
    """q E4M3 codes [b, s_q, H, 128], w float [b, s_q, H], k_cache uint8
    [pages, ps, 1, bytes per key] (indexer_keys), block_table [b,
    max_pages], seq_lens [b]: (logits float64 [b, s_q, max_len], -inf past
    each row's n_t keys; the physical index page·ps + offset of every
    logical key [b, max_pages·ps]; the error scale of each logit,
    sum_h |w|·sum_d |q·k| [b, s_q, max_len])."""
    b, sq, h, _ = q.shape
    ps = k_cache.shape[1]
    kv = indexer_keys(k_cache, k_global)
    qv, w = E4M3[q], np.asarray(w, np.float64)
    mp = block_table.shape[1]
    out = np.full((b, sq, max_len), -np.inf)
    bound = np.zeros((b, sq, max_len))
    phys = np.zeros((b, mp * ps), np.int64)
    for i in range(b):
        pg = np.repeat(block_table[i].astype(np.int64), ps)
        off = np.tile(np.arange(ps), mp)
        phys[i] = pg * ps + off
        ln = min(max(int(seq_lens[i]), 0), max_len, mp * ps)
        keys = kv[pg[:ln], off[:ln]]  # [ln, 128]
        for t in range(sq):
            n = min(max(ln - sq + t + 1, 0), ln)
            s = np.maximum(qv[i, t] @ keys[:n].T, 0)  # [H, n]
            out[i, t, :n] = w[i, t] @ s
            bound[i, t, :n] = np.abs(w[i, t]) @ (np.abs(qv[i, t]) @ np.abs(keys[:n]).T)
    return out, phys, bound


def mx_factors(images, rows):
    """Plain UE8M0 factors [rows, K/32] of factor images [cdiv(rows,128),
    K/128, 512] (docs/ABI.md "MXFP8": row r, K element k at byte
    16·(r%32) + 4·((r%128)/32) + (k%128)/32 of image (r/128, k/128))."""
    images = np.asarray(images, np.uint8)
    kb = images.shape[1]
    r = np.arange(rows)[:, None]
    k = np.arange(kb * 4)[None, :]
    return images[r // 128, k // 4, 16 * (r % 32) + 4 * ((r % 128) // 32) + k % 4]
