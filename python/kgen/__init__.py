"""kgen: tensor-core kernels generated in-process (no compiler at run time),
called with flash-attn's conventions on PyTorch tensors or NumPy arrays.

CUDA tensors run on their GPU (sm_90a or sm_100a kernels, chosen by the
device); CPU tensors and NumPy arrays run on kgen's emulator (sm_100a by
default, target="sm_90a" for the Hopper kernels). See README.md."""

from . import _attention, _cache, _decode, _fp8gemm, _gemm, _indexer, _merge, _moe, _topk
from ._fp8v4 import dequantize_kv_cache, quantize_kv_cache
from ._cache import cache_dir, stats as cache_stats
from ._native import KrtError, gpu_present
from ._tensors import is_torch, torch_module

if torch_module() is not None:
    from . import _ops

    _ops.register()
    _is_compiling = torch_module().compiler.is_compiling

__version__ = _cache.VERSION
__all__ = ["attention", "gemm", "sparse_decode", "quantize_kv_cache", "dequantize_kv_cache",
           "topk", "merge_attn_states", "fp8_gemm", "moe_gemm", "indexer", "cache_dir", "cache_stats", "KrtError", "gpu_present"]


def _compiling():
    return torch_module().compiler.is_compiling()


def attention(q, k, v, *, causal=False, window=None, softmax_scale=None, sink=None,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
              return_lse=False, out=None, target=None):
    """softmax(softmax_scale·q·kᵀ + mask)·v, as flash_attn_func /
    flash_attn_varlen_func.

    q: [batch, seqlen_q, heads_q, head_dim], k: [batch, seqlen_k, heads_kv,
    head_dim], v: [batch, seqlen_k, heads_kv, head_dim_v]; or varlen
    [total, heads, dim] with cu_seqlens_q/k (int32 [batch+1]) and
    max_seqlen_q. heads_q a multiple of heads_kv (MHA, GQA, MQA); k is v (or
    the same storage) shares one tensor for K and V. causal is aligned
    bottom-right; window=(left, right), -1 unlimited. softmax_scale defaults
    to 1/sqrt(head_dim). Returns out [.., heads_q, head_dim_v] or
    (out, lse) with lse float32 [batch, heads_q, seqlen_q] ([heads_q, total]
    varlen), the natural-log logsumexp of the scaled scores."""
    if (out is None and cu_seqlens_q is None and cu_seqlens_k is None and sink is None and
            is_torch(q) and q.is_cuda):
        if _is_compiling():
            return _traced_attention(q, k, v, None, dict(
                causal=causal, window=window, softmax_scale=softmax_scale, sink=None,
                cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=max_seqlen_q,
                max_seqlen_k=max_seqlen_k, return_lse=return_lse, target=target))
        # a repeat of an earlier call: only the addresses are new
        key = (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype,
               v.dtype, q.get_device(), k.get_device(), v.get_device(), k is v, causal,
               tuple(window) if isinstance(window, list) else window, softmax_scale,
               return_lse, target)
        try:
            f = _fast.get(key)
        except TypeError:  # an unhashable option: the checks below name it
            f = key = None
        if f is not None:
            r = f(q, k, v)
            if r is not None:
                return r if return_lse else r[0]
    else:
        key = None
    kw = dict(causal=causal, window=window, softmax_scale=softmax_scale, sink=sink,
              cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
              max_seqlen_k=max_seqlen_k, return_lse=return_lse, target=target)
    if is_torch(q) and _compiling():
        return _traced_attention(q, k, v, out, kw)
    c = _attention.plan(q, k, v, out=out, **kw)
    o, lse = _attention.run(c)
    if key is not None and getattr(c, "fast", None) is not None:
        try:
            _fast[key] = c.fast
        except TypeError:  # an unhashable option: no memo
            pass
    return (o, lse) if c.lse else o


_fast = {}


def _traced_attention(q, k, v, out, kw):
    from ._ops import ops

    if kw["sink"] is not None:
        raise NotImplementedError("kgen.attention: sink: attention sinks are not in kgen's "
                                  "fmha kernels yet; pass sink=None")
    w = kw["window"] or (-1, -1)
    o, lse = ops()["attention"](q, k, v, bool(kw["causal"]), int(w[0]), int(w[1]),
                                float(kw["softmax_scale"] or 0) or q.shape[-1] ** -0.5,
                                kw["cu_seqlens_q"], kw["cu_seqlens_k"], kw["max_seqlen_q"] or 0,
                                kw["max_seqlen_k"] or 0, bool(kw["return_lse"]),
                                kw["target"] or "")
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if kw["return_lse"] else o


def gemm(a, b, *, out_dtype=None, out=None, target=None):
    """a[M,K] · b[N,K]ᵀ (F.linear(a, b), DeepGEMM's NT layout): bf16 or fp16
    in, float32 accumulation, out_dtype bfloat16 (default for bf16) or
    float32 (default for fp16); K a multiple of 8."""
    if is_torch(a) and _compiling():
        from ._ops import ops

        od = "" if out_dtype is None else str(out_dtype).replace("torch.", "")
        r = ops()["gemm"](a, b, od, target or "")
        if out is not None:
            out.copy_(r)
            r = out
        return r
    return _gemm.run(_gemm.plan(a, b, out_dtype=out_dtype, out=out, target=target))


def sparse_decode(q, k_cache, block_table=None, cache_seqlens=None, head_dim_v=512,
                  tile_scheduler_metadata=None, num_splits=None, softmax_scale=None,
                  causal=False, is_fp8_kvcache=None, indices=None, attn_sink=None,
                  extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                  extra_topk_length=None, *, out=None, target=None):
    """DeepSeek-V4 sparse decode attention over an fp8-v4 paged KV cache,
    with FlashMLA's flash_mla_with_kvcache arguments (same names, same
    positional order). Returns (out, lse).

    q: bfloat16 [batch, seq_len_q, num_heads_q (1..128), 512], contiguous.
    k_cache: the fp8-v4 cache as FlashMLA views it, [num_blocks,
    page_block_size, 1, 584] bytes (float8_e4m3fn, uint8 or int8) with
    strides (page bytes, 584, 584, 1); kgen.quantize_kv_cache makes one.
    indices: int32 [batch, seq_len_q, topk], index = page x page_block_size
    + offset; -1 (and anything outside [0, num_blocks x page_block_size))
    skips. topk_length: int32 [batch] (FlashMLA's) or [batch, seq_len_q]:
    only the first topk_length entries count (clamped to [0, topk]).
    extra_k_cache + extra_indices_in_kvcache (+ extra_topk_length): a second
    source (the SWA window, its own page size) attended in the same softmax.
    attn_sink: float32 [num_heads_q]: exp(attn_sink) joins the denominator.
    softmax_scale defaults to 1/sqrt(512). num_splits: split-KV parts (None:
    chosen from the grid and the GPU's SMs). tile_scheduler_metadata,
    block_table and cache_seqlens are accepted and ignored (kgen schedules
    in the kernel; FlashMLA's sparse path ignores the last two); causal
    must be False, is_fp8_kvcache None or True, head_dim_v 512.

    out: bfloat16 [batch, seq_len_q, num_heads_q, 512]. lse: float32
    [batch, num_heads_q, seq_len_q], natural log, contiguous. Unlike
    FlashMLA's, kgen's lse includes the sink (FlashMLA's =
    log(exp(lse) - exp(attn_sink))), and a row with nothing to attend gives
    out = 0 and lse = -inf (with a sink: lse = attn_sink; FlashMLA: +inf).
    CPU tensors (and NumPy arrays, q as ml_dtypes.bfloat16 or uint16 bit
    patterns) run on the emulator; docs/ABI.md "decode" has the kernel."""
    kw = dict(block_table=block_table, cache_seqlens=cache_seqlens, head_dim_v=head_dim_v,
              tile_scheduler_metadata=tile_scheduler_metadata, num_splits=num_splits,
              softmax_scale=softmax_scale, causal=causal, is_fp8_kvcache=is_fp8_kvcache,
              indices=indices, attn_sink=attn_sink, extra_k_cache=extra_k_cache,
              extra_indices_in_kvcache=extra_indices_in_kvcache, topk_length=topk_length,
              extra_topk_length=extra_topk_length, out=out, target=target)
    if is_torch(q) and _compiling():
        return _traced_sparse_decode(q, k_cache, kw)
    return _sparse_decode(q, k_cache, kw)


def _sparse_decode(q, k_cache, kw):
    """The eager call (also kgen::sparse_decode's): CUDA tensors through
    the memo of launchers, so a repeat of an earlier call's shapes,
    strides, dtypes, devices and options only packs the new addresses."""
    if not (is_torch(q) and q.is_cuda):
        return _decode.run(_decode.plan(q, k_cache, **kw))
    out = kw["out"]
    names = ("indices", "topk_length", "attn_sink", "extra_k_cache", "extra_indices_in_kvcache",
             "extra_topk_length")
    try:
        key = (_decode_sig(q), _decode_sig(k_cache)) + tuple(_decode_sig(kw[n]) for n in names) + \
            (out is None, kw["head_dim_v"], kw["num_splits"], kw["softmax_scale"], kw["causal"],
             kw["is_fp8_kvcache"], kw["target"])
        f = _fast_decode.get(key)
    except (AttributeError, TypeError):  # not tensors, or unhashable: the checks name it
        f = key = None
    if f is not None:
        r = f(q, k_cache, *[kw[n] for n in names])
        if r is not None:
            return r
    c = _decode.plan(q, k_cache, **kw)
    r = _decode.run(c)
    if key is not None and out is None:
        if len(_fast_decode) >= 4096:  # serving changes the batch every step
            _fast_decode.clear()
        _fast_decode[key] = c.launcher
    return r


_fast_decode = {}


def _decode_sig(t):
    """What the checks read of a tensor argument, addresses aside."""
    if t is None:
        return None
    return t.shape, t.stride(), t.dtype, t.device


def _traced_sparse_decode(q, k_cache, kw):
    from ._ops import ops

    # the rules that need no tensor contents are checked while tracing
    if kw["indices"] is None or kw["causal"] or kw["is_fp8_kvcache"] is False or \
            kw["head_dim_v"] != 512:
        _decode.plan(q, k_cache, **kw)
    scale = kw["softmax_scale"]
    o, lse = ops()["sparse_decode"](
        q, k_cache, kw["indices"], kw["topk_length"], kw["attn_sink"], kw["extra_k_cache"],
        kw["extra_indices_in_kvcache"], kw["extra_topk_length"],
        float(scale) if scale is not None else q.shape[-1] ** -0.5, int(kw["num_splits"] or 0),
        kw["target"] or "")
    if kw["out"] is not None:
        kw["out"].copy_(o)
        o = kw["out"]
    return o, lse


def _traced(name, *args):
    from ._ops import ops

    return ops()[name](*args)


def topk(logits, k, *, out=None, target=None):
    """The indices of the k largest values of each row of logits, as
    DeepSeek's indexer top-k (docs/ABI.md "topk"): logits float32 [rows, n],
    contiguous, rows 1 .. 65535, n >= 1; k 1 .. 2048. Returns int32
    [rows, k]: with n <= k, 0 .. n-1 in order then -1; otherwise the k
    indices of the largest logits in no particular order (any of equal
    values at the k-th place; -0 ranks below +0; NaN gives an unspecified
    list). The same kernel serves both targets."""
    if is_torch(logits) and _compiling():
        r = _traced("topk", logits, int(k), target or "")
        if out is not None:
            out.copy_(r)
            r = out
        return r
    return _topk.run(_topk.plan(logits, k, out=out, target=target))


def merge_attn_states(outs, lses, sink=None, *, maxes=None, out=None, target=None):
    """One softmax over the keys of several partial attention results of
    the same queries (docs/ABI.md "decode_merge"): e.g. kgen.sparse_decode
    over the compressed source and over the SWA window, merged.

    outs: float32 [parts, batch, s_q, heads, 512], or a sequence of parts
    [batch, s_q, heads, 512] (bfloat16 or float32, stacked as float32);
    lses: float32 [parts, batch, heads, s_q] (or a sequence of [batch,
    heads, s_q]), natural-log LSE of each part. heads 1 .. 128. maxes:
    the parts' row maxima when outs are unnormalized (decode
    --unnormalized 1); None for normalized outputs (maxes = lses). sink:
    float32 [heads]: exp(sink) joins the denominator once. Returns (out
    bfloat16 [batch, s_q, heads, 512], lse float32 [batch, heads, s_q]):
    lse = log(exp(sink) + sum_p exp(lse_p)); a part with lse_p = -inf
    weighs 0; no key anywhere gives out = 0, lse = -inf (or the sink).
    NumPy outputs are ml_dtypes.bfloat16 where installed, else uint16
    bit patterns."""
    first = outs[0] if isinstance(outs, (list, tuple)) and outs else outs
    if is_torch(first) and _compiling():
        torch = torch_module()

        def stack(xs):  # while tracing: the op's own checks name a bad part
            return torch.stack([x.float() for x in xs]) if isinstance(xs, (list, tuple)) else xs

        m = None if maxes is None else stack(maxes)
        r, lse = _traced("merge_attn_states", stack(outs), stack(lses), sink, m, target or "")
        if out is not None:
            out.copy_(r)
            r = out
        return r, lse
    return _merge.run(_merge.plan(outs, lses, sink=sink, maxes=maxes, out=out, target=target))


def fp8_gemm(a, sa, b, sb, *, out_dtype=None, out=None, target=None):
    """DeepGEMM's fp8_gemm_nt: out[M,N] = (a·sa)[M,K] · (b·sb)[N,K]ᵀ with
    a, b E4M3 (torch.float8_e4m3fn, or uint8 codes), K-major, K a multiple
    of 128; f32 accumulation; out_dtype bfloat16 (default) or float32.
    The scales' dtype picks the kernel (docs/ABI.md "gemm"):
    - float32 sa [M, K/128] (one per 1 x 128 of a row; DeepSeek's
      transposed layout, strides (1, M), is read in place, any other is
      copied to it) and sb [N/128, K/128] float32 or UE8M0 bytes (one per
      128 x 128 of b): the sm_90a block128 kernel;
    - UE8M0 sa [M, K/32] and sb [N, K/32] (torch.float8_e8m0fnu or uint8;
      or their 512-byte factor images [cdiv(rows,128), K/128, 512]): the
      sm_100a MXFP8 kernel.
    CPU tensors and NumPy arrays run on the emulator (bf16 NumPy output:
    ml_dtypes.bfloat16 where installed, else uint16 bit patterns)."""
    if is_torch(a) and _compiling():
        r = _traced("fp8_gemm", a, sa, b, sb, "" if out_dtype is None else
                    str(out_dtype).replace("torch.", ""), target or "")
        if out is not None:
            out.copy_(r)
            r = out
        return r
    return _fp8gemm.run(_fp8gemm.plan(a, sa, b, sb, out_dtype=out_dtype, out=out,
                                      target=target))


def moe_gemm(a, sa, b, sb, *, offsets=None, counts=None, swiglu=False, swiglu_limit=10.0,
             out_dtype=None, out=None, target=None):
    """The FP8 gemm of E experts in one launch (docs/ABI.md "MoE layouts"),
    DeepGEMM's grouped layouts, scales as fp8_gemm's with b's per expert:
    b [E, N, K]; sb [E, N/128, K/128] (float32 sa) or [E, N, K/32] UE8M0.
    - offsets int32 [E+1] (contiguous, prefill): a [M, K], sa as fp8_gemm's;
      expert e owns rows offsets[e] .. offsets[e+1]-1; out [M, N].
    - counts int32 [E] (masked, decode): a [E, M, K], sa [E, M, K/128]
      (or [E, M, K/32] UE8M0); expert e owns the first counts[e] rows of
      slab e; out [E, M, N].
    swiglu=True: b's rows per expert are the gate half then the up half
    (N a multiple of 256) and out[.., j] = silu(min(g, L)) · clamp(u, -L,
    L), L = swiglu_limit, j < N/2: bfloat16, or out_dtype=float8_e4m3fn,
    which returns (out, scales) quantized for the down projection's
    moe_gemm: block128 f32 scales [rows, N/256] (masked [E, M, N/256]; one
    per 1 x 128, amax/448) in the K-block-major storage that call reads in
    place; mx32 the UE8M0 factor images [slabs·cdiv(M,128), N/256, 512].
    Rows no expert owns are
    never written: a new output starts as zeros, out= keeps its contents.
    The table's contents are checked on the CPU; on the GPU they are trusted
    (the kernel clamps them into 0 .. M).
    FP4 weights (docs/ABI.md "W4A8 weights"): b [E, N, K/2] float4_e2m1fn_x2
    or uint8 (two E2M1 codes a byte, the even K in the low nibble) with sb
    [E, N, K/32] UE8M0; float32 sa runs the sm_90a W4A8 kernel (swiglu
    and its FP8 output included), UE8M0 sa the sm_100a E4M3 x E2M1 one."""
    if is_torch(a) and _compiling():
        od = "" if out_dtype is None else str(out_dtype).replace("torch.", "")
        r, scales = _traced("moe_gemm", a, sa, b, sb, offsets, counts, bool(swiglu),
                            float(swiglu_limit), od, target or "")
        if od in ("e4m3", "float8_e4m3fn"):
            if out is not None:
                out.copy_(r)
                r = out
            return r, scales
        if out is not None:
            out.copy_(r)
            r = out
        return r
    return _moe.run(_moe.plan(a, sa, b, sb, offsets=offsets, counts=counts, swiglu=swiglu,
                              swiglu_limit=swiglu_limit, out_dtype=out_dtype, out=out,
                              target=target))


def indexer(q_fp8, weights, k_cache, block_table, cache_seqlens, topk, *, max_len=None,
            score=None, return_logits=False, num_splits=None, k_global=None, target=None):
    """DeepSeek-V3.2/V4's lightning indexer (docs/ABI.md "indexer"): for
    each query row, the top-k keys of logits[j] = sum_h weights[h] ·
    max(0, scale_j · q[h]·k_j) over DeepGEMM's paged FP8 indexer cache,
    scoring and selection in one kernel.

    q_fp8: E4M3 [batch, s_q, heads (1..128), 128] (float8_e4m3fn or uint8
    codes), no scale of its own (fold it into weights, as DeepSeek does);
    weights float32 [batch, s_q, heads]; k_cache uint8 [num_blocks,
    page_size (16, 32, 64 or 128), 1, 132]: a page is page_size rows of
    128 E4M3 bytes, then page_size fp32 scales (DeepGEMM's; 68 bytes a
    key: DeepSeek-V4's FP4 keys, page_size rows of 64 bytes of E2M1 pairs
    then page_size words of 4 UE8M0; 72: NVFP4 keys, the same rows then
    page_size rows of 8 UE4M3, with k_global the float32 [1] per-tensor
    scale; docs/ABI.md "indexer"); block_table int32 [batch,
    max_pages] (trusted on the GPU); cache_seqlens int32 [batch], each
    sequence's length with its s_q query rows last (query row t sees keys
    0 .. L-s_q+t). topk 1 .. 2048, or 0 for the scoring alone (no
    select: returns the logits, as DeepGEMM's paged MQA logits do).

    Returns indices int32 [batch, s_q, topk] in kgen.sparse_decode's
    format (page·page_size + offset, with this block table): with n keys
    visible and n <= topk, keys 0 .. n-1 in order then -1; else the topk
    keys of the largest logits in no particular order. return_logits=True
    also returns the logits float32 [batch, s_q, max_len] (-inf past the
    visible keys); max_len defaults to max_pages·page_size. score: 'fma'
    (default), 'wgmma' (sm_90a) or 'tcgen05' (sm_100a) tensor-core scoring
    (at most 64 heads; FP8 and FP4 keys, not NVFP4). num_splits: CTAs per
    query row (None: from the grid and the GPU's SMs)."""
    if is_torch(q_fp8) and _compiling():
        idx, lg = _traced("indexer", q_fp8, weights, k_cache, block_table, cache_seqlens,
                          int(topk), int(max_len or 0), score or "", int(num_splits or 0),
                          k_global, target or "")
        return (idx, lg) if return_logits else idx if topk else lg
    return _indexer.run(_indexer.plan(q_fp8, weights, k_cache, block_table, cache_seqlens, topk,
                                      max_len=max_len, score=score, return_logits=return_logits,
                                      num_splits=num_splits, k_global=k_global, target=target))
