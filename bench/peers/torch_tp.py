"""Peer baseline for bench/tp.ts: PyTorch's own tensor-parallel ops on the same shapes.

Run on the GPU host in the same session as the TS bench:
    torchrun --nproc-per-node=2 bench/peers/torch_tp.py --out $OUT/torch_tp.json

Per shape (M, N, K) and world size W it times, with CUDA events, the median of >= 20 samples after
warm-up, on random bf16 data, the way bench/tp.ts times its own variants (time_variants): each
sample a back-to-back loop of ~1 ms behind one untimed call, after 2 ms of idle GPU (--rest-ms: both
harnesses rest the same, so both run at the same clocks under the power cap), the variants of a
shape alternating sample by sample, the slower rank counting. (--cold: one call per sample from an idle GPU, each
variant's samples in a row: the earlier protocol, which put Python's dispatch inside every
sample and ran a variant at other clocks than tp.ts runs ours.)
  ag_gemm   torch.ops.symm_mem.fused_all_gather_matmul   a [M/W, K] (gathered) x b [K, N/W]
  gemm_rs   torch.ops.symm_mem.fused_matmul_reduce_scatter a [M, K/W] x b [K/W, N] -> [M/W, N]
  gemm_ar   no fused op exists in torch: matmul then an all-reduce, the fastest of NCCL
            (dist.all_reduce) and SymmetricMemory one-shot / two-shot; every variant is reported.
Also the unfused torch sequences (NCCL collective + cuBLAS matmul) for reference, and for AG and RS
the local matmul alone (torch_matmul_only: the fused op's compute-only limit in this process).
NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1 is forced below).
"""
import argparse
import json
import math
import os
import time

os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
from event_timing import events_loop_ms  # noqa: E402

SHAPES = [
    (1024, 8192, 8192), (4096, 8192, 8192), (8192, 8192, 8192), (16384, 8192, 8192),
    (8192, 28672, 8192), (8192, 8192, 28672), (4096, 14336, 4096),
]
AR_DECODE = [(16, 8192, 8192), (128, 8192, 8192), (512, 8192, 8192)]


COLD = False
LOOP_MS = 1.0
REST_MS = 2.0  # --rest-ms: the GPU idles this long before every sample (bench/tp.ts has the same)


def loop_ms(fn, calls):
    """ms per call over `calls` back-to-back calls (events_loop_ms) after a barrier and REST_MS of idle
    GPU; this rank's: time_variants takes the slower rank's."""
    dist.barrier()
    if REST_MS > 0:
        torch.cuda.synchronize()
        time.sleep(REST_MS / 1000)
    return events_loop_ms(fn, calls)


def time_ms(fn, warmup=5, iters=25):
    """--cold: one call per sample from an idle GPU (the earlier protocol)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    t = torch.tensor(times, device="cuda")
    # The op is done when the slowest rank is done.
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.median())


def time_variants(fns, warmup=5, samples=25):
    """Median ms per call of each of `fns` as bench/tp.ts times its variants: back-to-back loops of
    ~LOOP_MS behind one untimed call, the variants alternating sample by sample (the card's clocks
    drift under its power cap, and a variant timed alone runs at other clocks than one timed among
    others), the slower rank counting."""
    if COLD:
        return [time_ms(fn, warmup, samples) for fn in fns]
    for fn in fns:
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    calls = torch.tensor([max(1, min(50, math.ceil(LOOP_MS / max(loop_ms(fn, 1), 1e-3)))) for fn in fns],
                         device="cuda")
    dist.all_reduce(calls, op=dist.ReduceOp.MAX)  # every rank runs the same loops
    times = [[] for _ in fns]
    for _ in range(samples):
        for i, fn in enumerate(fns):
            times[i].append(loop_ms(fn, int(calls[i])))
    t = torch.tensor(times, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(x) for x in t.median(dim=1).values]


def rand(*shape):
    return torch.empty(shape, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="torch_tp.json")
    p.add_argument("--iters", type=int, default=25)
    p.add_argument("--cold", action="store_true", help="time each run from an idle GPU")
    p.add_argument("--rest-ms", type=float, default=2.0,
                   help="idle GPU time before every sample (default 2, as bench/tp.ts: equal clocks under the power cap)")
    p.add_argument("--only", default="ag,rs,ar", help="ops to time: ag, rs, ar")
    p.add_argument("--shapes", default="", help="only these shapes, MxNxK,... (as bench/tp.ts --shapes)")
    args = p.parse_args()
    global COLD, REST_MS
    COLD = args.cold
    REST_MS = args.rest_ms
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    group = dist.group.WORLD
    name = group.group_name
    try:
        symm_mem.enable_symm_mem_for_group(name)
    except Exception:  # newer torch enables it on demand
        pass
    torch.manual_seed(1234 + rank)
    rows = []
    only = args.only.split(",")

    def picked(shapes):
        return [s for s in shapes if not args.shapes or "x".join(map(str, s)) in args.shapes.split(",")]

    def record(op, shape, variant, ms):
        M, N, K = shape
        rows.append({"op": op, "M": M, "N": N, "K": K, "W": world, "variant": variant, "ms": ms,
                     "tflops_per_gpu": 2 * M * N * K / world / (ms * 1e-3) / 1e12})
        if rank == 0:
            print(f"{op:8s} {M:6d} {N:6d} {K:6d} {variant:28s} {ms:8.3f} ms", flush=True)

    def measure(op, shape, variants):
        for (variant, _), ms in zip(variants, time_variants([fn for _, fn in variants], samples=args.iters)):
            record(op, shape, variant, ms)

    def available(variant, fn):
        try:
            fn()
            torch.cuda.synchronize()
            return [(variant, fn)]
        except Exception as e:  # noqa: BLE001
            if rank == 0:
                print(f"{variant} unavailable: {e}")
            return []

    for shape in picked(SHAPES):
        M, N, K = shape
        if "ag" in only:
            # AllGather + GEMM (column parallel): out = allgather(a) @ b.
            a, b = rand(M // world, K), rand(K, N // world)
            gathered, local = torch.empty(M, K, dtype=torch.bfloat16, device="cuda"), rand(M, K)
            measure("ag_gemm", shape, [
                ("torch_symm_mem_fused", lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=name)),
                ("torch_nccl_then_cublas", lambda: (dist.all_gather_into_tensor(gathered, a), gathered @ b)),
                ("torch_matmul_only", lambda: local @ b),
            ])
            del a, b, gathered, local
        if "rs" in only:
            # GEMM + ReduceScatter (row parallel): out = reduce_scatter(a @ b) over rows.
            a, b = rand(M, K // world), rand(K // world, N)
            out = torch.empty(M // world, N, dtype=torch.bfloat16, device="cuda")
            measure("gemm_rs", shape, [
                ("torch_symm_mem_fused", lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", scatter_dim=0, group_name=name)),
                ("torch_cublas_then_nccl", lambda: dist.reduce_scatter_tensor(out, a @ b)),
                ("torch_matmul_only", lambda: a @ b),
            ])
            del a, b, out
        torch.cuda.empty_cache()

    for shape in picked(SHAPES + AR_DECODE) if "ar" in only else []:
        M, N, K = shape
        a, b = rand(M, K // world), rand(K // world, N)
        buf = symm_mem.empty(M, N, dtype=torch.bfloat16, device="cuda")
        symm_mem.rendezvous(buf, name)
        variants = [("torch_cublas_then_nccl", lambda: dist.all_reduce(a @ b))]
        if M * N * 2 <= 8 << 20:
            variants += available("torch_cublas_then_symm_one_shot",
                                  lambda: torch.ops.symm_mem.one_shot_all_reduce(torch.matmul(a, b, out=buf), "sum", name))
        variants += available("torch_cublas_then_symm_two_shot",
                              lambda: torch.ops.symm_mem.two_shot_all_reduce_(torch.matmul(a, b, out=buf), "sum", name))
        measure("gemm_ar", shape, variants)
        del a, b, buf
        torch.cuda.empty_cache()

    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "device": torch.cuda.get_device_name(), "cold": COLD, "rest_ms": REST_MS, "rows": rows}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
