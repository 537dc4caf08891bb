"""kgen.attention with flash-attn's conventions over the fmha family
(docs/ABI.md, "fmha (attention forward)"): every rule is checked here,
before anything is generated or launched, and a violation raises
ValueError/TypeError naming the argument, its value and the rule."""

import array
import math

from . import _cache, _native
from ._tensors import ESIZE, View, contiguous, empty, is_torch, torch_module

HEAD_DIMS = (64, 128, 256, 512)
MAX_HEADS = 256            # gen/fmha.c: heads-q, heads-kv
WINDOW_MAX = 1 << 20       # gen/fmha.c: window-left/right
ELEMS_MAX = (1 << 31) - 1  # row and element indices are 32-bit in the kernel
TARGETS = {90: "sm_90a", 100: "sm_100a"}


def _fail(exc, arg, value, rule):
    raise exc("kgen.attention: %s=%s: %s" % (arg, value, rule))


def device_and_target(v, target, who="kgen.attention"):
    """(libkrt device, target) for tensors on v's device."""
    if v.device == "cpu":
        t = target or "sm_100a"
        if t not in TARGETS.values():
            raise ValueError("%s: target=%r: the emulator runs sm_90a or sm_100a kernels" % (who, t))
        return _native.device("emu"), t
    if v.device != "cuda":
        raise ValueError("%s: %s is on device %s: kgen runs CUDA tensors on the GPU and CPU "
                         "tensors on the emulator" % (who, v.name, v.where()))
    dev = _native.device("cuda", v.index)
    t = TARGETS.get(dev.cc)
    if t is None:
        raise ValueError("%s: %s is on %s, compute capability %d.%d: kgen's kernels are sm_90a "
                         "(Hopper) and sm_100a (Blackwell)" % (who, v.name, v.where(), dev.cc // 10,
                                                              dev.cc % 10))
    if target and target != t:
        raise ValueError("%s: target=%r: tensors on %s run %s kernels; pass CPU tensors to run "
                         "%s on the emulator" % (who, target, v.where(), t, target))
    return dev, t


def _check_rows(v, ndim, layout):
    """(rows, heads, dim, row stride, head stride) of a [.., heads, dim]
    operand, strides in elements, after the layout rules."""
    if len(v.shape) != ndim:
        _fail(ValueError, v.name + ".shape", list(v.shape), "want " + layout)
    heads, dim = v.shape[-2], v.shape[-1]
    if 0 in v.shape:  # nothing is read: no layout to check
        rows = v.shape[0] * (v.shape[1] if ndim == 4 else 1)
        return rows, heads, dim, heads * dim, dim
    if v.strides[-1] != 1 and v.shape[-1] > 1:
        _fail(ValueError, v.name + ".stride()", list(v.strides),
              "the last dimension (head_dim) must be contiguous (stride 1)")
    hs = v.strides[-2] if heads > 1 else dim
    if ndim == 4:
        b, s = v.shape[0], v.shape[1]
        rs = v.strides[1] if s > 1 else v.strides[0] if b > 1 else heads * hs
        if b > 1 and s > 1 and v.strides[0] != s * v.strides[1]:
            _fail(ValueError, v.name + ".stride()", list(v.strides),
                  "the kernel addresses batch x seqlen as one row index, so the batch stride "
                  "must be seqlen x the seqlen stride (%d x %d); pass .contiguous()"
                  % (s, v.strides[1]))
        rows = b * s
    else:
        rows = v.shape[0]
        rs = v.strides[0] if rows > 1 else heads * hs
    es = ESIZE.get(v.dtype, 2)
    if v.ptr % 16:
        _fail(ValueError, v.name + ".data_ptr()", hex(v.ptr),
              "the tensor map needs a 16-byte aligned address")
    for what, st in (("head", hs), ("row", rs)):
        if (st * es) % 16 or st <= 0:
            _fail(ValueError, v.name + ".stride()", list(v.strides),
                  "the %s stride is %d bytes; the tensor map needs positive multiples of 16 bytes"
                  % (what, st * es))
    if rows * heads * dim > ELEMS_MAX or rows > ELEMS_MAX:
        _fail(ValueError, v.name + ".shape", list(v.shape),
              "%d elements: past the kernel's 32-bit index range (at most 2^31-1)"
              % (rows * heads * dim))
    return rows, heads, dim, rs, hs


def _window(causal, window):
    """(mask, left, right) for the generator from flash-attn's conventions:
    causal, and window=(left, right) with -1 for unlimited."""
    if window is None:
        window = (-1, -1)
    if (not isinstance(window, (tuple, list)) or len(window) != 2 or
            not all(isinstance(w, int) and not isinstance(w, bool) for w in window)):
        _fail(TypeError, "window", repr(window), "want (left, right), two ints, -1 for unlimited")
    left, right = window
    for name, w in (("left", left), ("right", right)):
        if w < -1 or w > WINDOW_MAX:
            _fail(ValueError, "window", repr(tuple(window)),
                  "%s is %d: each side is -1 (unlimited) or 0 .. %d" % (name, w, WINDOW_MAX))
    if causal:
        if right > 0:
            _fail(ValueError, "window", repr(tuple(window)),
                  "with causal=True the right side is 0 (causal sees no later key)")
        return ("causal", 0, 0) if left < 0 else ("window", left, 0)
    if left < 0 and right < 0:
        return "none", 0, 0
    return "window", WINDOW_MAX if left < 0 else left, WINDOW_MAX if right < 0 else right


def _cu_seqlens(name, x, qv, nrows):
    v = View(name, x)
    if v.dtype != "s32":
        _fail(TypeError, name + ".dtype", v.dtype, "cu_seqlens are int32")
    if len(v.shape) != 1 or v.shape[0] < 2:
        _fail(ValueError, name + ".shape", list(v.shape), "want [batch+1], batch >= 1")
    if v.device != qv.device or v.index != qv.index:
        _fail(ValueError, name + ".device", v.where(), "must be q's device, " + qv.where())
    if v.strides[0] != 1:
        _fail(ValueError, name + ".stride()", list(v.strides), "must be contiguous")
    if v.device == "cpu":
        # On the GPU the contents are trusted, as flash-attn does: reading
        # them would synchronize the stream.
        vals = [int(a) for a in (x.tolist())]
        if vals[0] != 0 or any(b < a for a, b in zip(vals, vals[1:])) or vals[-1] != nrows:
            _fail(ValueError, name, vals[:8] + (["..."] if len(vals) > 8 else []),
                  "must start at 0, never decrease and end at the total rows, %d" % nrows)
        return v, vals
    return v, None


class Call:
    """A checked call: the kernel's generator arguments and launch values."""


def plan(q, k, v, causal=False, window=None, softmax_scale=None, sink=None, cu_seqlens_q=None,
         cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False, out=None,
         target=None):
    if sink is not None:
        raise NotImplementedError("kgen.attention: sink=%r: attention sinks are not in kgen's "
                                  "fmha kernels yet; pass sink=None" % (type(sink).__name__,))
    c = Call()
    qv, kv, vv = View("q", q), View("k", k), View("v", v)
    if qv.dtype not in ("bf16", "fp16"):
        _fail(TypeError, "q.dtype", qv.dtype, "kgen.attention takes bfloat16 or float16")
    for o in (kv, vv):
        if o.dtype != qv.dtype:
            _fail(TypeError, o.name + ".dtype", o.dtype, "must be q's dtype, " + qv.dtype)
        if o.device != qv.device or o.index != qv.index:
            _fail(ValueError, o.name + ".device", o.where(), "must be q's device, " + qv.where())
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            _fail(ValueError, "cu_seqlens_q" if cu_seqlens_q is None else "cu_seqlens_k", None,
                  "varlen takes both cu_seqlens_q and cu_seqlens_k")
        layout, nd = "[total, heads, head_dim] (varlen)", 3
    else:
        layout, nd = "[batch, seqlen, heads, head_dim]", 4
    tq, hq, d, qrs, qhs = _check_rows(qv, nd, layout)
    tk, hkv, dk, krs, khs = _check_rows(kv, nd, layout)
    tv, hv, dv, vrs, vhs = _check_rows(vv, nd, layout)
    if not varlen:
        if kv.shape[0] != qv.shape[0]:
            _fail(ValueError, "k.shape", list(kv.shape), "batch must be q's, %d" % qv.shape[0])
        if vv.shape[:2] != kv.shape[:2]:
            _fail(ValueError, "v.shape", list(vv.shape), "batch and seqlen must be k's, %s"
                  % list(kv.shape[:2]))
    elif tv != tk:
        _fail(ValueError, "v.shape", list(vv.shape), "total must be k's, %d" % tk)
    if d not in HEAD_DIMS:
        _fail(ValueError, "q.shape[-1]", d, "head_dim is one of 64, 128, 256, 512")
    if dk != d:
        _fail(ValueError, "k.shape[-1]", dk, "K's head_dim must be q's, %d" % d)
    if dv not in HEAD_DIMS:
        _fail(ValueError, "v.shape[-1]", dv, "V's head_dim is one of 64, 128, 256, 512")
    if hv != hkv:
        _fail(ValueError, "v.shape[-2]", hv, "V's heads must be K's, %d" % hkv)
    if hq > MAX_HEADS or hkv > MAX_HEADS:
        _fail(ValueError, "q.shape[-2]" if hq > MAX_HEADS else "k.shape[-2]", max(hq, hkv),
              "at most %d heads" % MAX_HEADS)
    if hq % hkv:
        _fail(ValueError, "k.shape[-2]", hkv, "the query heads (%d) must be a multiple of the "
              "key/value heads (MHA, GQA, MQA)" % hq)
    shared = k is v or (kv.ptr == vv.ptr and kv.shape == vv.shape and kv.strides == vv.strides)
    if softmax_scale is None:
        scale = 1.0 / math.sqrt(d)
    else:
        try:
            scale = float(softmax_scale)
        except (TypeError, ValueError):
            _fail(TypeError, "softmax_scale", repr(softmax_scale), "a number")
        if not (scale > 0 and math.isfinite(scale)):
            _fail(ValueError, "softmax_scale", repr(softmax_scale), "a positive finite number")
    mask, wl, wr = _window(causal, window)
    if varlen:
        cq, cqvals = _cu_seqlens("cu_seqlens_q", cu_seqlens_q, qv, tq)
        ck, ckvals = _cu_seqlens("cu_seqlens_k", cu_seqlens_k, qv, tk)
        if ck.shape != cq.shape:
            _fail(ValueError, "cu_seqlens_k.shape", list(ck.shape), "must be cu_seqlens_q's, %s"
                  % list(cq.shape))
        batch = cq.shape[0] - 1
        if max_seqlen_q is None or isinstance(max_seqlen_q, bool) or not isinstance(max_seqlen_q, int) \
                or max_seqlen_q < 1 or max_seqlen_q > ELEMS_MAX:
            _fail(ValueError, "max_seqlen_q", repr(max_seqlen_q),
                  "varlen needs the longest query sequence, an int >= 1 (the grid covers it)")
        if cqvals is not None:
            longest = max(b - a for a, b in zip(cqvals, cqvals[1:]))
            if longest > max_seqlen_q:
                _fail(ValueError, "max_seqlen_q", max_seqlen_q,
                      "cu_seqlens_q holds a sequence of %d queries" % longest)
        maxq, maxk = max_seqlen_q, max_seqlen_k if max_seqlen_k is not None else tk
        c.cu = (cu_seqlens_q, cu_seqlens_k, cqvals, ckvals)
    else:
        batch, maxq, maxk = qv.shape[0], qv.shape[1], kv.shape[1]
        c.cu = None
    if mask == "window" and maxk > WINDOW_MAX and (wl == WINDOW_MAX or wr == WINDOW_MAX):
        _fail(ValueError, "window", repr(window), "an unlimited side is at most %d keys; the "
              "keys number %d" % (WINDOW_MAX, maxk))
    if batch > (1 << 20):
        _fail(ValueError, "batch", batch, "at most 2^20 sequences")
    if hq * tq > ELEMS_MAX:
        _fail(ValueError, "q.shape", list(qv.shape), "LSE holds heads x rows = %d entries, past "
              "the kernel's 32-bit index range" % (hq * tq))
    oshape = (tq, hq, dv) if varlen else (qv.shape[0], qv.shape[1], hq, dv)
    if out is not None:
        ov = View("out", out)
        if ov.dtype != qv.dtype:
            _fail(TypeError, "out.dtype", ov.dtype, "must be q's dtype, " + qv.dtype)
        if ov.shape != oshape:
            _fail(ValueError, "out.shape", list(ov.shape), "want %s" % list(oshape))
        if ov.device != qv.device or ov.index != qv.index:
            _fail(ValueError, "out.device", ov.where(), "must be q's device, " + qv.where())
        dense = []
        acc = 1
        for n in reversed(oshape):
            dense.append(acc)
            acc *= n
        if tq * hq * dv and ov.strides != tuple(reversed(dense)):
            _fail(ValueError, "out.stride()", list(ov.strides), "out must be contiguous")
        if ov.ptr % 16:
            _fail(ValueError, "out.data_ptr()", hex(ov.ptr), "must be 16-byte aligned")
    if tq * hq * dv > ELEMS_MAX:
        _fail(ValueError, "out", list(oshape), "past the kernel's 32-bit index range")
    dev, tgt = device_and_target(qv, target)
    c.q, c.k, c.v, c.out, c.qv, c.kv, c.vv = q, k, v, out, qv, kv, vv
    c.dev, c.target, c.varlen, c.shared = dev, tgt, varlen, shared
    c.batch, c.maxq, c.tq, c.tk, c.hq, c.hkv, c.d, c.dv = batch, maxq, tq, tk, hq, hkv, d, dv
    c.scale, c.lse = scale, bool(return_lse)
    c.strides = ((qrs, qhs), (krs, khs), (vrs, vhs))
    c.oshape = oshape
    c.base = ("--target", tgt, "--head-dim", str(d), "--head-dim-v", str(dv), "--heads-q",
              str(hq), "--heads-kv", str(hkv), "--kv-shared", "1" if shared else "0", "--mask",
              mask, "--window-left", str(wl if mask == "window" else 128), "--window-right",
              str(wr if mask == "window" else 0), "--lse", "1" if c.lse else "0", "--dtype",
              qv.dtype)
    return c


_packing = {}


def _module(c):
    """The kernel for c: query heads packed into the Q tile when few query
    rows would leave it mostly empty (decode), else one head per tile."""
    group = c.hq // c.hkv
    key = (c.dev.kind, c.dev.ordinal, c.base, min(c.maxq, 128))
    got = _packing.get(key)
    if got is not None:
        return _cache.module(c.dev, "fmha", got)
    cands = []
    if group > 1 and c.maxq < 64:
        p = 1
        while p * c.maxq < 128 and p < 128 and group % (p * 2) == 0:
            p *= 2
        while p > 1:
            cands.append(p)
            p //= 2
    cands.append(1)
    for p in cands:
        args = c.base + ("--pack-heads", str(p))
        try:
            m = _cache.module(c.dev, "fmha", args)
        except ValueError:
            if p == 1:
                raise
            continue
        _packing[key] = args
        return m


_cu_cache = {}


def _dense_cu(c, n, s):
    """cu_seqlens of a fixed-length batch on c's CUDA device."""
    key = (c.dev.ordinal, n, s)
    t = _cu_cache.get(key)
    if t is None:
        torch = torch_module()
        t = torch.arange(0, (n + 1) * s, s, dtype=torch.int32, device=c.q.device)
        if not torch.cuda.is_current_stream_capturing():
            _cu_cache[key] = t
    return t


def run(c):
    """Launches the checked call; returns (out, lse or None)."""
    out = c.out if c.out is not None else empty(c.qv, c.oshape, c.qv.dtype)
    lse = None
    if c.lse:
        lse = empty(c.qv, (c.hq, c.tq), "f32")
    if c.tq and not c.tk:
        _fill(out, 0.0)
        if lse is not None:
            _fill(lse, float("-inf"))
    elif c.tq:
        if c.dev.kind == "emu":
            _run_emu(c, out, lse)
        else:
            _run_cuda(c, out, lse)
    if lse is not None and not c.varlen:
        b, s = c.qv.shape[0], c.qv.shape[1]
        lse = lse.view(c.hq, b, s).permute(1, 0, 2) if is_torch(lse) else \
            lse.reshape(c.hq, b, s).transpose(1, 0, 2)
    return out, lse


def _fill(x, value):
    if is_torch(x):
        x.fill_(value)
    else:
        x[...] = value


def _values(c, m, ptrs, strides):
    es = ESIZE[c.qv.dtype]
    (qrs, qhs), (krs, khs), (vrs, vhs) = strides
    vals = {
        "Q": (ptrs["Q"], (c.d, c.hq, c.tq), (es, qhs * es, qrs * es)),
        "K": (ptrs["K"], (c.d, c.hkv, c.tk), (es, khs * es, krs * es)),
        "V": (ptrs["V"], (c.dv, c.hkv, c.tk), (es, vhs * es, vrs * es)),
        "O": ptrs["O"], "LSE": ptrs.get("LSE", 0), "cu_seqlens_q": ptrs["cq"],
        "cu_seqlens_k": ptrs["ck"], "max_seqlen_q": c.maxq, "batch": c.batch,
        "softmax_scale": c.scale,
    }
    return m.pack([vals[n] for n in m.names])


def _run_cuda(c, out, lse):
    torch = torch_module()
    m = _module(c)
    if c.varlen:
        cq, ck = c.cu[0].data_ptr(), c.cu[1].data_ptr()
    else:
        cq = _dense_cu(c, c.batch, c.qv.shape[1]).data_ptr()
        ck = _dense_cu(c, c.batch, c.kv.shape[1]).data_ptr()
    ptrs = {"Q": c.qv.ptr, "K": c.kv.ptr, "V": c.vv.ptr, "O": out.data_ptr(), "cq": cq, "ck": ck}
    if lse is not None:
        ptrs["LSE"] = lse.data_ptr()
    stream = torch._C._cuda_getCurrentRawStream(c.dev.ordinal)
    m.launch(_values(c, m, ptrs, c.strides), stream)
    if not c.varlen and c.out is None and not torch.cuda.is_current_stream_capturing():
        c.fast = Fast(c, m, ptrs)


class Fast:
    """A repeat of a checked batched CUDA call: the same shapes, strides,
    dtypes, devices and options, so only the addresses change. Everything
    else (the rules, the kernel, the packed arguments) comes from the first
    call; the addresses are re-checked for alignment and K=V sharing."""

    def __init__(self, c, m, ptrs):
        torch = torch_module()
        self.m, self.stream_dev = m, c.dev.ordinal
        self.oshape, self.shared = c.oshape, c.shared
        self.dtype, self.device = c.q.dtype, c.q.device
        self.lse = (c.hq, c.tq) if c.lse else None
        self.lse_view = (c.hq, c.qv.shape[0], c.qv.shape[1])
        self.f32 = torch.float32
        self.cu = (ptrs["cq"], ptrs["ck"])
        # the flat struct values; an address is the value after its kind
        self.flat = list(m.struct.unpack(_values(c, m, ptrs, c.strides)))
        self.slots, at = {}, 0
        for is_tmap, name in zip(m._tmap, m.names):
            self.slots[name] = at + 1
            at += 2 + (2 * _native.MAX_RANK + 1 if is_tmap else 0)
        self.pack = m.struct.pack
        self.launch = m.launch
        self.empty = torch.empty
        self.stream = torch._C._cuda_getCurrentRawStream

    def __call__(self, q, k, v):
        qp, kp, vp = q.data_ptr(), k.data_ptr(), v.data_ptr()
        if (qp | kp | vp) & 15 or (kp == vp) != self.shared:
            return None
        out = self.empty(self.oshape, dtype=self.dtype, device=self.device)
        flat = self.flat[:]
        sl = self.slots
        flat[sl["Q"]], flat[sl["K"]], flat[sl["O"]] = qp, kp, out.data_ptr()
        if "V" in sl:
            flat[sl["V"]] = vp
        lse = None
        if self.lse is not None:
            lse = self.empty(self.lse, dtype=self.f32, device=self.device)
            flat[sl["LSE"]] = lse.data_ptr()
        self.launch(self.pack(*flat), self.stream(self.stream_dev))
        if lse is not None:
            lse = lse.view(self.lse_view).permute(1, 0, 2)
        return out, lse


def _run_emu(c, out, lse):
    """CPU arrays on the emulator: dense copies in, O and LSE back."""
    dev = c.dev
    m = _module(c)
    bufs = []
    try:
        def put(x, nbytes):
            p = dev.alloc(nbytes + 16)
            bufs.append(p)
            xc, addr = contiguous(x)
            dev.upload(p, addr, nbytes)
            return p, xc

        es = ESIZE[c.qv.dtype]
        qp, _ = put(c.q, c.tq * c.hq * c.d * es)
        kp, _ = put(c.k, c.tk * c.hkv * c.d * es)
        vp = kp if c.shared else put(c.v, c.tk * c.hkv * c.dv * es)[0]
        if c.varlen:
            cqv, ckv = c.cu[2], c.cu[3]
        else:
            s, sk = c.qv.shape[1], c.kv.shape[1]
            cqv = [i * s for i in range(c.batch + 1)]
            ckv = [i * sk for i in range(c.batch + 1)]
        ptrs = {"Q": qp, "K": kp, "V": vp}
        for name, vals in (("cq", cqv), ("ck", ckv)):
            a = array.array("i", vals)
            p = dev.alloc(len(a) * 4)
            bufs.append(p)
            dev.upload(p, a.buffer_info()[0], len(a) * 4)
            ptrs[name] = p
        onb = c.tq * c.hq * c.dv * es
        ptrs["O"] = dev.alloc(onb + 16)
        bufs.append(ptrs["O"])
        if lse is not None:
            ptrs["LSE"] = dev.alloc(c.tq * c.hq * 4 + 16)
            bufs.append(ptrs["LSE"])
        dense = ((c.hq * c.d, c.d), (c.hkv * c.d, c.d), (c.hkv * c.dv, c.dv))
        m.launch(_values(c, m, ptrs, dense), None)
        from ._tensors import address
        dev.download(address(out), ptrs["O"], onb)
        if lse is not None:
            dev.download(address(lse), ptrs["LSE"], c.tq * c.hq * 4)
    finally:
        for p in bufs:
            dev.free(p)


def attention(q, k, v, **kw):
    c = plan(q, k, v, **kw)
    out, lse = run(c)
    return (out, lse) if c.lse else out
