"""kgen.fp8_gemm and kgen.moe_gemm: the block-scaled E4M3 gemm family
(docs/ABI.md "gemm": "Block-scaled e4m3" on sm_90a, "MXFP8" on sm_100a,
"MoE layouts", "SwiGLU epilogue") with DeepGEMM's operand conventions:
C = A·Bᵀ, A [M, K] and B [N, K] K-major E4M3.

The scales pick the kernel:
- float32 sa (sm_90a, `--scale block128`): sa is DeepGEMM's [M, K/128]
  activation scales (one per 1 x 128 of a row of A), read K-block-major:
  passed as is when its strides are (1, M) (the transposed layout
  DeepSeek's quantizer writes), else copied to it; sb float32 [N/128,
  K/128] (one per 128 x 128 block of B), or UE8M0 bytes of the same shape
  (`--scale-b ue8m0`, torch.float8_e8m0fnu or uint8).
- UE8M0 sa (sm_100a, `--scale mx32`): one 2^(e-127) factor per 32 of K
  of every row, sa [M, K/32] and sb [N, K/32] (torch.float8_e8m0fnu or
  uint8), reordered here into the 512-byte images tcgen05.cp reads, or
  given as those images already, [cdiv(rows,128), K/128, 512]."""

from . import _cache
from ._attention import device_and_target
from ._check import INT32_MAX, Rules
from ._launch import In, Map, Out, launch
from ._tensors import View, empty, is_torch, torch_module

KBLOCK = 128  # docs/ABI.md "gemm": K elements per scale block (//@shape kblock)
E4M3 = {"e4m3": "float8_e4m3fn", "u8": "uint8 (E4M3 codes)"}
UE8M0 = {"ue8m0": "float8_e8m0fnu", "u8": "uint8 (UE8M0 exponents)"}
FP4 = {"e2m1x2": "float4_e2m1fn_x2", "u8": "uint8 (two E2M1 codes a byte, the even K in the low "
       "nibble)"}
F32 = {"f32": "float32"}
OUT = {"bf16": "bf16", "bfloat16": "bf16", "f32": "f32", "float32": "f32",
       "e4m3": "e4m3", "float8_e4m3fn": "e4m3"}
OUT_NAMES = {"bf16": "bfloat16", "f32": "float32", "e4m3": "float8_e4m3fn (with swiglu)"}
# the tiles of emitted/configs.txt's block-scaled rows
TILES = {"sm_90a": ("--tile-m", "128", "--tile-n", "128", "--tile-k", "128", "--stages", "6"),
         "sm_100a": ("--tile-n", "256", "--tile-k", "128", "--stages", "4")}
MOE_TILES = {
    ("sm_90a", "masked"): ("--tile-m", "64", "--tile-n", "128", "--tile-k", "128", "--stages", "8"),
    ("sm_90a", "contiguous"): ("--tile-n", "128", "--tile-k", "128", "--stages", "6"),
    ("sm_100a", "masked"): ("--tile-n", "128", "--tile-k", "128", "--stages", "6"),
    ("sm_100a", "contiguous"): ("--tile-n", "256", "--tile-k", "128", "--stages", "4"),
}
# sm_90a masked slabs of more than 64 rows: two consumer warpgroups of 64 rows read each weight
# tile once for 128 tokens (BENCHMARKS.md, "Wider tiles"); at 64 rows or fewer the
# second warpgroup would only multiply rows past the slab
MASKED_WIDE_M = 64
MASKED_WIDE_TILES = ("--tile-m", "128", "--tile-n", "128", "--tile-k", "128", "--stages", "6")
SWIGLU_TILES = {
    ("sm_90a", "masked"): ("--tile-m", "64", "--tile-n", "128", "--tile-k", "128", "--stages", "8"),
    ("sm_90a", "contiguous"): ("--tile-n", "128", "--tile-k", "128", "--stages", "6"),
    ("sm_100a", "masked"): ("--tile-n", "256", "--tile-k", "128", "--stages", "4"),
    ("sm_100a", "contiguous"): ("--tile-n", "256", "--tile-k", "128", "--stages", "4"),
}


def _bytes_u8(x):
    """x's bytes as a uint8 array of the same shape (a view)."""
    if is_torch(x):
        import torch

        return x.view(torch.uint8) if x.dtype != torch.uint8 else x
    import numpy as np

    return x.view(np.uint8)


def mx_images(f, rows, kb):
    """Plain UE8M0 factors f [rows, K/32] (uint8) as the scale-factor
    images of docs/ABI.md "MXFP8", [cdiv(rows,128), kb, 512]: the factor of
    row r, K element k at byte 16·(r%32) + 4·((r%128)/32) + (k%128)/32 of
    image (r/128, k/128). Rows past `rows` are zero (never used)."""
    rb = -(-rows // 128)
    if is_torch(f):
        import torch

        p = torch.zeros((rb * 128, kb * 4), dtype=torch.uint8, device=f.device)
        p[:rows] = f
        return p.reshape(rb, 4, 32, kb, 4).permute(0, 3, 2, 1, 4).reshape(rb, kb, 512) \
            .contiguous()
    import numpy as np

    p = np.zeros((rb * 128, kb * 4), np.uint8)
    p[:rows] = f
    return np.ascontiguousarray(p.reshape(rb, 4, 32, kb, 4).transpose(0, 3, 2, 1, 4)).reshape(
        rb, kb, 512)


def _transposed(x):
    """A [rows, cols] array stored as [cols, rows] row-major (a copy
    unless it is already)."""
    if is_torch(x):
        return x.t().contiguous().t()
    import numpy as np

    return np.ascontiguousarray(x.T).T


class Call:
    pass


class Gemm:
    """The operand rules of one call (who: the call's name for messages)."""

    def __init__(self, who):
        self.r = Rules(who)

    def operand(self, name, x, rows_name, like=None, ndim=2):
        r = self.r
        v = r.view(name, x, E4M3, ndim, "[%s, K]" % rows_name if ndim == 2 else
                   "[E, %s, K]" % rows_name, like=like)
        k = v.shape[-1]
        if v.strides[-1] != 1 and k > 1:
            r.fail(ValueError, name + ".stride()", list(v.strides), "K must be contiguous "
                   "(stride 1)")
        if ndim == 3 and v.shape[0] > 1 and v.strides[0] != v.shape[1] * v.strides[1]:
            r.fail(ValueError, name + ".stride()", list(v.strides), "the experts' rows are one "
                   "tensor map: the expert stride must be rows x the row stride; pass "
                   ".contiguous()")
        if v.shape[-2] > 1 and v.strides[-2] % 16:
            r.fail(ValueError, name + ".stride()", list(v.strides), "the row stride is %d "
                   "bytes; the tensor map needs multiples of 16" % v.strides[-2])
        if v.ptr % 16:
            r.fail(ValueError, name + ".data_ptr()", hex(v.ptr), "must be 16-byte aligned")
        return v

    def fp4_operand(self, name, x, like):
        """FP4 weights [E, N, K/2] (docs/ABI.md "W4A8 weights"), checked as
        operand() checks E4M3 ones; the byte rules of the targets' tensor
        maps (16-byte rows and base; 32 for sm_100a) come with the target."""
        r = self.r
        v = r.view(name, x, FP4, 3, "[E, N, K/2]", like=like)
        if v.strides[-1] != 1 and v.shape[-1] > 1:
            r.fail(ValueError, name + ".stride()", list(v.strides), "K must be contiguous "
                   "(stride 1)")
        if v.shape[0] > 1 and v.strides[0] != v.shape[1] * v.strides[1]:
            r.fail(ValueError, name + ".stride()", list(v.strides), "the experts' rows are one "
                   "tensor map: the expert stride must be rows x the row stride; pass "
                   ".contiguous()")
        return v

    def fp4_align(self, v, t):
        """The tensor-map byte rules of FP4 weights on target t (row
        stride, and on the GPU the base address)."""
        unit = 32 if t == "sm_100a" else 16
        if v.shape[-2] > 1 and v.strides[-2] % unit:
            self.r.fail(ValueError, v.name + ".stride()", list(v.strides), "the row stride is %d "
                        "bytes; %s's tensor map of FP4 weights needs multiples of %d"
                        % (v.strides[-2], t, unit))
        # (the emulator takes a copy of CPU data, aligned as it needs)
        if v.device == "cuda" and v.ptr % unit:
            self.r.fail(ValueError, v.name + ".data_ptr()", hex(v.ptr), "must be %d-byte aligned "
                        "(%s's tensor map of FP4 weights)" % (unit, t))

    def k_rule(self, name, k):
        if k < KBLOCK or k % KBLOCK:
            self.r.fail(ValueError, name, k, "K is a positive multiple of 128 (one scale block "
                        "per pipeline stage)")

    def mode(self, sa, av):
        """('block128', 'sm_90a') for float32 sa, else ('mx32', 'sm_100a')."""
        sv = View("sa", sa)
        if sv.dtype == "f32":
            return "block128", "sm_90a"
        if sv.dtype in UE8M0:
            return "mx32", "sm_100a"
        self.r.fail(TypeError, "sa.dtype", sv.dtype, "float32 (DeepSeek's block scales, "
                    "sm_90a) or UE8M0 (MXFP8 factors, sm_100a: float8_e8m0fnu or uint8)")

    def device(self, av, tgt, target, sa):
        r = self.r
        rule = "the scales' dtype picks %s (float32 sa: sm_90a block128; UE8M0 sa: sm_100a " \
               "mx32)" % tgt
        if target is not None and target != tgt:
            r.fail(ValueError, "target", repr(target), rule)
        if av.device == "cpu":
            return r.target(av, tgt, (tgt,))
        dev, t = device_and_target(av, target, r.who)
        if t != tgt:
            r.fail(ValueError, "sa.dtype", View("sa", sa).dtype, "%s runs %s kernels and "
                   "%s; CPU tensors run %s on the emulator" % (av.where(), t, rule, tgt))
        return dev, t

    def block_sa(self, sa, av, rows, kb, name="sa"):
        """sa [rows, kb] float32 as the kernel's K-block-major SA (a
        [kb, rows] buffer): the array to pass."""
        v = self.r.view(name, sa, F32, 2, "[M, K/128] (one scale per 1 x 128 of a row of a)",
                        like=av)
        self.r.shape(v, (rows, kb), "[M, K/128]")
        if not ((rows < 2 or v.strides[0] == 1) and (kb < 2 or v.strides[1] == rows)):
            sa = _transposed(sa)
            v = View(name, sa)
        if v.ptr % 4:
            self.r.fail(ValueError, name + ".data_ptr()", hex(v.ptr), "must be 4-byte aligned")
        return sa.t() if is_torch(sa) else sa.T

    def block_sb(self, sb, av, nb, kb, experts=None):
        """sb [nb, kb] (or [E, nb, kb]) float32 or UE8M0: (array, 'f32'|'ue8m0')."""
        lay = "[N/128, K/128]" if experts is None else "[E, N/128, K/128]"
        want = (nb, kb) if experts is None else (experts, nb, kb)
        v = self.r.view("sb", sb, dict(F32, **UE8M0), len(want), lay, like=av)
        self.r.shape(v, want, lay)
        self.r.dense(v, 4 if v.dtype == "f32" else 1)
        return (sb, "f32") if v.dtype == "f32" else (_bytes_u8(sb), "ue8m0")

    def mx_sf(self, name, s, av, rows, kb, slabs=1):
        """MXFP8 factors of `rows` rows (per slab) as images [slabs·cdiv(rows,
        128), kb, 512]: plain [slabs·rows, K/32] ([E, rows, K/32] for slabs)
        are reordered, images pass as they are."""
        rb = -(-rows // 128)
        plain = (rows, kb * 4) if slabs == 1 else (slabs, rows, kb * 4)
        img = (slabs * rb, kb, 512)
        v = self.r.view(name, s, UE8M0, len(View(name, s).shape), "", like=av)
        if v.shape == img:
            self.r.dense(v, 16)
            return _bytes_u8(s)
        if v.shape != plain:
            self.r.fail(ValueError, name + ".shape", list(v.shape), "want %s (one UE8M0 per 32 "
                        "of K of every row) or the factor images %s" % (list(plain), list(img)))
        u = _bytes_u8(s)
        if slabs == 1:
            return mx_images(u, rows, kb)
        parts = [mx_images(u[e], rows, kb) for e in range(slabs)]
        if is_torch(u):
            import torch

            return torch.cat(parts)
        import numpy as np

        return np.concatenate(parts)

    def out_dtype(self, out_dtype, allowed=("bf16", "f32")):
        od = "bf16" if out_dtype is None else OUT.get(str(out_dtype).replace("torch.", ""))
        if od not in allowed:
            self.r.fail(ValueError, "out_dtype", repr(out_dtype), " or ".join(
                OUT_NAMES[a] for a in allowed))
        return od

    def out(self, out, av, shape, od):
        if out is None:
            return
        dt = {"bf16": {"bf16": "bfloat16"}, "f32": F32, "e4m3": E4M3}[od]
        if od == "bf16" and not av.torch:
            dt = {"bf16": "bfloat16", "u16": "uint16 (bf16 bit patterns)"}
        ov = self.r.view("out", out, dt, len(shape), str(list(shape)), like=av)
        self.r.shape(ov, shape, "the output")
        self.r.dense(ov, 16)


def tmap(dev, v, rows, k):
    """The tensor-map value of a K-major E4M3 operand View (rows x K)."""
    rs = v.strides[-2] if (dev.kind != "emu" and rows > 1) else k
    return Map(v.x, (k, rows), (1, rs))


def fp4_tmap(dev, v, rows, k, w4a8):
    """The tensor-map value of FP4 weights [.., rows, K/2] (a View): bytes
    for the sm_90a W4A8 kernel (u8, K/2 of them a row), values for sm_100a
    (e2m1p: K a row, docs/ABI.md "Tensor map encoding"); strides in bytes."""
    rs = v.strides[-2] if (dev.kind != "emu" and rows > 1) else k // 2
    return Map(v.x, (k // 2 if w4a8 else k, rows), (1, rs))


G = Gemm("kgen.fp8_gemm")


def plan(a, sa, b, sb, out_dtype=None, out=None, target=None):
    av = G.operand("a", a, "M")
    bv = G.operand("b", b, "N", like=av)
    (m, k), (n, kb_) = av.shape, bv.shape
    if kb_ != k:
        G.r.fail(ValueError, "b.shape", list(bv.shape), "b's K must be a's, %d" % k)
    G.k_rule("a.shape[1]", k)
    if m < 1 or n < 1:
        G.r.fail(ValueError, "a.shape" if m < 1 else "b.shape", [m, n], "M and N are at least 1")
    if m * k > INT32_MAX or n * k > INT32_MAX or m * n > INT32_MAX:
        G.r.fail(ValueError, "a.shape", [m, n, k], "past the kernel's 32-bit index range")
    scale, tgt = G.mode(sa, av)
    kb = k // KBLOCK
    c = Call()
    c.dev, t = G.device(av, tgt, target, sa)
    od = G.out_dtype(out_dtype)
    G.out(out, av, (m, n), od)
    args = ("--target", t, "--dtype", "e4m3", "--scale", scale, "--out-dtype", od)
    if scale == "block128":
        c.sa = G.block_sa(sa, av, m, kb)
        c.sb, sbt = G.block_sb(sb, av, -(-n // 128), kb)
        args += ("--scale-b", sbt)
    else:
        c.sa = G.mx_sf("sa", sa, av, m, kb)
        c.sb = G.mx_sf("sb", sb, av, n, kb)
    c.args = args + TILES[t]
    c.av, c.bv, c.m, c.n, c.k, c.od, c.out = av, bv, m, n, k, od, out
    return c


def run(c):
    out = c.out if c.out is not None else empty(c.av, (c.m, c.n), c.od)
    mod = _cache.module(c.dev, "gemm", c.args)
    launch(c.dev, mod, {"A": tmap(c.dev, c.av, c.m, c.k), "B": tmap(c.dev, c.bv, c.n, c.k),
                        "C": Out(out), "SA": In(c.sa), "SB": In(c.sb),
                        "M": c.m, "N": c.n, "K": c.k})
    return out
