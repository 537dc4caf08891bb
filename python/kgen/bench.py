"""python -m kgen.bench: first-call and per-call costs of kgen.attention
beside F.scaled_dot_product_attention and a Triton kernel (GPU machine).

  cold first call   empty kgen disk cache and empty driver JIT cache, in a
                    new process: generate + JIT + load + launch + sync
  warm first call   a new process with the disk cache filled (the driver's
                    JIT cache too): read + load + launch + sync
  per-call host     a tiny shape, launches back to back, time per call on
                    the host (no sync inside the loop), kgen vs SDPA; and
                    kgen.sparse_decode's at a tiny shape
  throughput        kgen.attention's TF/s at B=4, S=8192, 16 heads, head_dim
                    128, causal (median of CUDA-event times per call), and
                    with --kbench PATH the C kbench's for the same kernel and
                    shape in the same run: the two should agree within 2 %
Each first call runs in a fresh interpreter (subprocess) so that nothing is
cached in memory. Prints one table; --json for machine use."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_FIRST = r"""
import os, sys, time, json
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
which, shape = sys.argv[1], json.loads(sys.argv[2])
b, s, h, d, causal = shape
q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
t0 = time.perf_counter()
if which == "kgen":
    import kgen
    kgen.attention(q, q, q.clone(), causal=bool(causal))
elif which == "triton":
    import triton, triton.language as tl
    @triton.jit
    def k(X, Y, N: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(Y + i, tl.load(X + i) * 2)
    x = torch.randn(1024, device="cuda"); y = torch.empty_like(x)
    k[(1,)](x, y, N=1024)
torch.cuda.synchronize()
r = {"s": time.perf_counter() - t0}
if which == "kgen":  # the generator's share: generate the same kernel again
    from kgen import _attention, _native
    args = next(iter(_attention._packing.values()))
    t1 = time.perf_counter()
    _native.generate("fmha", list(args))
    r["gen_s"] = time.perf_counter() - t1
print(json.dumps(r))
"""


def _first(which, shape, env):
    # a file, not -c: Triton reads the kernel's source
    script = os.path.join(env["KGEN_CACHE_DIR"] + "-first.py")
    with open(script, "w") as f:
        f.write(_FIRST)
    r = subprocess.run([sys.executable, script, which, json.dumps(shape)], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        return None, r.stderr.strip().splitlines()[-1:] or ["failed"]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if "gen_s" in got:
        _first.gen_s = got["gen_s"]
    return got["s"], None


def _per_call(fn, iters=2000):
    import torch

    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / iters * 1e6


def _throughput(kgen, torch, kbench, iters=20):
    """kgen.attention's TF/s at the throughput shape and, given the kbench
    binary, kbench's for the same shape (its kernel is the one kgen.attention
    picks: the default configuration of these arguments)."""
    b, s, h, d = 4, 8192, 16, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 2.0 * b * h * s * s * (d + d) / 2  # causal: half the scores (kbench's count)
    for _ in range(5):
        kgen.attention(q, k, v, causal=True)
    times = []
    for _ in range(iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        kgen.attention(q, k, v, causal=True)
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    times.sort()
    r = {"kgen_tflops": flops / (times[len(times) // 2] * 1e-3) / 1e12}
    if kbench:
        cmd = [kbench, "fmha", "--batch", str(b), "--seqlen-q", str(s), "--seqlen-k", str(s),
               "--iters", str(iters), "--warmup", "5", "--no-peer", "--head-dim", str(d),
               "--heads-q", str(h), "--heads-kv", str(h), "--mask", "causal"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
        for line in out.splitlines():
            if line.startswith("kbench-result "):  # KERNEL SHAPE OURS PEER PEER_TFLOPS RATIO
                r["kbench_tflops"] = float(line.split()[3])
        if "kbench_tflops" not in r:
            r["kbench_error"] = (out.strip().splitlines() or ["no kbench-result line"])[-1]
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kgen.bench")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--largest", default="1,4096,16,512,1",
                    help="b,s,h,d,causal of the first-call kernel (default: head_dim 512)")
    ap.add_argument("--kbench", help="the kbench binary (e.g. build-gpu/tools/kbench): its TF/s "
                    "for the throughput shape, beside kgen.attention's")
    a = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    import kgen

    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    shape = [int(x) for x in a.largest.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env["KGEN_CACHE_DIR"] = os.path.join(tmp, "kgen")
        env["CUDA_CACHE_PATH"] = os.path.join(tmp, "nv")     # the driver's JIT cache
        env["TRITON_CACHE_DIR"] = os.path.join(tmp, "triton")
        for which in ("kgen", "triton"):
            res[which + "_cold_s"], e1 = _first(which, shape, env)
            res[which + "_warm_s"], e2 = _first(which, shape, env)
            if which == "kgen":
                res["kgen_generate_s"] = getattr(_first, "gen_s", None)
            if e1 or e2:
                res[which + "_error"] = e1 or e2
    q = torch.randn(1, 128, 2, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    res["kgen_call_us"] = _per_call(lambda: kgen.attention(q, k, v))
    res["sdpa_call_us"] = _per_call(lambda: F.scaled_dot_product_attention(qt, kt, vt))
    # where kgen's time goes: the launch alone (ctypes + libkrt + driver)
    # with the arguments packed once
    from kgen import _fast
    f = next(iter(_fast.values()))
    o = torch.empty(f.oshape, dtype=f.dtype, device=f.device)
    flat = f.flat[:]
    flat[f.slots["Q"]], flat[f.slots["K"]], flat[f.slots["O"]] = q.data_ptr(), k.data_ptr(), o.data_ptr()
    if "V" in f.slots:
        flat[f.slots["V"]] = v.data_ptr()
    packed = f.pack(*flat)
    stream = torch.cuda.current_stream().cuda_stream
    res["kgen_launch_us"] = _per_call(lambda: f.launch(packed, stream))
    # kgen.sparse_decode at a tiny shape (one CTA, no split-KV): the memo of
    # launchers, a sink and per-sequence lengths included
    kc = kgen.quantize_kv_cache(torch.randn(2, 64, 1, 512, dtype=torch.bfloat16, device="cuda"))
    qd = torch.randn(1, 1, 8, 512, dtype=torch.bfloat16, device="cuda")
    kw = dict(indices=torch.randint(0, 128, (1, 1, 64), dtype=torch.int32, device="cuda"),
              topk_length=torch.full((1,), 64, dtype=torch.int32, device="cuda"),
              attn_sink=torch.zeros(8, device="cuda"))
    res["kgen_decode_call_us"] = _per_call(lambda: kgen.sparse_decode(qd, kc, **kw))
    res.update(_throughput(kgen, torch, a.kbench))
    if a.json:
        print(json.dumps(res))
        return
    print("kgen.bench on %s (torch %s)" % (res["device"], res["torch"]))
    print("first call, shape b,s,h,d,causal = %s" % a.largest)
    for w in ("kgen", "triton"):
        c, m = res.get(w + "_cold_s"), res.get(w + "_warm_s")
        print("  %-7s cold %s   warm (new process) %s%s" % (
            w, "%.3f s" % c if c is not None else "-", "%.1f ms" % (m * 1e3) if m is not None else "-",
            "   " + str(res.get(w + "_error")) if res.get(w + "_error") else ""))
    if res.get("kgen_generate_s") is not None:
        print("  (kgen's generator alone: %.1f ms; the rest of the cold call is the driver's "
              "PTX JIT and the load)" % (res["kgen_generate_s"] * 1e3))
    print("per-call host overhead, [1,128,2,64] bf16: kgen %.1f us (of which the launch %.1f us), "
          "SDPA %.1f us" % (res["kgen_call_us"], res["kgen_launch_us"], res["sdpa_call_us"]))
    print("per-call host overhead, sparse_decode [1,1,8,512] top-k 64: kgen %.1f us"
          % res["kgen_decode_call_us"])
    kb = res.get("kbench_tflops")
    print("throughput, [4,8192,16,128] bf16 causal: kgen.attention %.1f TF/s%s" % (
        res["kgen_tflops"], ", kbench %.1f TF/s (kgen.attention / kbench = %.3f)" %
        (kb, res["kgen_tflops"] / kb) if kb else
        "   kbench: " + res.get("kbench_error", "not given (--kbench PATH)")))


if __name__ == "__main__":
    main()
