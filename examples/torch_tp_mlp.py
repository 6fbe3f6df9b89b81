"""A two-layer tensor-parallel MLP training step on weft's fused ops, checked and timed against the
same step written with torch's own ops.

    torchrun --nproc-per-node=2 examples/torch_tp_mlp.py          # one rank per GPU
    python3 examples/torch_tp_mlp.py --local-ranks 2              # two ranks sharing GPU 0 (weft.torch.local)

The model is the sequence-parallel MLP of Megatron-LM / torch async-TP: every rank holds T / W of
the tokens, ColumnParallelLinear gathers them into the first GEMM (one fused kernel), GELU, and
RowParallelLinear reduce-scatters the second GEMM back to the rank's tokens (one fused kernel);
the backward pass runs the same fused ops the other way round. The torch step does the same with
torch.distributed collectives around torch.matmul (under torchrun) or, for ranks that share one GPU
in one process (where NCCL cannot run), with the collectives written as torch.cat and sums.

Step 0 checks weft's output and every gradient against torch's (relative error <= 1e-2, bf16); then
both steps (forward, backward, SGD update) are timed with CUDA events. Exit status 1 on a mismatch.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

# Ranks sharing GPU 0 in this process: rank 0's fused kernel waits for rank 1's, launched after rank
# 0's torch ops; a torch kernel's first (lazy) load in between would wait for rank 0's kernel for good
# (README, "Several ranks can share one GPU"). Read when CUDA starts, so set before its first use.
# Set even where the environment says LAZY: with ranks sharing a process it cannot work lazily.
if any(a.startswith("--local-ranks") for a in sys.argv[1:]):
    if os.environ.get("CUDA_MODULE_LOADING", "EAGER") != "EAGER":
        print(f"torch_tp_mlp: CUDA_MODULE_LOADING={os.environ['CUDA_MODULE_LOADING']} replaced by EAGER (--local-ranks)")
    os.environ["CUDA_MODULE_LOADING"] = "EAGER"
    # Libraries loaded through cuLibraryLoad (cuBLAS's kernels) follow this one instead.
    os.environ["CUDA_MODULE_DATA_LOADING"] = "EAGER"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ffi" / "python"))  # run from a checkout
import weft.torch as wt  # noqa: E402

LIMIT = 1e-2


# ---- the step in plain torch, one rank per process: torch.distributed collectives + matmul ------------


class _GatherRows(torch.autograd.Function):
    """all_gather along dim 0; backward: reduce_scatter."""

    @staticmethod
    def forward(ctx, x):
        import torch.distributed as dist

        out = x.new_empty((dist.get_world_size() * x.shape[0], *x.shape[1:]))
        dist.all_gather_into_tensor(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, g):
        return _ScatterRows.apply(g)


class _ScatterRows(torch.autograd.Function):
    """reduce_scatter (sum) along dim 0; backward: all_gather."""

    @staticmethod
    def forward(ctx, x):
        import torch.distributed as dist

        out = x.new_empty((x.shape[0] // dist.get_world_size(), *x.shape[1:]))
        dist.reduce_scatter_tensor(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, g):
        return _GatherRows.apply(g)


def torch_forward(x, w1, w2):
    """This rank's tokens x [T/W, H], its weight shards w1 [F/W, H], w2 [H, F/W] -> y [T/W, H]."""
    return _ScatterRows.apply(F.gelu(_GatherRows.apply(x) @ w1.t()) @ w2.t())


def torch_forward_local(xs, w1s, w2s):
    """Every rank of one process at once: the same math, the collectives as cat and sum."""
    full = torch.cat(xs)
    partial = sum(F.gelu(full @ w1.t()) @ w2.t() for w1, w2 in zip(w1s, w2s))
    return list(partial.chunk(len(xs)))


# ---- set-up ---------------------------------------------------------------------------------------------


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def make_rank(comm, args, x_full, w1_full, w2_full, g_full):
    """One rank's weft model, its torch twin (the same shards) and its inputs."""
    w, r = comm.world_size, comm.rank
    with comm.use():
        col = wt.ColumnParallelLinear(args.hidden, args.ffn, comm, weight=w1_full)
        row = wt.RowParallelLinear(args.ffn, args.hidden, comm, weight=w2_full)
        tw1 = col.weight.detach().clone().requires_grad_()
        tw2 = row.weight.detach().clone().requires_grad_()
        x = x_full.chunk(w)[r].to(device=comm.device, dtype=torch.bfloat16).contiguous()
        g = g_full.chunk(w)[r].to(device=comm.device, dtype=torch.bfloat16).contiguous()
    return {"comm": comm, "col": col, "row": row, "tw": (tw1, tw2), "x": x, "g": g,
            "opt": torch.optim.SGD([col.weight, row.weight], lr=1e-4),
            "topt": torch.optim.SGD([tw1, tw2], lr=1e-4)}


def weft_steps(ranks, check=False):
    """One training step on every rank (forward, backward, SGD); returns per-rank results if asked."""
    outs = []
    for rk in ranks:
        with rk["comm"].use():
            xs = rk["x"].detach().requires_grad_()
            y = rk["row"](F.gelu(rk["col"](xs)))
            outs.append((xs, y, (y * rk["g"]).float().sum()))
    torch.autograd.backward([o[2] for o in outs])
    results = []
    for rk, (xs, y, _) in zip(ranks, outs):
        with rk["comm"].use():
            if check:
                results.append((y.detach(), xs.grad, rk["col"].weight.grad.clone(), rk["row"].weight.grad.clone()))
            rk["opt"].step()
            rk["opt"].zero_grad(set_to_none=True)
    return results


def torch_steps(ranks, distributed, check=False):
    xs = [rk["x"].detach().requires_grad_() for rk in ranks]
    if distributed:
        ys = [torch_forward(xs[0], *ranks[0]["tw"])]
    else:
        ys = torch_forward_local(xs, [rk["tw"][0] for rk in ranks], [rk["tw"][1] for rk in ranks])
    torch.autograd.backward([(y * rk["g"]).float().sum() for y, rk in zip(ys, ranks)])
    results = []
    for rk, x, y in zip(ranks, xs, ys):
        if check:
            results.append((y.detach(), x.grad, rk["tw"][0].grad.clone(), rk["tw"][1].grad.clone()))
        rk["topt"].step()
        rk["topt"].zero_grad(set_to_none=True)
    return results


def timed(step, ranks, steps, repeats):
    """Median, min and max over `repeats` of the mean step time (ms) over `steps` steps."""
    step()  # warm-up: plans, cuBLAS handles, the allocator
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            step()
        for rk in ranks:  # the rank streams join the default stream before the end event
            if rk["comm"].stream is not None:
                torch.cuda.current_stream().wait_stream(rk["comm"].stream)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / steps)
    return statistics.median(times), min(times), max(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--local-ranks", type=int, default=0, help="ranks sharing GPU 0 in this process (no torchrun)")
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on the shared GPU hosts
    torch.backends.cuda.matmul.allow_tf32 = False

    distributed = args.local_ranks == 0
    if distributed:
        import torch.distributed as dist

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group("nccl")
        comms = [wt.Communicator.from_process_group()]
        world, lead = dist.get_world_size(), dist.get_rank() == 0
        where = f"{world} ranks, one per GPU (torchrun)"
    else:
        comms = wt.local([0] * args.local_ranks)
        world, lead = args.local_ranks, True
        where = f"{world} ranks sharing cuda:0 (weft.torch.local, {comms[0].native.sm_count} SMs each)"
    if args.tokens % (world * 128) or args.ffn % world:
        raise SystemExit(f"--tokens must be a multiple of 128 x {world} and --ffn of {world}")

    g = torch.Generator().manual_seed(1234)  # the same full tensors on every rank
    w1 = torch.randn(args.ffn, args.hidden, generator=g) / args.hidden ** 0.5
    w2 = torch.randn(args.hidden, args.ffn, generator=g) / args.ffn ** 0.5
    x = torch.randn(args.tokens, args.hidden, generator=g)
    up = torch.randn(args.tokens, args.hidden, generator=g)
    ranks = [make_rank(c, args, x, w1, w2, up) for c in comms]
    if not distributed:  # several ranks on one autograd thread: weft.torch.warm_up says why
        wt.warm_up([m for rk in ranks for m in (rk["col"], rk["row"])], args.tokens)
    torch.cuda.synchronize()  # the torch step runs on the default stream, the local ranks on their own

    ok = True
    # torch's step first, and done before weft's: its first matmuls load cuBLAS kernels, and with ranks
    # sharing a process, a load while a rank's fused kernel waits for the next rank's launch stalls
    # both until the communicator's timeout (README, "Several ranks can share one GPU").
    theirs = torch_steps(ranks, distributed, check=True)
    torch.cuda.synchronize()
    ours = weft_steps(ranks, check=True)
    torch.cuda.synchronize()
    for rk, a, b in zip(ranks, ours, theirs):
        errs = [rel(u, v) for u, v in zip(a, b)]
        ok &= all(e <= LIMIT for e in errs)
        print(f"rank {rk['comm'].rank}: step 0 against torch: y {errs[0]:.2e}, dx {errs[1]:.2e}, dW1 {errs[2]:.2e}, "
              f"dW2 {errs[3]:.2e} (limit {LIMIT:.0e}): {'ok' if all(e <= LIMIT for e in errs) else 'MISMATCH'}",
              flush=True)

    tw = timed(lambda: weft_steps(ranks), ranks, args.steps, args.repeats)
    tt = timed(lambda: torch_steps(ranks, distributed), ranks, args.steps, args.repeats)
    if lead:
        print(f"torch_tp_mlp: {where}; tokens {args.tokens}, hidden {args.hidden}, ffn {args.ffn}, bf16")
        print(f"  step (forward + backward + SGD): weft {tw[0]:.3f} ms (min {tw[1]:.3f}, max {tw[2]:.3f}), "
              f"torch {tt[0]:.3f} ms (min {tt[1]:.3f}, max {tt[2]:.3f}); weft / torch = {tw[0] / tt[0]:.2f}")
        plans = sorted({f"{c['op']} {c['path']}/{c['mover']}" for c in comms[0].plan_choices()})
        print(f"  weft plans: {', '.join(plans)}")
    comms[0].close()
    if distributed:
        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
