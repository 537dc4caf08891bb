"""kgen.merge_attn_states: one softmax over the keys of several partial
attention results (docs/ABI.md "decode_merge"), e.g. the compressed
source and the SWA window of DeepSeek-V4 decoded apart."""

from . import _cache
from ._check import GRID_YZ, INT32_MAX, Rules
from ._launch import In, Out, launch
from ._tensors import View, empty, is_torch

R = Rules("kgen.merge_attn_states")
D_V = 512         # decode_merge: O rows are 512 values (docs/ABI.md)
MAX_HEADS = 128   # gen/decode_merge.c: heads-q


def _f32(x):
    """x as a float32 array of its device (bf16 NumPy as ml_dtypes'
    bfloat16 or uint16 bit patterns)."""
    if is_torch(x):
        import torch

        return x.float() if x.dtype != torch.float32 else x
    import numpy as np

    x = np.asarray(x)
    if x.dtype == np.uint16:
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32, copy=False)


def _stack(name, xs):
    """A sequence of per-part arrays, stacked along a new first dim."""
    if isinstance(xs, (list, tuple)):
        if not xs:
            R.fail(ValueError, name, "[]", "at least one part (or a stacked array of 0 parts)")
        vs = [View("%s[%d]" % (name, i), x) for i, x in enumerate(xs)]
        for v in vs[1:]:
            if v.shape != vs[0].shape or v.device != vs[0].device or v.index != vs[0].index:
                R.fail(ValueError, v.name + ".shape", list(v.shape), "every part must have "
                       "%s[0]'s shape and device, %s on %s" % (name, list(vs[0].shape),
                                                              vs[0].where()))
        if vs[0].torch:
            import torch

            return torch.stack([_f32(x) for x in xs])
        import numpy as np

        return np.stack([_f32(x) for x in xs])
    return xs


class Call:
    pass


def plan(outs, lses, sink=None, maxes=None, out=None, target=None):
    outs, lses = _stack("outs", outs), _stack("lses", lses)
    f32 = {"f32": "float32 (a sequence of parts may be bfloat16)"}
    ov = R.view("outs", outs, f32, 5, "[parts, batch, s_q, heads, 512] (or a sequence of "
                "[batch, s_q, heads, 512])")
    parts, b, sq, h, d = ov.shape
    if d != D_V:
        R.fail(ValueError, "outs.shape[-1]", d, "the merged rows are 512 values (the decode "
               "family's head_dim_v)")
    if not 1 <= h <= MAX_HEADS:
        R.fail(ValueError, "outs.shape[3]", h, "heads are 1 .. %d" % MAX_HEADS)
    for name, n in (("outs.shape[1]", b), ("outs.shape[2]", sq)):
        if not 1 <= n <= GRID_YZ:
            R.fail(ValueError, name, n, "batch and s_q are 1 .. %d (grid z and y)" % GRID_YZ)
    if parts * b * sq * h * D_V > INT32_MAX:
        R.fail(ValueError, "outs.shape", list(ov.shape), "past the kernel's 32-bit index range")
    R.dense(ov, 4)
    lv = R.view("lses", lses, f32, 4, "[parts, batch, heads, s_q]", like=ov)
    R.shape(lv, (parts, b, h, sq), "[parts, batch, heads, s_q]")
    R.dense(lv, 4)
    mv = lv
    if maxes is not None:
        mv = R.view("maxes", _stack("maxes", maxes), f32, 4, "[parts, batch, heads, s_q]",
                    like=ov)
        R.shape(mv, (parts, b, h, sq), "[parts, batch, heads, s_q]")
        R.dense(mv, 4)
    sv = None
    if sink is not None:
        sv = R.view("sink", sink, {"f32": "float32"}, 1, "[heads]", like=ov)
        R.shape(sv, (h,), "[heads]")
        R.dense(sv, 4)
    if out is not None:
        bf = {"bf16": "bfloat16"} if ov.torch else {"bf16": "bfloat16", "u16": "uint16"}
        xv = R.view("out", out, bf, 4, "[batch, s_q, heads, 512]", like=ov)
        R.shape(xv, (b, sq, h, D_V), "[batch, s_q, heads, 512]")
        R.dense(xv, 16)
    c = Call()
    c.ov, c.lv, c.mv, c.sv, c.out = ov, lv, mv, sv, out
    c.parts, c.b, c.sq, c.h = parts, b, sq, h
    c.dev, t = R.target(ov, target)
    c.args = ("--target", t, "--heads-q", str(h), "--sink", "0" if sv is None else "1")
    return c


def run(c):
    """(out bf16 [batch, s_q, heads, 512], lse f32 [batch, heads, s_q])."""
    out = c.out if c.out is not None else empty(c.ov, (c.b, c.sq, c.h, D_V), "bf16")
    lse = empty(c.ov, (c.b, c.h, c.sq), "f32")
    mod = _cache.module(c.dev, "decode_merge", c.args)
    vals = {"O_parts": In(c.ov.x), "LSE_parts": In(c.lv.x), "M_parts": In(c.mv.x),
            "O": Out(out), "LSE": Out(lse), "batch": c.b, "s_q": c.sq, "parts": c.parts}
    if c.sv is not None:
        vals["sink"] = In(c.sv.x)
    launch(c.dev, mod, vals)
    return out, lse
