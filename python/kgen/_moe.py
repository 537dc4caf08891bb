"""kgen.moe_gemm: the block-scaled E4M3 gemm of E experts in one launch
(docs/ABI.md "MoE layouts", "SwiGLU epilogue"), DeepGEMM's grouped
layouts: contiguous (prefill: the experts' rows concatenated, offsets
int32 [E+1]) or masked (decode, CUDA graphs: E slabs of M rows, counts
int32 [E]). Scales as kgen.fp8_gemm's (_fp8gemm), B's per expert."""

from . import _cache
from ._check import INT32_MAX
from ._fp8gemm import (KBLOCK, MASKED_WIDE_M, MASKED_WIDE_TILES, MOE_TILES, SWIGLU_TILES, UE8M0,
                       Gemm, _bytes_u8, fp4_tmap, tmap)

# the FP8 SwiGLU output's kernels (emitted/configs.txt)
FP8_OUT_TILES = {"sm_90a": ("--tile-m", "64", "--tile-n", "256", "--tile-k", "128", "--stages", "4"),
                 "sm_100a": ("--tile-n", "256", "--tile-k", "128", "--stages", "4")}
from ._launch import In, Out, launch
from ._tensors import View, empty, is_torch

G = Gemm("kgen.moe_gemm")
NMULT_SWIGLU = 256  # docs/ABI.md "SwiGLU epilogue": N a multiple of 256 (//@shape nmult)
# the sm_90a W4A8 kernels (emitted/configs.txt): 8 tokens a tile for slabs of up to 8, else 16,
# and 256 weight rows (four consumer warpgroups; BENCHMARKS.md, "W4A8")
W4A8_TILES = ("--tile-n", "256", "--tile-k", "128", "--stages", "8")


def _fp4_weights(b, av):
    """Whether b holds FP4 weights [E, N, K/2] (docs/ABI.md "W4A8 weights"):
    float4_e2m1fn_x2, or uint8 whose rows are half of a's K (uint8 rows of
    a's K are E4M3 codes)."""
    bv = View("b", b)
    if bv.dtype == "e2m1x2":
        return True
    return bv.dtype == "u8" and len(bv.shape) == 3 and 2 * bv.shape[-1] == av.shape[-1]


def _w4a8_sb(sb, av, e, n, k):
    """The W4A8 weights' UE8M0 exponents [E, N, K/32] (one per 32 of K of
    every weight row), read in place: the kernel's SB [E·N, K/32]."""
    v = G.r.view("sb", sb, UE8M0, 3, "[E, N, K/32] (FP4 weights: one UE8M0 per 32 of K)",
                 like=av)
    G.r.shape(v, (e, n, k // 32), "[E, N, K/32]")
    G.r.dense(v, 4)
    return _bytes_u8(sb)


def _table(name, x, av, n, rows):
    """The int32 expert table (offsets [E+1] or counts [E]); on the CPU its
    contents are checked as krt_moe_check does (docs/ABI.md "MoE
    layouts"); on the GPU they are trusted (reading them would sync) and
    the kernel clamps what it reads into 0 .. M."""
    r = G.r
    v = r.view(name, x, {"s32": "int32"}, 1, "[E+1]" if name == "offsets" else "[E]", like=av)
    r.shape(v, (n,), "[E+1]" if name == "offsets" else "[E]")
    r.dense(v, 4)
    if v.device == "cpu":
        vals = [int(t) for t in x.tolist()]
        if name == "offsets":
            bad = [i for i in range(1, n) if vals[i] < vals[i - 1]]
            if vals[0] < 0:
                r.fail(ValueError, "offsets[0]", vals[0], "offsets start at 0 or more")
            if bad:
                i = bad[0]
                r.fail(ValueError, "offsets[%d]" % i, vals[i], "offsets never decrease "
                       "(offsets[%d] = %d)" % (i - 1, vals[i - 1]))
            if vals[-1] > rows:
                r.fail(ValueError, "offsets[%d]" % (n - 1), vals[-1], "offsets end at most at "
                       "a's rows, %d" % rows)
        else:
            for i, c in enumerate(vals):
                if not 0 <= c <= rows:
                    r.fail(ValueError, "counts[%d]" % i, c, "a count is 0 .. M (%d, the rows "
                           "of a slab)" % rows)
    return v


class Call:
    pass


def plan(a, sa, b, sb, offsets=None, counts=None, swiglu=False, swiglu_limit=10.0,
         out_dtype=None, out=None, target=None):
    r = G.r
    if (offsets is None) == (counts is None):
        r.fail(ValueError, "offsets" if offsets is None else "counts", "None" if offsets is None
               else "a tensor", "pass exactly one of offsets (contiguous layout, int32 [E+1]) "
               "and counts (masked layout, int32 [E])")
    masked = counts is not None
    av = G.operand("a", a, "M", ndim=3 if masked else 2)
    fp4 = _fp4_weights(b, av)
    bv = G.fp4_operand("b", b, av) if fp4 else G.operand("b", b, "N", like=av, ndim=3)
    e, n, k = bv.shape[0], bv.shape[1], bv.shape[2] * (2 if fp4 else 1)
    if masked:
        if av.shape[0] != e:
            r.fail(ValueError, "a.shape", list(av.shape), "masked a is [E, M, K], E = b's "
                   "experts, %d" % e)
        m = av.shape[1]
    else:
        m = av.shape[0]
    if av.shape[-1] != k:
        r.fail(ValueError, "b.shape", list(bv.shape), "b's K must be a's, %d (FP4 weights: K/2 "
               "bytes a row)" % av.shape[-1])
    G.k_rule("a.shape[-1]", k)
    if e < 1:
        r.fail(ValueError, "b.shape[0]", e, "at least one expert")
    if m < 1 or n < 1:
        r.fail(ValueError, "a.shape" if m < 1 else "b.shape", [m, n], "M and N are at least 1")
    rows = e * m if masked else m
    if rows * k > INT32_MAX or e * n * k > INT32_MAX or rows * n > INT32_MAX:
        r.fail(ValueError, "a.shape", list(av.shape), "past the kernel's 32-bit index range")
    if swiglu and n % NMULT_SWIGLU:
        r.fail(ValueError, "b.shape[1]", n, "with swiglu N is the gate rows then the up rows "
               "of each expert, a multiple of 256 (each half whole 128-row scale blocks)")
    tv = _table("counts" if masked else "offsets", counts if masked else offsets, av,
                e if masked else e + 1, m)
    scale, tgt = G.mode(sa, av)
    kb = k // KBLOCK
    c = Call()
    c.dev, t = G.device(av, tgt, target, sa)
    w4a8 = fp4 and scale == "block128"
    if fp4:
        G.fp4_align(bv, t)
    od = G.out_dtype(out_dtype, ("bf16", "e4m3") if swiglu else ("bf16", "f32"))
    nout = n // 2 if swiglu else n
    oshape = (e, m, nout) if masked else (m, nout)
    G.out(out, av, oshape, od)
    lay = "masked" if masked else "contiguous"
    args = ("--target", t, "--dtype", "e4m3", "--scale", "w4a8" if w4a8 else scale,
            "--out-dtype", od)
    if fp4 and not w4a8:
        args += ("--dtype-b", "e2m1")
    if scale == "block128":
        if masked:
            sv = View("sa", sa)
            if len(sv.shape) != 3 or sv.shape[:2] != (e, m):
                r.fail(ValueError, "sa.shape", list(sv.shape), "want [E, M, K/128] = %s"
                       % [e, m, kb])
            sa = sa.reshape(e * m, sv.shape[2])
        c.sa = G.block_sa(sa, av, rows, kb)
        if w4a8:
            c.sb = _w4a8_sb(sb, av, e, n, k)
        else:
            c.sb, sbt = G.block_sb(sb, av, -(-n // 128), kb, experts=e)
            args += ("--scale-b", sbt)
    else:
        if masked:
            c.sa = G.mx_sf("sa", sa, av, m, kb, slabs=e)
        else:
            c.sa = G.mx_sf("sa", sa, av, m, kb)
        c.sb = G.mx_sf("sb", sb, av, n, kb, slabs=e)
    args += ("--moe", lay)
    if swiglu:
        args += ("--epilogue", "swiglu")
        try:
            limit = float(swiglu_limit)
        except (TypeError, ValueError):
            r.fail(TypeError, "swiglu_limit", repr(swiglu_limit), "a number")
        if not limit > 0:
            r.fail(ValueError, "swiglu_limit", repr(swiglu_limit), "a positive number (the "
                   "clamp of the gate from above and the up value on both sides)")
        c.limit = limit
    if w4a8:
        c.args = args + (("--tile-m", "8" if masked and m <= 8 else "16") + W4A8_TILES)
    elif od == "e4m3":
        c.args = args + FP8_OUT_TILES[t]
    elif t == "sm_90a" and masked and m > MASKED_WIDE_M:
        c.args = args + MASKED_WIDE_TILES
    else:
        c.args = args + (SWIGLU_TILES if swiglu else MOE_TILES)[(t, lay)]
    c.scale, c.fp4 = scale, fp4
    c.av, c.bv, c.tv, c.masked, c.swiglu = av, bv, tv, masked, swiglu
    c.e, c.m, c.n, c.k, c.rows, c.od, c.oshape, c.out = e, m, n, k, rows, od, oshape, out
    return c


def _fp8_scales(c):
    """The FP8 SwiGLU output's scales, zeroed (rows no expert owns keep
    them): (the kernel's buffer, the array returned). block128: f32 CS
    [cdiv(N/2,128), rows] returned as its transposed view [rows, N/256]
    ([E, M, N/256] masked), the sa layout moe_gemm reads in place; mx32:
    the UE8M0 images [slabs·cdiv(M,128), cdiv(N/2,128), 512] as they are."""
    nb = -(-(c.n // 2) // 128)
    if c.scale == "block128":
        buf = empty(c.av, (nb, c.rows), "f32")
    else:
        rb = -(-c.m // 128) * (c.e if c.masked else 1)
        buf = empty(c.av, (rb, nb, 512), "u8")
    if is_torch(buf):
        buf.zero_()
    else:
        buf.fill(0)
    if c.scale != "block128":
        return buf, buf
    view = buf.t() if is_torch(buf) else buf.T
    return buf, (view.reshape(c.e, c.m, nb) if c.masked else view)


def run(c):
    """The output (with swiglu and an FP8 output: (out, scales)); rows no
    expert owns are left as they were (a new output starts as zeros)."""
    if c.out is not None:
        out = c.out
    else:
        out = empty(c.av, c.oshape, c.od)
        if is_torch(out):
            out.zero_()
        else:
            out.fill(0)
    mod = _cache.module(c.dev, "gemm", c.args)
    bmap = fp4_tmap(c.dev, c.bv, c.e * c.n, c.k, c.scale == "block128") if c.fp4 else \
        tmap(c.dev, c.bv, c.e * c.n, c.k)
    vals = {"A": tmap(c.dev, c.av, c.rows, c.k), "B": bmap,
            "C": Out(out, keep=True), "SA": In(c.sa), "SB": In(c.sb),
            "offsets": In(c.tv.x), "counts": In(c.tv.x),
            "M": c.m, "N": c.n, "K": c.k, "E": c.e}
    if c.swiglu:
        vals["swiglu_limit"] = c.limit
    if c.od == "e4m3":
        buf, scales = _fp8_scales(c)
        vals["CS"] = Out(buf, keep=True)
        launch(c.dev, mod, vals)
        return out, scales
    launch(c.dev, mod, vals)
    return out
