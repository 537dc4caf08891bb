"""kgen.sparse_decode with FlashMLA's flash_mla_with_kvcache conventions
over the decode family (docs/ABI.md "decode"): every rule is checked
here, before anything is generated or launched, and a violation raises
ValueError/TypeError naming the argument, its value and the rule.

The configuration (heads, top-k and page size of each source, topk_length,
sink) comes from the tensors; split-KV parts are chosen from the grid and
the GPU's SM count (choose_splits) unless num_splits names them."""

import math

from . import _cache, _fp8v4, _native
from ._attention import TARGETS, device_and_target
from ._tensors import View, address, contiguous, empty, is_torch, torch_module

WHO = "kgen.sparse_decode"
MAX_HEADS = 128       # gen/decode.c: heads-q
MAX_TOPK = 4096       # gen/decode.c: topk, topk-extra
MAX_PAGE = 4096       # gen/decode.c: page-size, page-size-extra
MAX_GRID_YZ = 65535   # s_q and batch are grid y and z
MAX_SPLITS = 256
HEAD_BLOCK = 64       # heads per CTA (docs/ABI.md "decode": HB = cdiv(Hq, 64))
TILE_KEYS = 64        # keys per K=V tile, the unit the split-KV parts divide
D_V = 512
INT32_MAX = (1 << 31) - 1
# Targets in the order a CPU call prefers them; which of them the linked
# generator makes decode kernels for is asked of the generator (targets()).
PREFERENCE = ("sm_100a", "sm_90a")


def _fail(exc, arg, value, rule):
    raise exc("%s: %s=%s: %s" % (WHO, arg, value, rule))


_targets = None


def targets():
    """The targets this kgen generates decode kernels for, in PREFERENCE
    order: probed once per process by generating a small configuration, so
    a target gains decode here as soon as its generator does."""
    global _targets
    if _targets is None:
        got = []
        for t in PREFERENCE:
            try:
                _native.generate("decode", ["--target", t, "--heads-q", "8", "--topk", "64"])
            except ValueError:
                continue
            got.append(t)
        _targets = tuple(got)
    return _targets


def _device_and_target(qv, target):
    have = targets()
    if not have:
        raise NotImplementedError("%s: this kgen's generator makes no decode kernels" % WHO)
    only = "decode kernels are generated for %s in this kgen" % " and ".join(have)
    if qv.device == "cpu":
        if target is None:
            target = have[0]
        elif target in TARGETS.values() and target not in have:
            _fail(ValueError, "target", repr(target), only + "; CPU tensors run any of them on "
                  "the emulator (target=%r)" % have[0])
        return device_and_target(qv, target, WHO)
    dev, t = device_and_target(qv, target, WHO)
    if t not in have:
        _fail(ValueError, "q.device", "%s (%s)" % (qv.where(), t), only + "; CPU tensors run "
              "them on the emulator")
    return dev, t


def _dense(v):
    """Whether v's strides are row-major dense (size-1 dims ignored)."""
    acc = 1
    for n, s in zip(reversed(v.shape), reversed(v.strides)):
        if n > 1 and s != acc:
            return False
        acc *= n
    return True


def _same_device(v, qv):
    if v.device != qv.device or v.index != qv.index:
        _fail(ValueError, v.name + ".device", v.where(), "must be q's device, " + qv.where())


def _int_tensor(name, x, qv, shapes, rule):
    v = View(name, x)
    if v.dtype != "s32":
        _fail(TypeError, name + ".dtype", v.dtype, "must be int32")
    if v.shape not in shapes:
        _fail(ValueError, name + ".shape", list(v.shape), rule)
    _same_device(v, qv)
    if not _dense(v):
        _fail(ValueError, name + ".stride()", list(v.strides), "must be contiguous")
    return v


def _cache_view(name, x, qv):
    """(view, page_size, num_blocks) of an fp8-v4 k_cache after its rules."""
    v = View(name, x)
    if v.dtype not in ("u8", "s8", "e4m3"):
        _fail(TypeError, name + ".dtype", v.dtype, "the fp8-v4 cache is bytes: "
              "torch.float8_e4m3fn, uint8 or int8")
    if len(v.shape) != 4:
        _fail(ValueError, name + ".shape", list(v.shape), "want [num_blocks, page_block_size, "
              "1, 584] (FlashMLA's fp8 cache view; kgen.quantize_kv_cache makes one)")
    nb, ps, hk, tok = v.shape
    if hk != 1:
        _fail(ValueError, name + ".shape[2]", hk, "one KV head (MQA): num_heads_k is 1")
    if tok != _fp8v4.TOKEN:
        _fail(ValueError, name + ".shape[3]", tok, "an fp8-v4 token is 584 bytes (448 E4M3 "
              "+ 64 BF16 RoPE values + 7 UE8M0 scales + 1 pad)")
    if not 1 <= ps <= MAX_PAGE:
        _fail(ValueError, name + ".shape[1]", ps, "the page size is 1 .. %d tokens" % MAX_PAGE)
    if nb < 1:
        _fail(ValueError, name + ".shape[0]", nb, "at least one page")
    pb = _fp8v4.page_bytes(ps)
    st = v.strides
    if st[3] != 1 or (ps > 1 and st[1] != _fp8v4.TOKEN) or (nb > 1 and st[0] != pb):
        _fail(ValueError, name + ".stride()", list(st),
              "a page of %d tokens is %d bytes (rows, scale tail, rounded up to 576): want "
              "strides (%d, 584, 584, 1), the layout kgen.quantize_kv_cache and FlashMLA's "
              "quantizer make" % (ps, pb, pb))
    _same_device(v, qv)
    if v.ptr % 16:
        _fail(ValueError, name + ".data_ptr()", hex(v.ptr), "must be 16-byte aligned")
    if nb * ps > INT32_MAX:
        _fail(ValueError, name + ".shape", list(v.shape), "%d tokens: indices are int32, so "
              "num_blocks x page_block_size is at most 2^31-1" % (nb * ps))
    return v, ps, nb


class Call:
    """A checked call: the kernel's generator arguments and launch values."""


def plan(q, k_cache, block_table=None, cache_seqlens=None, head_dim_v=D_V,
         tile_scheduler_metadata=None, num_splits=None, softmax_scale=None, causal=False,
         is_fp8_kvcache=None, indices=None, attn_sink=None, extra_k_cache=None,
         extra_indices_in_kvcache=None, topk_length=None, extra_topk_length=None, out=None,
         target=None):
    # block_table, cache_seqlens, tile_scheduler_metadata: FlashMLA's sparse
    # path ignores the first two, and kgen schedules inside the kernel
    del block_table, cache_seqlens, tile_scheduler_metadata
    if indices is None:
        raise NotImplementedError(
            "%s: indices=None: this call reads sparse index lists (index = page x "
            "page_block_size + offset, -1 skips); dense paged decode over block_table + "
            "cache_seqlens is generated (kgen decode --addressing paged, docs/ABI.md \"decode\") "
            "but not taken by this call yet" % WHO)
    if causal:
        _fail(ValueError, "causal", repr(causal), "sparse decode has no causal mask (the "
              "indices choose the keys), as in FlashMLA")
    if is_fp8_kvcache is not None and not is_fp8_kvcache:
        _fail(ValueError, "is_fp8_kvcache", repr(is_fp8_kvcache), "this call reads the fp8-v4 "
              "cache; the bf16 cache is generated (kgen decode --format bf16) but not taken by "
              "this call yet")
    if isinstance(head_dim_v, bool) or head_dim_v != D_V:
        _fail(ValueError, "head_dim_v", repr(head_dim_v), "V is the first 512 dims of each "
              "key row: head_dim_v is 512")
    c = Call()
    qv = View("q", q)
    if qv.dtype != "bf16" and (qv.torch or qv.dtype != "u16"):
        _fail(TypeError, "q.dtype", qv.dtype, "the decode kernels take bfloat16 queries "
              "(NumPy: ml_dtypes.bfloat16, or uint16 holding bfloat16 bit patterns)")
    if len(qv.shape) != 4:
        _fail(ValueError, "q.shape", list(qv.shape), "want [batch, seq_len_q, num_heads_q, "
              "head_dim]")
    b, sq, hq, d = qv.shape
    if d != _fp8v4.D_QK:
        _fail(ValueError, "q.shape[-1]", d, "head_dim is 512 (448 NoPE + 64 RoPE, the fp8-v4 "
              "cache); 576 (fp8-v32) is generated (kgen decode --format fp8-v32) but not taken "
              "by this call yet")
    if not 1 <= hq <= MAX_HEADS:
        _fail(ValueError, "q.shape[2]", hq, "1 .. %d query heads share the one KV head"
              % MAX_HEADS)
    for name, n in (("q.shape[0]", b), ("q.shape[1]", sq)):
        if not 1 <= n <= MAX_GRID_YZ:
            _fail(ValueError, name, n, "batch and seq_len_q are 1 .. %d (grid z and y)"
                  % MAX_GRID_YZ)
    if b * sq * hq > INT32_MAX // 2:
        _fail(ValueError, "q.shape", list(qv.shape), "past the kernel's 32-bit row index")
    if not _dense(qv):
        _fail(ValueError, "q.stride()", list(qv.strides), "the kernel reads q as a dense "
              "[batch, seq_len_q, num_heads_q, 512] array: pass q.contiguous()")
    if qv.ptr % 16:
        _fail(ValueError, "q.data_ptr()", hex(qv.ptr), "must be 16-byte aligned")
    kv, ps, nb = _cache_view("k_cache", k_cache, qv)
    iv = View("indices", indices)
    if iv.dtype != "s32":
        _fail(TypeError, "indices.dtype", iv.dtype, "must be int32")
    if len(iv.shape) != 3 or iv.shape[:2] != (b, sq):
        _fail(ValueError, "indices.shape", list(iv.shape), "want [batch, seq_len_q, topk] = "
              "[%d, %d, topk]" % (b, sq))
    topk = iv.shape[2]
    if not 1 <= topk <= MAX_TOPK:
        _fail(ValueError, "indices.shape[2]", topk, "topk is 1 .. %d" % MAX_TOPK)
    _same_device(iv, qv)
    if not _dense(iv):
        _fail(ValueError, "indices.stride()", list(iv.strides), "must be contiguous")
    len_rule = "want [batch] (FlashMLA's, one length per sequence) or [batch, seq_len_q]"
    lens = [None, None]
    if topk_length is not None:
        lens[0] = _int_tensor("topk_length", topk_length, qv, ((b,), (b, sq)), len_rule)
    srcs = [(kv, ps, nb, iv, topk)]
    if extra_k_cache is not None or extra_indices_in_kvcache is not None:
        if extra_k_cache is None or extra_indices_in_kvcache is None:
            missing = "extra_k_cache" if extra_k_cache is None else "extra_indices_in_kvcache"
            _fail(ValueError, missing, None, "the extra source takes both extra_k_cache and "
                  "extra_indices_in_kvcache")
        xkv, xps, xnb = _cache_view("extra_k_cache", extra_k_cache, qv)
        xiv = View("extra_indices_in_kvcache", extra_indices_in_kvcache)
        if xiv.dtype != "s32":
            _fail(TypeError, "extra_indices_in_kvcache.dtype", xiv.dtype, "must be int32")
        if len(xiv.shape) != 3 or xiv.shape[:2] != (b, sq):
            _fail(ValueError, "extra_indices_in_kvcache.shape", list(xiv.shape),
                  "want [batch, seq_len_q, extra_topk] = [%d, %d, extra_topk]" % (b, sq))
        xtopk = xiv.shape[2]
        if not 1 <= xtopk <= MAX_TOPK:
            _fail(ValueError, "extra_indices_in_kvcache.shape[2]", xtopk, "extra_topk is 1 .. %d"
                  % MAX_TOPK)
        _same_device(xiv, qv)
        if not _dense(xiv):
            _fail(ValueError, "extra_indices_in_kvcache.stride()", list(xiv.strides),
                  "must be contiguous")
        srcs.append((xkv, xps, xnb, xiv, xtopk))
        if extra_topk_length is not None:
            lens[1] = _int_tensor("extra_topk_length", extra_topk_length, qv,
                                  ((b,), (b, sq)), len_rule)
    elif extra_topk_length is not None:
        _fail(ValueError, "extra_topk_length", "a tensor", "needs the extra source "
              "(extra_k_cache and extra_indices_in_kvcache)")
    sv = None
    if attn_sink is not None:
        sv = View("attn_sink", attn_sink)
        if sv.dtype != "f32":
            _fail(TypeError, "attn_sink.dtype", sv.dtype, "must be float32")
        if sv.shape != (hq,):
            _fail(ValueError, "attn_sink.shape", list(sv.shape), "want [num_heads_q] = [%d]" % hq)
        _same_device(sv, qv)
        if not _dense(sv):
            _fail(ValueError, "attn_sink.stride()", list(sv.strides), "must be contiguous")
    if softmax_scale is None:
        scale = d ** -0.5
    else:
        try:
            scale = float(softmax_scale)
        except (TypeError, ValueError):
            _fail(TypeError, "softmax_scale", repr(softmax_scale), "a number")
        if not (scale > 0 and math.isfinite(scale)):
            _fail(ValueError, "softmax_scale", repr(softmax_scale), "a positive finite number")
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int)
                                   or not 1 <= num_splits <= MAX_SPLITS):
        _fail(ValueError, "num_splits", repr(num_splits), "None (chosen from the grid and the "
              "GPU) or split-KV parts, an int 1 .. %d" % MAX_SPLITS)
    oshape = (b, sq, hq, D_V)
    if out is not None:
        ov = View("out", out)
        if ov.dtype != qv.dtype:
            _fail(TypeError, "out.dtype", ov.dtype, "must be q's dtype, " + qv.dtype)
        if ov.shape != oshape:
            _fail(ValueError, "out.shape", list(ov.shape), "want %s" % list(oshape))
        _same_device(ov, qv)
        if not _dense(ov):
            _fail(ValueError, "out.stride()", list(ov.strides), "out must be contiguous")
        if ov.ptr % 16:
            _fail(ValueError, "out.data_ptr()", hex(ov.ptr), "must be 16-byte aligned")
    dev, tgt = _device_and_target(qv, target)
    c.auto = target is None and qv.device == "cpu"
    has_len = any(v is not None for v in lens)
    c.q, c.out, c.qv, c.dev, c.target = q, out, qv, dev, tgt
    c.b, c.sq, c.hq, c.scale, c.num_splits = b, sq, hq, scale, num_splits
    c.srcs, c.lens, c.sink, c.has_len = srcs, lens, sv, has_len
    c.oshape = oshape
    c.args = ("--target", tgt, "--format", "fp8-v4", "--heads-q", str(hq), "--topk", str(topk),
              "--page-size", str(ps))
    if len(srcs) > 1:
        c.args += ("--topk-extra", str(srcs[1][4]), "--page-size-extra", str(srcs[1][1]))
    c.args += ("--topk-length", "1" if has_len else "0", "--sink", "0" if sv is None else "1")
    return c


def choose_splits(ctas, sms, keys):
    """Split-KV parts when a grid of `ctas` CTAs leaves most of `sms` SMs
    idle: enough parts to fill them, each with at least two of a row's
    64-key tiles (keys: the most a row attends, both sources); 1 when the
    grid fills the GPU."""
    if ctas >= sms:
        return 1
    tiles = -(-keys // TILE_KEYS)
    return max(1, min(sms // ctas, tiles // 2, MAX_SPLITS))


_sms = {}


def _splits(c):
    if c.num_splits is not None:
        return c.num_splits
    if c.dev.kind == "emu":
        return 1  # one CTA at a time: nothing to fill
    n = _sms.get(c.dev.ordinal)
    if n is None:
        n = _sms[c.dev.ordinal] = \
            torch_module().cuda.get_device_properties(c.dev.ordinal).multi_processor_count
    ctas = -(-c.hq // HEAD_BLOCK) * c.sq * c.b
    return choose_splits(ctas, n, sum(s[4] for s in c.srcs))


_chosen = {}


def _module(c):
    """The kernel of c. A CPU call that names no target takes the first
    target (targets()) whose generator accepts this configuration, so a
    target whose decode kernels cover only some configurations yet serves
    those and leaves the rest to the next."""
    if not c.auto:
        return _cache.module(c.dev, "decode", c.args)
    rest = c.args[2:]
    t = _chosen.get(rest)
    if t is not None:
        c.target, c.args = t, ("--target", t) + rest
        return _cache.module(c.dev, "decode", c.args)
    first = None
    for t in targets():
        args = ("--target", t) + rest
        try:
            m = _cache.module(c.dev, "decode", args)
        except ValueError as e:
            first = first or e
            continue
        _chosen[rest] = t
        c.target, c.args = t, args
        return m
    raise first


def run(c):
    """Launches the checked call; returns (out, lse)."""
    m = _module(c)
    splits = _splits(c)
    if c.dev.kind != "emu":
        c.launcher = Launcher(c, m, splits)
        lens = [None if v is None else v.x for v in c.lens]
        x = c.srcs[1] if len(c.srcs) > 1 else None
        return c.launcher(c.q, c.srcs[0][0].x, c.srcs[0][3].x, lens[0],
                          None if c.sink is None else c.sink.x, x and x[0].x, x and x[3].x,
                          lens[1], c.out)
    out = c.out if c.out is not None else empty(c.qv, c.oshape, c.qv.dtype)
    lse = empty(c.qv, (c.b, c.hq, c.sq), "f32")
    _run_emu(c, m, out, lse, splits)
    return out, lse


def _values(c, m, ptrs, splits):
    (kv, ps, nb, _, _) = c.srcs[0]
    vals = dict(ptrs, batch=c.b, s_q=c.sq, capacity=nb * ps, softmax_scale=c.scale, splits=splits)
    if len(c.srcs) > 1:
        x = c.srcs[1]
        vals["capacity_extra"] = x[2] * x[1]
    return m.pack([vals.get(n, 0) for n in m.names])


_full = {}
_counters = {}
_retired = []


class Launcher:
    """One checked configuration on CUDA tensors. Everything but the
    addresses comes from the plan (the kernel, the packed arguments, the
    split-KV parts), so a repeat call with the same shapes, strides,
    dtypes, devices and options (kgen.sparse_decode's memo) only checks the
    new addresses' alignment, makes the outputs and scratch and launches on
    torch.cuda.current_stream(). The first call runs through it too."""

    def __init__(self, c, m, splits):
        torch = torch_module()
        self.torch, self.m, self.ordinal, self.device = torch, m, c.dev.ordinal, c.q.device
        self.b, self.sq, self.hq, self.splits = c.b, c.sq, c.hq, splits
        self.oshape, self.lshape = c.oshape, (c.b, c.hq, c.sq)
        self.topks = [s[4] for s in c.srcs]
        self.has_len = c.has_len
        self.ncounters = c.b * c.sq * -(-c.hq // HEAD_BLOCK)
        self.flat = list(m.struct.unpack(_values(c, m, {}, splits)))
        # the flat struct values: an address is the value after its kind
        self.slot, at = {}, 0
        for is_tmap, name in zip(m._tmap, m.names):
            self.slot[name] = at + 1
            at += 2 + (2 * _native.MAX_RANK + 1 if is_tmap else 0)
        self.pack, self.launch = m.struct.pack, m.launch
        self.stream = torch._C._cuda_getCurrentRawStream

    def _lengths(self, t, i, keep):
        torch = self.torch
        if t is None:
            key = (self.ordinal, self.b, self.sq, self.topks[i])
            t = _full.get(key)
            if t is None:
                # a source without its own lengths when the other has them
                # (the kernel reads both or neither): the whole list
                t = torch.full((self.b, self.sq), self.topks[i], dtype=torch.int32,
                               device=self.device)
                if not torch.cuda.is_current_stream_capturing():
                    _full[key] = t
            keep.append(t)
        elif t.dim() == 1 and self.sq > 1:
            # FlashMLA's [batch]: one length for every query token
            t = t[:, None].expand(self.b, self.sq).contiguous()
            keep.append(t)
        return t.data_ptr()

    def _counters(self, stream, keep):
        """counters[batch, s_q, HB], zero between launches: the kernel sets
        each back to 0 (docs/ABI.md "decode"), so one buffer per stream
        serves every launch on it. Inside a CUDA-graph capture a fresh
        zeroed one is part of the graph."""
        torch = self.torch
        if torch.cuda.is_current_stream_capturing():
            t = torch.zeros(self.ncounters, dtype=torch.int32, device=self.device)
            keep.append(t)
            return t.data_ptr()
        key = (self.ordinal, stream)
        t = _counters.get(key)
        if t is None or t.numel() < self.ncounters:
            if t is not None:
                _retired.append(t)  # a captured graph may still name it
            t = _counters[key] = torch.zeros(max(self.ncounters, 4096), dtype=torch.int32,
                                              device=self.device)
        return t.data_ptr()

    def __call__(self, q, k_cache, indices, topk_length, attn_sink, extra_k_cache,
                 extra_indices, extra_topk_length, out=None):
        """(out, lse), or None when an address breaks the 16-byte rule (the
        caller then takes the checked path, which names it)."""
        torch = self.torch
        qp, kp = q.data_ptr(), k_cache.data_ptr()
        xp = extra_k_cache.data_ptr() if extra_k_cache is not None else 0
        if (qp | kp | xp) & 15:
            return None
        if out is None:
            out = torch.empty(self.oshape, dtype=q.dtype, device=self.device)
        elif out.data_ptr() & 15:
            return None
        lse = torch.empty(self.lshape, dtype=torch.float32, device=self.device)
        stream = self.stream(self.ordinal)
        flat, sl, keep = self.flat[:], self.slot, []
        flat[sl["Q"]], flat[sl["O"]], flat[sl["LSE"]] = qp, out.data_ptr(), lse.data_ptr()
        flat[sl["KV"]], flat[sl["indices"]] = kp, indices.data_ptr()
        if "KV_extra" in sl:
            flat[sl["KV_extra"]], flat[sl["indices_extra"]] = xp, extra_indices.data_ptr()
        if self.has_len:
            flat[sl["topk_length"]] = self._lengths(topk_length, 0, keep)
            if "topk_length_extra" in sl:
                flat[sl["topk_length_extra"]] = self._lengths(extra_topk_length, 1, keep)
        if "sink" in sl:
            flat[sl["sink"]] = attn_sink.data_ptr()
        if self.splits > 1:
            op = torch.empty((self.b, self.sq, self.splits, self.hq, D_V), dtype=torch.bfloat16,
                             device=self.device)
            lp = torch.empty((self.b, self.sq, self.splits, self.hq), dtype=torch.float32,
                             device=self.device)
            keep += [op, lp]
            flat[sl["O_partial"]], flat[sl["LSE_partial"]] = op.data_ptr(), lp.data_ptr()
            flat[sl["counters"]] = self._counters(stream, keep)
        self.launch(self.pack(*flat), stream)
        # the scratch in keep goes back to PyTorch's caching allocator once
        # the launch is queued: its stream-ordered reuse waits for it
        return out, lse


def _host_ints(v, b, sq, fill=None):
    """int32 [batch, s_q] NumPy copy of a length tensor (or of fill)."""
    import numpy as np

    if v is None:
        return np.full((b, sq), fill, np.int32)
    a = v.x.numpy() if v.torch else v.x
    a = np.asarray(a, np.int32)
    if a.ndim == 1:
        a = np.repeat(a[:, None], sq, axis=1)
    return np.ascontiguousarray(a)


def _run_emu(c, m, out, lse, splits):
    """CPU arrays on the emulator: dense copies in (the caches as their
    page buffers), O and LSE back. O, LSE and the parts' scratch start
    poisoned (NaN bytes), so a row the kernel leaves unwritten shows."""
    import numpy as np

    dev = c.dev
    bufs = []
    try:
        def put(x, nbytes=None):
            xc, addr = contiguous(x)
            n = nbytes if nbytes is not None else xc.nbytes if not is_torch(xc) else \
                xc.numel() * xc.element_size()
            p = dev.alloc(n + 16)
            bufs.append(p)
            dev.upload(p, addr, n)
            return p

        def poison(n, byte):
            a = np.full(n, byte, np.uint8)
            return put(a)

        ptrs = {"Q": put(c.q, c.b * c.sq * c.hq * _fp8v4.D_QK * 2)}
        sfx = ("", "_extra")
        for i, (kv, ps, nb, iv, topk) in enumerate(c.srcs):
            ptrs["KV" + sfx[i]] = put(_fp8v4.raw_pages(kv.x))
            ptrs["indices" + sfx[i]] = put(iv.x, c.b * c.sq * topk * 4)
            if c.has_len:
                ptrs["topk_length" + sfx[i]] = put(_host_ints(c.lens[i], c.b, c.sq, topk))
        if c.sink is not None:
            ptrs["sink"] = put(c.sink.x, c.hq * 4)
        no = c.b * c.sq * c.hq
        if splits > 1:
            ptrs["O_partial"] = poison(no * splits * D_V * 2, 0xFF)
            ptrs["LSE_partial"] = poison(no * splits * 4, 0xFF)
            ptrs["counters"] = poison(c.b * c.sq * -(-c.hq // HEAD_BLOCK) * 4, 0)
        ptrs["O"] = poison(no * D_V * 2, 0xFF)
        ptrs["LSE"] = poison(no * 4, 0xFF)
        m.launch(_values(c, m, ptrs, splits), None)
        dev.download(address(out), ptrs["O"], no * D_V * 2)
        dev.download(address(lse), ptrs["LSE"], no * 4)
    finally:
        for p in bufs:
            dev.free(p)


def sparse_decode(q, k_cache, *args, **kw):
    return run(plan(q, k_cache, *args, **kw))
