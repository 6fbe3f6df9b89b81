"""Helpers for the torch tests: fresh random inputs per rank, and running every rank of a local
group (ranks in this process, each on its own stream) one after the other without host waits."""
from support import need_torch

torch = need_torch()


def rand(shape, seed, dtype=torch.bfloat16, device="cuda:0"):
    """Uniform values in [-1, 1) from a seeded generator (never zeros), on the current stream."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.rand(shape, generator=g, device=device, dtype=torch.float32) * 2 - 1
    return x.to(dtype) if dtype.is_floating_point else (x * 100).to(dtype)


def per_rank(comms, fn):
    """fn(rank, comm) for every rank inside `with comm.use()`, then waits for every rank."""
    out = []
    for c in comms:
        with c.use():
            out.append(fn(c.rank, c))
    for c in comms:
        c.synchronize()
    torch.cuda.synchronize()
    return out
