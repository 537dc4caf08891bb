"""The PyTorch operators kgen::attention, kgen::gemm, kgen::sparse_decode,
kgen::topk, kgen::merge_attn_states, kgen::fp8_gemm, kgen::moe_gemm and
kgen::indexer
(torch.library.custom_op) with fake implementations, so torch.compile
(fullgraph=True) traces calls and CUDA graphs capture them. Registered when
kgen is imported with torch installed (registration inside a traced
function would break the graph).

A new family adds its operator here beside these (its eager function
in its own module, a custom_op wrapping it, a fake that allocates the
outputs from the shapes alone)."""

from . import _attention, _decode, _fp8gemm, _gemm, _indexer, _merge, _moe, _topk

_ops = None


def ops():
    return _ops


def register():
    global _ops
    if _ops is None:
        _ops = _register()


def _register():
    import torch

    @torch.library.custom_op("kgen::attention", mutates_args=())
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  window_left: int, window_right: int, softmax_scale: float,
                  cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None,
                  max_seqlen_q: int, max_seqlen_k: int, return_lse: bool,
                  target: str) -> tuple[torch.Tensor, torch.Tensor]:
        # custom_op outputs may not alias inputs: K=V sharing is seen
        # through storage here, as in eager
        c = _attention.plan(q, k, v, causal=causal, window=(window_left, window_right),
                            softmax_scale=softmax_scale, cu_seqlens_q=cu_seqlens_q,
                            cu_seqlens_k=cu_seqlens_k,
                            max_seqlen_q=max_seqlen_q if max_seqlen_q > 0 else None,
                            max_seqlen_k=max_seqlen_k if max_seqlen_k > 0 else None,
                            return_lse=return_lse, target=target or None)
        out, lse = _attention.run(c)
        if lse is None:
            lse = q.new_empty((0,), dtype=torch.float32)
        else:
            lse = lse.contiguous()
        return out, lse

    @attention.register_fake
    def _(q, k, v, causal, window_left, window_right, softmax_scale, cu_seqlens_q,
          cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse, target):
        dv = v.shape[-1]
        out = q.new_empty(tuple(q.shape[:-1]) + (dv,))
        if not return_lse:
            return out, q.new_empty((0,), dtype=torch.float32)
        if cu_seqlens_q is not None:
            lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
        else:
            lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
        return out, lse

    @torch.library.custom_op("kgen::gemm", mutates_args=())
    def gemm(a: torch.Tensor, b: torch.Tensor, out_dtype: str, target: str) -> torch.Tensor:
        return _gemm.gemm(a, b, out_dtype=out_dtype or None, target=target or None)

    @gemm.register_fake
    def _(a, b, out_dtype, target):
        od = out_dtype or ("bf16" if a.dtype == torch.bfloat16 else "f32")
        dt = torch.bfloat16 if od in ("bf16", "bfloat16") else torch.float32
        return a.new_empty((a.shape[0], b.shape[0]), dtype=dt)

    @torch.library.custom_op("kgen::sparse_decode", mutates_args=())
    def sparse_decode(q: torch.Tensor, k_cache: torch.Tensor, indices: torch.Tensor,
                      topk_length: torch.Tensor | None, attn_sink: torch.Tensor | None,
                      extra_k_cache: torch.Tensor | None,
                      extra_indices_in_kvcache: torch.Tensor | None,
                      extra_topk_length: torch.Tensor | None, softmax_scale: float,
                      num_splits: int, target: str) -> tuple[torch.Tensor, torch.Tensor]:
        import kgen

        return kgen._sparse_decode(q, k_cache, dict(
            block_table=None, cache_seqlens=None, head_dim_v=_decode.D_V,
            tile_scheduler_metadata=None, num_splits=num_splits or None,
            softmax_scale=softmax_scale, causal=False, is_fp8_kvcache=None, indices=indices,
            attn_sink=attn_sink, extra_k_cache=extra_k_cache,
            extra_indices_in_kvcache=extra_indices_in_kvcache, topk_length=topk_length,
            extra_topk_length=extra_topk_length, out=None, target=target or None))

    @sparse_decode.register_fake
    def _(q, k_cache, indices, topk_length, attn_sink, extra_k_cache, extra_indices_in_kvcache,
          extra_topk_length, softmax_scale, num_splits, target):
        b, sq, hq = q.shape[0], q.shape[1], q.shape[2]
        return (q.new_empty((b, sq, hq, _decode.D_V)),
                q.new_empty((b, hq, sq), dtype=torch.float32))

    @torch.library.custom_op("kgen::topk", mutates_args=())
    def topk(logits: torch.Tensor, k: int, target: str) -> torch.Tensor:
        return _topk.run(_topk.plan(logits, k, target=target or None))

    @topk.register_fake
    def _(logits, k, target):
        return logits.new_empty((logits.shape[0], k), dtype=torch.int32)

    @torch.library.custom_op("kgen::merge_attn_states", mutates_args=())
    def merge_attn_states(outs: torch.Tensor, lses: torch.Tensor, sink: torch.Tensor | None,
                          maxes: torch.Tensor | None,
                          target: str) -> tuple[torch.Tensor, torch.Tensor]:
        return _merge.run(_merge.plan(outs, lses, sink=sink, maxes=maxes,
                                      target=target or None))

    @merge_attn_states.register_fake
    def _(outs, lses, sink, maxes, target):
        _, b, sq, h, d = outs.shape
        return (outs.new_empty((b, sq, h, d), dtype=torch.bfloat16),
                outs.new_empty((b, h, sq), dtype=torch.float32))

    def out_dt(out_dtype):
        return torch.float32 if out_dtype in ("f32", "float32") else torch.bfloat16


    @torch.library.custom_op("kgen::fp8_gemm", mutates_args=())
    def fp8_gemm(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                 out_dtype: str, target: str) -> torch.Tensor:
        return _fp8gemm.run(_fp8gemm.plan(a, sa, b, sb, out_dtype=out_dtype or None,
                                          target=target or None))

    @fp8_gemm.register_fake
    def _(a, sa, b, sb, out_dtype, target):
        return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dt(out_dtype))

    @torch.library.custom_op("kgen::moe_gemm", mutates_args=())
    def moe_gemm(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                 offsets: torch.Tensor | None, counts: torch.Tensor | None, swiglu: bool,
                 swiglu_limit: float, out_dtype: str,
                 target: str) -> tuple[torch.Tensor, torch.Tensor]:
        r = _moe.run(_moe.plan(a, sa, b, sb, offsets=offsets, counts=counts, swiglu=swiglu,
                               swiglu_limit=swiglu_limit, out_dtype=out_dtype or None,
                               target=target or None))
        # the FP8 SwiGLU output comes with its scales; others with none
        return r if isinstance(r, tuple) else (r, a.new_empty((0,), dtype=torch.float32))

    @moe_gemm.register_fake
    def _(a, sa, b, sb, offsets, counts, swiglu, swiglu_limit, out_dtype, target):
        n = b.shape[1] // 2 if swiglu else b.shape[1]
        lead = tuple(a.shape[:-1])
        if out_dtype not in ("e4m3", "float8_e4m3fn"):
            return a.new_empty(lead + (n,), dtype=out_dt(out_dtype)), \
                a.new_empty((0,), dtype=torch.float32)
        out = a.new_empty(lead + (n,), dtype=torch.float8_e4m3fn)
        nb = -(-n // 128)
        if sa.dtype == torch.float32:  # block128: the transposed view of [nb, rows]
            rows = a.shape[0] * (a.shape[1] if a.dim() == 3 else 1)
            cs = a.new_empty_strided((rows, nb), (1, rows), dtype=torch.float32)
            return out, cs.reshape(lead + (nb,)) if a.dim() == 3 else cs
        rb = -(-a.shape[-2] // 128) * (a.shape[0] if a.dim() == 3 else 1)
        return out, a.new_empty((rb, nb, 512), dtype=torch.uint8)

    @torch.library.custom_op("kgen::indexer", mutates_args=())
    def indexer(q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor,
                block_table: torch.Tensor, cache_seqlens: torch.Tensor, topk: int, max_len: int,
                score: str, num_splits: int, k_global: torch.Tensor | None,
                target: str) -> tuple[torch.Tensor, torch.Tensor]:
        return _indexer.run(_indexer.plan(q, weights, k_cache, block_table, cache_seqlens, topk,
                                          max_len=max_len or None, score=score or None,
                                          return_logits=True, num_splits=num_splits or None,
                                          k_global=k_global, target=target or None))

    @indexer.register_fake
    def _(q, weights, k_cache, block_table, cache_seqlens, topk, max_len, score, num_splits,
          k_global, target):
        b, sq = q.shape[0], q.shape[1]
        n = max_len or block_table.shape[1] * k_cache.shape[1]
        return (q.new_empty((b, sq, topk), dtype=torch.int32),
                q.new_empty((b, sq, n), dtype=torch.float32))

    return {"attention": attention, "gemm": gemm, "sparse_decode": sparse_decode,
            "topk": topk, "merge_attn_states": merge_attn_states, "fp8_gemm": fp8_gemm,
            "moe_gemm": moe_gemm, "indexer": indexer}
