"""kgen.gemm: C[M,N] = A[M,K]·B[N,K]^T (DeepGEMM's "NT", F.linear without
bias) over the gemm family (docs/ABI.md, the header format)."""

from . import _cache
from ._attention import ELEMS_MAX, device_and_target
from ._tensors import ESIZE, View, contiguous, empty, torch_module

_TORCH_NAMES = {"bf16": "bfloat16", "f32": "float32"}


def _fail(exc, arg, value, rule):
    raise exc("kgen.gemm: %s=%s: %s" % (arg, value, rule))


def plan(a, b, out_dtype=None, out=None, target=None):
    av, bv = View("a", a), View("b", b)
    if av.dtype not in ("bf16", "fp16"):
        _fail(TypeError, "a.dtype", av.dtype, "kgen.gemm takes bfloat16 or float16")
    if bv.dtype != av.dtype:
        _fail(TypeError, "b.dtype", bv.dtype, "must be a's dtype, " + av.dtype)
    if bv.device != av.device or bv.index != av.index:
        _fail(ValueError, "b.device", bv.where(), "must be a's device, " + av.where())
    for v in (av, bv):
        if len(v.shape) != 2:
            _fail(ValueError, v.name + ".shape", list(v.shape),
                  "want [M, K] for a and [N, K] for b")
    (m, k), (n, kb) = av.shape, bv.shape
    if kb != k:
        _fail(ValueError, "b.shape", list(bv.shape), "b's K must be a's, %d" % k)
    if k < 8 or k % 8:
        _fail(ValueError, "a.shape[1]", k, "K is a positive multiple of 8")
    for v in (av, bv):
        if v.shape[1] > 1 and v.strides[1] != 1:
            _fail(ValueError, v.name + ".stride()", list(v.strides), "K must be contiguous (stride 1)")
        if v.shape[0] > 1 and (v.strides[0] * 2) % 16:
            _fail(ValueError, v.name + ".stride()", list(v.strides),
                  "the row stride is %d bytes; the tensor map needs multiples of 16"
                  % (v.strides[0] * 2))
        if v.ptr % 16:
            _fail(ValueError, v.name + ".data_ptr()", hex(v.ptr), "must be 16-byte aligned")
    if m < 1 or n < 1:
        _fail(ValueError, "a.shape" if m < 1 else "b.shape", [m, n], "M and N are at least 1")
    if m * k > ELEMS_MAX or n * k > ELEMS_MAX or m * n > ELEMS_MAX:
        _fail(ValueError, "a.shape", [m, n, k], "past the kernel's 32-bit index range")
    od = out_dtype or ("bf16" if av.dtype == "bf16" else "f32")
    od = {"bfloat16": "bf16", "float32": "f32"}.get(str(od).replace("torch.", ""), od)
    if od not in ("bf16", "f32"):
        _fail(ValueError, "out_dtype", repr(out_dtype), "bfloat16 or float32")
    if out is not None:
        ov = View("out", out)
        if ov.dtype != od or ov.shape != (m, n) or ov.strides != (n, 1) or \
                ov.device != av.device or ov.index != av.index:
            _fail(ValueError, "out", "%s %s %s on %s" % (ov.dtype, list(ov.shape),
                                                        list(ov.strides), ov.where()),
                  "want a contiguous %s [%d, %d] on %s" % (od, m, n, av.where()))
    dev, tgt = device_and_target(av, target, "kgen.gemm")
    args = ("--target", tgt, "--dtype", av.dtype, "--out-dtype", od)
    return dict(a=a, b=b, av=av, bv=bv, m=m, n=n, k=k, od=od, out=out, dev=dev, args=args)


def run(p):
    m, n, k, dev = p["m"], p["n"], p["k"], p["dev"]
    out = p["out"] if p["out"] is not None else empty(p["av"], (m, n), p["od"])
    mod = _cache.module(dev, "gemm", p["args"])
    av, bv = p["av"], p["bv"]
    obytes = m * n * ESIZE[p["od"]]
    if dev.kind == "emu":
        bufs = []
        try:
            ptrs = []
            for x, rows in ((p["a"], m), (p["b"], n)):
                q = dev.alloc(rows * k * 2 + 16)
                bufs.append(q)
                _, addr = contiguous(x)
                dev.upload(q, addr, rows * k * 2)
                ptrs.append(q)
            cp = dev.alloc(obytes + 16)
            bufs.append(cp)
            vals = {"A": (ptrs[0], (k, m), (2, k * 2)), "B": (ptrs[1], (k, n), (2, k * 2)),
                    "C": cp, "M": m, "N": n, "K": k}
            mod.launch(mod.pack([vals[x] for x in mod.names]), None)
            from ._tensors import address
            dev.download(address(out), cp, obytes)
        finally:
            for q in bufs:
                dev.free(q)
    else:
        torch = torch_module()
        ars = av.strides[0] if m > 1 else k
        brs = bv.strides[0] if n > 1 else k
        vals = {"A": (av.ptr, (k, m), (2, ars * 2)), "B": (bv.ptr, (k, n), (2, brs * 2)),
                "C": out.data_ptr(), "M": m, "N": n, "K": k}
        mod.launch(mod.pack([vals[x] for x in mod.names]),
                   torch._C._cuda_getCurrentRawStream(dev.ordinal))
    return out


def gemm(a, b, **kw):
    return run(plan(a, b, **kw))
