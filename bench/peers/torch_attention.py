"""Peer baseline for bench/attention.ts: PyTorch's scaled_dot_product_attention on one GPU, with its
cuDNN and FlashAttention backends forced one at a time, on the same cases.

bench/attention.ts runs it as a child process in the same device call, in one of two ways:
    python3 bench/peers/torch_attention.py --cases '<json>' --out result.json    (every case, once)
    python3 bench/peers/torch_attention.py --serve    (one case JSON per stdin line, one result JSON
                                                      per stdout line: bench/attention.ts alternates
                                                      its own timing of a case with this one's)
Each case: {"name", "batch", "seq", "heads", "kvHeads", "headDim", "causal"}. Inputs are random bf16
in torch's native [B, H, S, D] layout (its fastest). Per backend it times, with CUDA events, the
median (and min, max) of --samples samples after warm-up, each sample a back-to-back loop of
--loop-ms worth of calls after --rest-ms of idle GPU, and keeps the wall-clock window of the samples
(epoch ms: bench/support/smi-window.ts reads the SM clock in it); a backend that refuses the case is
reported with its error instead.
GQA: enable_gqa=True where torch has it (2.5+); otherwise k and v are expanded to every head first
(outside the timing).
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def time_call(fn, samples, loop_ms, rest_ms):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = max(start.elapsed_time(end), 1e-3)
    loop = max(1, int(math.ceil(loop_ms / once)))
    times = []
    t0 = time.time() * 1000
    for _ in range(samples):
        if rest_ms > 0:
            time.sleep(rest_ms / 1000)
        start.record()
        for _ in range(loop):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / loop)
    return {"medianMs": statistics.median(times), "minMs": min(times), "maxMs": max(times), "samples": samples, "loop": loop,
            "window": [t0, time.time() * 1000]}


def run_case(c, samples, loop_ms, rest_ms, backends):
    b, s, h, hk, d = c["batch"], c["seq"], c["heads"], c["kvHeads"], c["headDim"]
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.rand((b, h, s, d), device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
    k = torch.rand((b, hk, s, d), device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
    v = torch.rand((b, hk, s, d), device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
    out = {}
    for name in backends:
        backend = BACKENDS[name]
        try:
            kw = {}
            kk, vv = k, v
            if hk != h:
                try:
                    with sdpa_kernel(backend):
                        F.scaled_dot_product_attention(q[:, :, :128], k[:, :, :128], v[:, :, :128], is_causal=c["causal"], enable_gqa=True)
                    kw["enable_gqa"] = True
                except (TypeError, RuntimeError):
                    kk, vv = k.repeat_interleave(h // hk, dim=1), v.repeat_interleave(h // hk, dim=1)
            with sdpa_kernel(backend):
                fn = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=c["causal"], **kw)  # noqa: E731
                r = time_call(fn, samples, loop_ms, rest_ms)
            r["gqa"] = "enable_gqa" if kw else ("expanded" if hk != h else "none")
            out[name] = r
        except Exception as e:  # a backend that cannot take the case
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases")
    ap.add_argument("--out")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--backends", default="cudnn,flash")
    ap.add_argument("--rest-ms", type=float, default=0.0)
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--loop-ms", type=float, default=20.0)
    a = ap.parse_args()
    backends = a.backends.split(",")
    meta = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name(0)}
    if a.serve:
        print(json.dumps(meta), flush=True)
        for line in sys.stdin:
            if not line.strip():
                continue
            c = json.loads(line)
            print(json.dumps(run_case(c, a.samples, a.loop_ms, a.rest_ms, backends)), flush=True)
            torch.cuda.empty_cache()
        return
    result = {**meta, "cases": {}}
    for c in json.loads(a.cases):
        result["cases"][c["name"]] = run_case(c, a.samples, a.loop_ms, a.rest_ms, backends)
        torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
