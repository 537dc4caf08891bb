"""kgen.topk: the indices of the k largest of each row of fp32 logits,
over the topk family (docs/ABI.md "topk"). The same PTX runs on both
targets; CPU arrays run it on the emulator."""

from . import _cache
from ._check import GRID_YZ, INT32_MAX, Rules
from ._launch import In, Out, Scratch, launch
from ._tensors import empty

R = Rules("kgen.topk")
MAX_K = 2048    # gen/topk.c: topk
CHUNK = 16384   # docs/ABI.md "topk": the logits one CTA takes (//@shape chunk)


class Call:
    pass


def plan(logits, k, out=None, target=None):
    v = R.view("logits", logits, {"f32": "float32"}, 2, "[rows, n]")
    rows, n = v.shape
    R.int_arg("k", k, 1, MAX_K, "indices kept per row, an int 1 .. %d" % MAX_K)
    if not 1 <= rows <= GRID_YZ:
        R.fail(ValueError, "logits.shape[0]", rows, "rows are 1 .. %d (grid y)" % GRID_YZ)
    if n < 1:
        R.fail(ValueError, "logits.shape[1]", n, "a row has at least one logit")
    if rows * n > INT32_MAX:
        R.fail(ValueError, "logits.shape", [rows, n], "past the kernel's 32-bit index range")
    R.dense(v, 4)
    if out is not None:
        ov = R.view("out", out, {"s32": "int32"}, 2, "[rows, k]", like=v)
        R.shape(ov, (rows, k), "[rows, k]")
        R.dense(ov, 4)
    c = Call()
    c.v, c.rows, c.n, c.k, c.out = v, rows, n, k, out
    c.dev, t = R.target(v, target)
    c.args = ("--target", t, "--topk", str(k))
    return c


def run(c):
    out = c.out if c.out is not None else empty(c.v, (c.rows, c.k), "s32")
    mod = _cache.module(c.dev, "topk", c.args)
    parts = -(-c.n // CHUNK)
    launch(c.dev, mod, {
        "logits": In(c.v.x), "indices": Out(out),
        "work": Scratch(2 * c.rows * parts * c.k * 4, False),
        # zero before the launch; the kernel leaves them zero (a fresh
        # zeroed buffer per call keeps two streams or a graph apart)
        "counters": Scratch(c.rows * 4, True),
        "rows": c.rows, "n": c.n})
    return out
