"""DeepSeek-V4's fp8-v4 KV cache (docs/ABI.md "decode"; FlashMLA's
"MODEL1" FP8 sparse layout): a page of page_size tokens is page_size rows
of 576 bytes (448 E4M3 NoPE values, then 64 BF16 RoPE values), then
page_size scale entries of 8 bytes (7 UE8M0 exponents, one per 64 NoPE
values, and a zero pad byte), the page rounded up to a multiple of 576
bytes. As a tensor it is FlashMLA's view [num_blocks, page_size, 1, 584]
with strides (page bytes, 584, 584, 1) over a [num_blocks, page bytes]
buffer.

The quantizer is tests/ref/decode_ref.c's (amax per 64 values, scale
2^ceil(log2(max(amax/448, 1e-4))), E4M3 round-to-nearest-even, RoPE kept
BF16), written with NumPy: tests/python checks it byte for byte against
the C one."""

D_QK, D_NOPE, D_ROPE, GROUP = 512, 448, 64, 64
ROW, SCALES = 576, 8
TOKEN = ROW + SCALES  # 584 bytes of a token, its row and its scale entry
GROUPS = D_NOPE // GROUP


def page_bytes(page_size):
    """Bytes of one page: page_size·584 rounded up to a multiple of 576."""
    return (page_size * TOKEN + ROW - 1) // ROW * ROW


def _np():
    import numpy as np

    return np


def bf16_bits(x):
    """x as uint16 BF16 bit patterns (NumPy): float arrays round to nearest
    even; uint16 arrays are taken as bit patterns already; ml_dtypes'
    bfloat16 is reinterpreted."""
    np = _np()
    x = np.asarray(x)
    if x.dtype == np.uint16:
        return x
    if x.dtype.name == "bfloat16":
        return x.view(np.uint16)
    if x.dtype.kind != "f":
        raise TypeError("kgen.quantize_kv_cache: k.dtype=%s: want bfloat16 (or float values, "
                        "rounded to bfloat16, or uint16 bfloat16 bit patterns)" % x.dtype)
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(x)
    return np.where(nan, 0x7FC0, r).astype(np.uint16)


def bf16_values(bits):
    """float32 values of uint16 BF16 bit patterns."""
    np = _np()
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def e4m3_encode(v):
    """float64 values (|v| <= 448 after scaling) to E4M3 bytes, round to
    nearest even, saturating at 448 (docs/ABI.md "decode")."""
    np = _np()
    v = np.asarray(v, np.float64)
    sign = np.where(np.signbit(v), 0x80, 0).astype(np.uint8)
    a = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        _, ex = np.frexp(a)
        e = ex - 1  # ilogb for a > 0
        q = np.where(e < -6, 2.0 ** -9, np.ldexp(1.0, e - 3))
        r = np.minimum(np.rint(a / q) * q, 448.0)
        _, ex2 = np.frexp(r)
        e2 = ex2 - 1
        sub = r < 2.0 ** -6
        code = np.where(sub, r / 2.0 ** -9, ((e2 + 7) << 3) + (r / np.ldexp(1.0, e2 - 3) - 8))
        code = np.where((a == 0) | np.isnan(v), 0, code)
        out = (sign | code.astype(np.uint8)).astype(np.uint8)
    return np.where(np.isnan(v), 0x7F, out).astype(np.uint8)


def e4m3_decode(b):
    """float64 values of E4M3 bytes (0x7f/0xff: NaN)."""
    np = _np()
    b = np.asarray(b, np.uint8).astype(np.int64)
    e, m = (b >> 3) & 15, b & 7
    v = np.where(e > 0, np.ldexp((8 + m).astype(np.float64), e - 10),
                 np.ldexp(m.astype(np.float64), -9))
    v = np.where(b & 0x80, -v, v)
    return np.where((b & 0x7F) == 0x7F, np.nan, v)


def _blocks(name, k):
    """k as [num_blocks, page_size, 512] BF16 bits (NumPy) and its origin."""
    np = _np()
    from ._tensors import is_torch

    dev = None
    if is_torch(k):
        import torch

        dev = k.device
        if k.dtype != torch.bfloat16:
            k = k.to(torch.bfloat16)
        k = k.detach().cpu().contiguous().view(torch.int16).numpy().view(np.uint16)
    else:
        k = bf16_bits(k)
    if k.ndim == 4:
        if k.shape[2] != 1:
            raise ValueError("kgen.%s: k.shape=%s: want [num_blocks, page_size, 1, 512] (one KV "
                             "head)" % (name, list(k.shape)))
        k = k[:, :, 0]
    if k.ndim != 3 or k.shape[-1] != D_QK or k.shape[1] < 1:
        raise ValueError("kgen.%s: k.shape=%s: want [num_blocks, page_size, 1, 512] (448 NoPE "
                         "+ 64 RoPE values per token)" % (name, list(k.shape)))
    return k, dev


def quantize_kv_cache(k):
    """An fp8-v4 cache from K: k [num_blocks, page_size, 1, 512] BF16
    (torch, or NumPy as ml_dtypes bfloat16 / uint16 bit patterns / floats
    rounded to BF16). Returns uint8 [num_blocks, page_size, 1, 584] with
    strides (page bytes, 584, 584, 1), on k's device (computed on the CPU
    with NumPy), ready for kgen.sparse_decode's k_cache."""
    np = _np()
    bits, dev = _blocks("quantize_kv_cache", k)
    nb, ps = bits.shape[0], bits.shape[1]
    pb = page_bytes(ps)
    raw = np.zeros((nb, pb), np.uint8)
    x = bf16_values(bits[..., :D_NOPE]).astype(np.float64).reshape(nb, ps, GROUPS, GROUP)
    amax = np.abs(x).max(axis=-1)
    s = np.maximum(amax / 448.0, 1e-4)
    m, e = np.frexp(s)
    e = np.where(m == 0.5, e - 1, e)  # 2^ceil(log2(s))
    rows = raw[:, :ps * ROW].reshape(nb, ps, ROW)
    rows[:, :, :D_NOPE] = e4m3_encode(x / np.ldexp(1.0, e)[..., None]).reshape(nb, ps, D_NOPE)
    rows[:, :, D_NOPE:] = np.ascontiguousarray(bits[..., D_NOPE:]).view(np.uint8).reshape(
        nb, ps, 2 * D_ROPE)
    sc = raw[:, ps * ROW:ps * TOKEN].reshape(nb, ps, SCALES)
    sc[:, :, :GROUPS] = (e + 127).astype(np.uint8)
    view = np.lib.stride_tricks.as_strided(raw, (nb, ps, 1, TOKEN), (pb, TOKEN, TOKEN, 1))
    if dev is None:
        return view
    import torch

    t = torch.from_numpy(raw).to(dev)
    return t.as_strided((nb, ps, 1, TOKEN), (pb, TOKEN, TOKEN, 1))


def raw_pages(k_cache):
    """The [num_blocks, page bytes] uint8 buffer behind an fp8-v4 k_cache
    view (NumPy; a CPU copy of a torch tensor), bytes past the last page's
    tokens zero."""
    np = _np()
    from ._tensors import is_torch

    nb, ps = k_cache.shape[0], k_cache.shape[1]
    pb = page_bytes(ps)
    n = ps * TOKEN
    out = np.zeros((nb, pb), np.uint8)
    if is_torch(k_cache):
        import torch

        src = k_cache.detach().view(torch.uint8) if k_cache.dtype != torch.uint8 else k_cache
        src = torch.as_strided(src, (nb, n), (pb, 1)).cpu().numpy()
    else:
        a = k_cache.view(np.uint8)
        src = np.lib.stride_tricks.as_strided(a, (nb, n), (pb, 1))
    out[:, :n] = src
    return out


def dequantize_kv_cache(k_cache):
    """The values the decode kernel attends, float32 [num_blocks,
    page_size, 1, 512] (NumPy): E4M3·2^(e-127) for the NoPE part, the BF16
    RoPE part as is (every value exact)."""
    np = _np()
    nb, ps = k_cache.shape[0], k_cache.shape[1]
    raw = raw_pages(k_cache)
    rows = raw[:, :ps * ROW].reshape(nb, ps, ROW)
    sc = raw[:, ps * ROW:ps * TOKEN].reshape(nb, ps, SCALES)[:, :, :GROUPS].astype(np.int64)
    out = np.empty((nb, ps, 1, D_QK), np.float32)
    nope = e4m3_decode(rows[:, :, :D_NOPE]).reshape(nb, ps, GROUPS, GROUP)
    out[:, :, 0, :D_NOPE] = (nope * np.ldexp(1.0, sc - 127)[..., None]).reshape(nb, ps, D_NOPE)
    rope = np.ascontiguousarray(rows[:, :, D_NOPE:]).view(np.uint16)
    out[:, :, 0, D_NOPE:] = bf16_values(rope)
    return out
