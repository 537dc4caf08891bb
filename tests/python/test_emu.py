"""kgen's calls on the emulator through NumPy arrays (no PyTorch needed):
small odd shapes against float64 references, both targets, and the disk
cache."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kgen
import ref

TARGETS = ["sm_100a", "sm_90a"]


def rnd(rng, *shape):
    return rng.standard_normal(shape).astype(np.float16)


def f64(x):
    return np.asarray(x, np.float64)


@pytest.fixture
def rng(request):
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    return np.random.default_rng(seed)


def poison(shape):
    return np.full(shape, np.nan, np.float16)


# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, head_dim_v, causal, window, shared)
CASES = [
    (2, 37, 53, 4, 2, 64, 64, True, None, False),
    (1, 70, 70, 3, 3, 64, 64, False, None, False),
    (2, 19, 45, 4, 1, 64, 64, False, (9, 4), False),
    (1, 33, 47, 2, 2, 128, 128, True, None, True),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])) +
                         ("_causal" if c[7] else "") + ("_win" if c[8] else "") +
                         ("_kv" if c[9] else ""))
def test_attention_batched(rng, target, case):
    b, sq, sk, hq, hkv, d, dv, causal, window, shared = case
    q = rnd(rng, b, sq, hq, d)
    k = rnd(rng, b, sk, hkv, d)
    v = k if shared else rnd(rng, b, sk, hkv, dv)
    scale = float(rng.uniform(0.5, 1.5) / np.sqrt(d))
    out = poison((b, sq, hq, dv))
    o, lse = kgen.attention(q, k, v, causal=causal, window=window, softmax_scale=scale,
                            return_lse=True, out=out, target=target)
    assert o is out and o.shape == (b, sq, hq, dv) and lse.shape == (b, hq, sq)
    cu_q = [i * sq for i in range(b + 1)]
    cu_k = [i * sk for i in range(b + 1)]
    wo, wl = ref.attention(f64(q).reshape(b * sq, hq, d), f64(k).reshape(b * sk, hkv, d),
                           f64(v).reshape(b * sk, hkv, dv), cu_q, cu_k, causal,
                           window or (-1, -1), scale)
    assert ref.rel_err(o.reshape(b * sq, hq, dv), wo) < 1e-2
    got_l = np.transpose(lse, (1, 0, 2)).reshape(hq, b * sq)
    fin = np.isfinite(wl)
    assert np.array_equal(np.isfinite(got_l), fin)
    assert np.abs(got_l[fin] - wl[fin]).max() < 1e-3 * max(1, np.abs(wl[fin]).max())


@pytest.mark.parametrize("target", TARGETS)
def test_attention_varlen_gqa(rng, target):
    lens_q, lens_k = [5, 0, 31, 1], [9, 4, 40, 17]
    cu_q = np.cumsum([0] + lens_q).astype(np.int32)
    cu_k = np.cumsum([0] + lens_k).astype(np.int32)
    hq, hkv, d = 4, 2, 64
    q, k, v = rnd(rng, cu_q[-1], hq, d), rnd(rng, cu_k[-1], hkv, d), rnd(rng, cu_k[-1], hkv, d)
    o, lse = kgen.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                            max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                            return_lse=True, target=target)
    wo, wl = ref.attention(f64(q), f64(k), f64(v), list(cu_q), list(cu_k), True)
    assert o.shape == (cu_q[-1], hq, d) and lse.shape == (hq, cu_q[-1])
    assert ref.rel_err(o, wo) < 1e-2
    assert np.abs(lse - wl).max() < 1e-3 * max(1, np.abs(wl).max())


@pytest.mark.parametrize("target", TARGETS)
def test_attention_decode_packs_heads(rng, target):
    # one query row, 16 query heads on one KV head (MQA decode): the call
    # packs heads into the Q tile
    b, sk, hq, d = 3, 77, 16, 64
    q, k, v = rnd(rng, b, 1, hq, d), rnd(rng, b, sk, 1, d), rnd(rng, b, sk, 1, d)
    before = dict(kgen._attention._packing)
    o = kgen.attention(q, k, v, target=target)
    new = [a for key, a in kgen._attention._packing.items() if key not in before]
    assert new and int(new[0][-1]) > 1, "decode kernel was not head-packed: %s" % new
    wo, _ = ref.attention(f64(q).reshape(b, hq, d), f64(k).reshape(b * sk, 1, d),
                          f64(v).reshape(b * sk, 1, d), list(range(b + 1)),
                          [i * sk for i in range(b + 1)])
    assert ref.rel_err(o.reshape(b, hq, d), wo) < 1e-2


@pytest.mark.parametrize("target", TARGETS)
def test_gemm(rng, target):
    m, n, k = 70, 45, 72
    a, bm = rnd(rng, m, k), rnd(rng, n, k)
    c = kgen.gemm(a, bm, target=target)
    assert c.dtype == np.float32 and c.shape == (m, n)
    want = f64(a) @ f64(bm).T
    assert ref.rel_err(c, want) < 1e-3


def test_empty_keys_give_zero_and_minus_inf(rng):
    q, k = rnd(rng, 1, 3, 2, 64), rnd(rng, 1, 0, 2, 64)
    o, lse = kgen.attention(q, k, k, return_lse=True)
    assert (o == 0).all() and np.isneginf(lse).all()


def test_disk_cache_serves_a_new_process(tmp_path):
    env = dict(os.environ, KGEN_CACHE_DIR=str(tmp_path))
    prog = ("import numpy as np, kgen; q=np.ones((1,3,2,64),np.float16); "
            "kgen.attention(q,q,q,target='sm_90a'); print(kgen.cache_stats)")
    runs = [subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True,
                           text=True, check=True).stdout for _ in range(2)]
    assert "'generated': 1" in runs[0] and "'disk': 0" in runs[0]
    assert "'generated': 0" in runs[1] and "'disk': 1" in runs[1]
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("fmha-") and files[0].endswith(".ptx")

