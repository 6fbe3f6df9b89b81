"""Run by test_torchrun.py under `torchrun --nproc-per-node=2`: one rank per GPU, the communicator
made from the process group. Every op against torch.distributed's own result, the TP layers'
gradients against the same layers in plain torch (the torch step of examples/torch_tp_mlp.py), and
back-to-back launches. Prints one line per check; exits 1 on any mismatch."""
import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import weft.torch as wt  # noqa: E402

spec = importlib.util.spec_from_file_location("torch_tp_mlp", HERE.parents[2] / "examples" / "torch_tp_mlp.py")
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def rand(shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(shape, generator=g, device="cuda") * 2 - 1).to(torch.bfloat16)


def main() -> int:
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    torch.backends.cuda.matmul.allow_tf32 = False
    rank, w = dist.get_rank(), dist.get_world_size()
    comm = wt.Communicator.from_process_group(heap_bytes=1 << 30)
    failures = []

    def check(name, err, limit=1e-2):
        ok = err <= limit
        print(f"dist_check rank {rank}: {name}: {err:.2e} {'ok' if ok else f'> {limit:g} MISMATCH'}", flush=True)
        if not ok:
            failures.append(name)

    x = rand((4096, 64), 10 + rank).float()
    ref = x.clone()
    dist.all_reduce(ref)
    check("all_reduce f32", rel(comm.all_reduce(x), ref), 1e-5)
    gathered = torch.empty(w * 4096, 64, device="cuda")
    dist.all_gather_into_tensor(gathered, x)
    check("all_gather f32", rel(comm.all_gather(x), gathered), 0)
    scattered = torch.empty(4096 // w, 64, device="cuda")
    dist.reduce_scatter_tensor(scattered, x)
    check("reduce_scatter f32", rel(comm.reduce_scatter(x), scattered), 1e-5)

    for m, k, n in [(1024, 4096, 2048), (72, 264, 200)]:
        a, b = rand((m, k), 20 + rank), rand((n, k), 30 + rank).t()
        full = torch.empty(w * m, k, dtype=torch.bfloat16, device="cuda")
        dist.all_gather_into_tensor(full, a)
        check(f"all_gather_gemm ({m}, {k}, {n})", rel(comm.all_gather_gemm(a, b), full.float() @ b.float()))
        big = rand((w * m, k), 40 + rank)
        partial = big.float() @ b.float()
        summed = partial.clone()
        dist.all_reduce(summed)
        check(f"gemm_all_reduce ({w * m}, {k}, {n})", rel(comm.gemm_all_reduce(big, b), summed))
        check(f"gemm_reduce_scatter ({w * m}, {k}, {n})", rel(comm.gemm_reduce_scatter(big, b), summed.chunk(w)[rank]))

    # The TP MLP: weft's layers against the same layers in plain torch (torch.distributed + matmul).
    tokens, hidden, ffn = 512 * w, 1024, 2048
    g = torch.Generator().manual_seed(5)
    w1, w2 = torch.randn(ffn, hidden, generator=g) / 32, torch.randn(hidden, ffn, generator=g) / 45
    xs, up = torch.randn(tokens, hidden, generator=g), torch.randn(tokens, hidden, generator=g)
    args = type("Args", (), {"hidden": hidden, "ffn": ffn})
    ranks = [example.make_rank(comm, args, xs, w1, w2, up)]
    ours, theirs = example.weft_steps(ranks, check=True)[0], example.torch_steps(ranks, True, check=True)[0]
    for name, u, v in zip(("output", "input grad", "W1 grad", "W2 grad"), ours, theirs):
        check(f"tp mlp {name} vs torch.distributed", rel(u, v))

    # Back to back: 100 launches of one cached plan with fresh inputs, all queued before any check.
    b = rand((512, 1024), 50 + rank).t()
    a = [rand((256, 1024), 1000 + 10 * i + rank) for i in range(100)]
    outs = [comm.all_gather_gemm(ai, b) for ai in a]
    worst = 0.0
    for ai, out in zip(a, outs):
        full = torch.empty(w * 256, 1024, dtype=torch.bfloat16, device="cuda")
        dist.all_gather_into_tensor(full, ai)
        worst = max(worst, rel(out, full.float() @ b.float()))
    check("100 back-to-back all_gather_gemm (worst)", worst)

    comm.close()
    dist.destroy_process_group()
    if not failures:
        print(f"dist_check rank {rank}: all passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
