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
