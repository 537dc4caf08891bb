"""kgen.indexer: DeepSeek-V3.2/V4's lightning indexer over DeepGEMM's paged
FP8 indexer cache, key scoring fused with top-k (docs/ABI.md "indexer"),
returning the int32 indices kgen.sparse_decode reads."""

from . import _cache
from ._check import GRID_YZ, INT32_MAX, Rules, sms
from ._launch import In, Out, Scratch, launch
from ._tensors import View, empty

R = Rules("kgen.indexer")
D = 128                   # docs/ABI.md "indexer": Q and key rows are 128 values
# bytes of a key by cache format (docs/ABI.md "indexer"): fp8: 128 E4M3 and
# an fp32 scale; fp4: 64 bytes of E2M1 pairs and 4 UE8M0 (one per 32);
# nvfp4: the same 64 bytes and 8 UE4M3 (one per 16), with K_global
FORMATS = {132: "fp8", 68: "fp4", 72: "nvfp4"}
MAX_HEADS = 128           # gen/indexer.c: heads
MAX_TOPK = 2048           # gen/indexer.c: topk
PAGE_SIZES = (16, 32, 64, 128)  # gen/indexer.c: page-size
SCORES = ("fma", "wgmma", "tcgen05")
KEYS_PER_SPLIT = 256      # a split gets at least one key per thread (256 threads)
E4M3 = {"e4m3": "float8_e4m3fn", "u8": "uint8 (E4M3 codes)"}


class Call:
    pass


def plan(q, weights, k_cache, block_table, cache_seqlens, topk, max_len=None, score=None,
         return_logits=False, num_splits=None, k_global=None, target=None):
    qv = R.view("q", q, E4M3, 4, "[batch, s_q, heads, 128]")
    b, sq, h, d = qv.shape
    if d != D:
        R.fail(ValueError, "q.shape[-1]", d, "the indexer's head_dim is 128")
    if not 1 <= h <= MAX_HEADS:
        R.fail(ValueError, "q.shape[2]", h, "heads are 1 .. %d" % MAX_HEADS)
    if not 1 <= b <= GRID_YZ:
        R.fail(ValueError, "q.shape[0]", b, "batch is 1 .. %d (grid y)" % GRID_YZ)
    if sq < 1:
        R.fail(ValueError, "q.shape[1]", sq, "at least one query row")
    R.dense(qv, 16)
    wv = R.view("weights", weights, {"f32": "float32"}, 3, "[batch, s_q, heads]", like=qv)
    R.shape(wv, (b, sq, h), "[batch, s_q, heads]")
    R.dense(wv, 4)
    kv = R.view("k_cache", k_cache, {"u8": "uint8", "e4m3": "float8_e4m3fn", "s8": "int8"}, 4,
                "[num_blocks, page_size, 1, bytes per key] (132: DeepGEMM's paged FP8 indexer "
                "cache; 68: FP4 keys; 72: NVFP4 keys)", like=qv)
    pages, ps, one, row = kv.shape
    if one != 1 or row not in FORMATS:
        R.fail(ValueError, "k_cache.shape", list(kv.shape), "want [num_blocks, page_size, 1, "
               "132 | 68 | 72]: one key head, 132 bytes a key for FP8 (128 E4M3 + an fp32 "
               "scale), 68 for FP4 (64 + 4 UE8M0), 72 for NVFP4 (64 + 8 UE4M3)")
    fmt = FORMATS[row]
    gv = None
    if fmt == "nvfp4":
        if k_global is None:
            R.fail(ValueError, "k_global", None, "NVFP4 keys (72 bytes) take the cache's "
                   "per-tensor fp32 scale, a float32 [1] tensor")
        gv = R.view("k_global", k_global, {"f32": "float32"}, 1, "[1]", like=qv)
        R.shape(gv, (1,), "[1]")
        R.dense(gv, 4)
    elif k_global is not None:
        R.fail(ValueError, "k_global", "a tensor", "only NVFP4 keys (72 bytes a key) have a "
               "per-tensor scale; this cache is %s" % fmt)
    if ps not in PAGE_SIZES:
        R.fail(ValueError, "k_cache.shape[1]", ps, "the page size is one of 16, 32, 64, 128")
    if pages < 1:
        R.fail(ValueError, "k_cache.shape[0]", pages, "at least one page")
    R.dense(kv, 16)
    tv = R.view("block_table", block_table, {"s32": "int32"}, 2, "[batch, max_pages]", like=qv)
    if tv.shape[0] != b or tv.shape[1] < 1:
        R.fail(ValueError, "block_table.shape", list(tv.shape), "want [batch, max_pages] = "
               "[%d, max_pages >= 1]" % b)
    R.dense(tv, 4)
    max_pages = tv.shape[1]
    lv = R.view("cache_seqlens", cache_seqlens, {"s32": "int32"}, 1, "[batch]", like=qv)
    R.shape(lv, (b,), "[batch]")
    R.dense(lv, 4)
    R.int_arg("topk", topk, 0, MAX_TOPK, "indices kept per query row, an int 0 .. %d "
              "(0: the logits alone)" % MAX_TOPK)
    if max_len is None:
        max_len = max_pages * ps
    R.int_arg("max_len", max_len, 1, INT32_MAX, "the logits' row length (keys a row may "
              "see), an int >= 1")
    if b * sq * max_len > INT32_MAX:
        R.fail(ValueError, "max_len", max_len, "batch x s_q x max_len = %d logits: past the "
               "kernel's 32-bit index range" % (b * sq * max_len))
    if pages * ps > INT32_MAX:
        R.fail(ValueError, "k_cache.shape", list(kv.shape), "indices are int32")
    if score is None:
        score = "fma"
    if score not in SCORES:
        R.fail(ValueError, "score", repr(score), "'fma' (default), 'wgmma' (sm_90a) or "
               "'tcgen05' (sm_100a)")
    # FP4 keys (UE8M0 per 32): sm_100a's block-scaled kind::mxf8f6f4, or on
    # sm_90a turned into E4M3 for the FP8 wgmma; NVFP4's E2M1 x UE4M3 values
    # fit neither (docs/indexer.md)
    if score != "fma" and fmt == "nvfp4":
        R.fail(ValueError, "score", repr(score), "tensor-core scoring takes FP8 and FP4 keys; "
               "nvfp4 keys are scored with 'fma'")
    if num_splits is not None:
        R.int_arg("num_splits", num_splits, 1, GRID_YZ, "None (chosen from the grid and the "
                  "GPU) or CTAs per query row, an int 1 .. %d" % GRID_YZ)
    if kv.device == "cpu":
        if any(int(x) < 0 or int(x) >= pages for x in block_table.reshape(-1).tolist()):
            R.fail(ValueError, "block_table", "an entry outside 0 .. %d" % (pages - 1),
                   "pages of k_cache (the kernel trusts them; checked on the CPU)")
    c = Call()
    c.dev, t = R.target(qv, target)
    c.qv, c.wv, c.kv, c.tv, c.lv, c.gv = qv, wv, kv, tv, lv, gv
    c.b, c.sq, c.h, c.topk, c.max_len, c.max_pages = b, sq, h, topk, max_len, max_pages
    c.return_logits, c.num_splits = return_logits, num_splits
    c.args = ("--target", t, "--format", fmt, "--heads", str(h), "--topk", str(topk),
              "--page-size", str(ps), "--score", score)
    return c


def _splits(c, mod):
    if c.num_splits is not None:
        return c.num_splits
    if c.dev.kind == "emu":
        return 1
    # the most splits that keep the grid one wave, by the kernel's CTAs an
    # SM: at 64 rows on 132 SMs (two CTAs an SM) 4, where 5 (a partial
    # second wave) took 37 % longer (docs/ABI.md "indexer", "Useful splits")
    rows = c.b * c.sq
    want = max(mod.ctas_per_sm, 1) * sms(c.dev) // rows
    return max(1, min(want, -(-c.max_len // KEYS_PER_SPLIT), GRID_YZ))


def run(c):
    """indices int32 [batch, s_q, topk] (and logits f32 [batch, s_q,
    max_len] with return_logits); at topk 0 the logits alone (with
    return_logits: an empty index tensor and the logits)."""
    idx = empty(c.qv, (c.b, c.sq, c.topk), "s32")
    logits = empty(c.qv, (c.b, c.sq, c.max_len), "f32")
    mod = _cache.module(c.dev, "indexer", c.args)
    splits = _splits(c, mod)
    launch(c.dev, mod, {
        "Q": In(c.qv.x), "weights": In(c.wv.x), "K": In(c.kv.x), "block_table": In(c.tv.x),
        "seq_lens": In(c.lv.x), "logits": Out(logits), "indices": Out(idx),
        # zero before the launch; the kernel leaves them zero
        "counters": Scratch(c.b * c.sq * 4, True),
        # each part's top-k candidates and their positions (docs/indexer.md, "Fused top-k")
        "work": Scratch(2 * c.b * c.sq * splits * c.topk * 4, False),
        "batch": c.b, "s_q": c.sq, "max_len": c.max_len, "max_pages": c.max_pages,
        "splits": splits, "K_global": c.gv and In(c.gv.x)})
    return (idx, logits) if c.return_logits else idx if c.topk else logits
