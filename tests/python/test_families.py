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
