"""Peer baseline for bench/moe.ts: PyTorch's own MoE path on the same shapes, in the same device session.

One GPU (world 1; E = the local experts):
    python3 bench/peers/torch_moe.py --out $OUT/torch_moe.json
Two GPUs (issue 31: the expert-parallel all-to-all path, E = 2 x local experts):
    torchrun --nproc-per-node=2 bench/peers/torch_moe.py --out $OUT/torch_moe2.json

Per config (A: T 4096, k 8, H 7168, I 2048, 32 local experts; B: T 16384, k 4, H 4096, I 1536, 16
local experts; decode: config A at T 128) and routing (uniform logits, or skewed: 70% of tokens
prefer expert 0, a third of the experts never chosen), each timed as a whole and by stage:
  topk        softmax over the router logits, torch.topk (ids, weights)
  permute     a stable argsort of the flattened ids, bincount, the gathered rows (index_select)
  up_gemm     torch._grouped_mm(rows, w1 [G, I, H] transposed, offs): the up-projection alone
  up_gemm_kn  the same with w1 stored [G, H, I] (contiguous mat_b): ours has both layouts
  dispatch_up topk + permute + up_gemm: what comm.moeDispatch + the grouped GEMM replace
  layer       dispatch with gate+up [G, 2I, H], SwiGLU, the down projection [G, H, I],
              un-permutation (index_copy back) and the weighted sum over k
Two ranks add the all-to-all: counts by all_to_all_single (their sizes go to the host: .tolist(), the
CPU sync DeepEP's normal mode has too), rows by all_to_all_single with those splits, a second sort by
local expert on the receiver, the same back after the experts.
Timing as bench/peers/torch_tp.py: CUDA events over a back-to-back loop of ~1 ms behind one untimed
call, after --rest-ms of idle GPU, the median of --samples loops, the slower rank counting.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0 is forced below).
"""
import argparse
import json
import os
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from event_timing import events_loop_ms  # noqa: E402

CONFIGS = {
    "A": dict(T=4096, k=8, H=7168, I=2048, local=32),
    "B": dict(T=16384, k=4, H=4096, I=1536, local=16),
    "decode": dict(T=128, k=8, H=7168, I=2048, local=32),
}
REST_MS = 2.0
LOOP_MS = 1.0
WORLD, RANK = 1, 0


def barrier():
    if WORLD > 1:
        dist.barrier()


def loop_ms(fn, calls):
    barrier()
    torch.cuda.synchronize()
    time.sleep(REST_MS / 1000)
    ms = events_loop_ms(fn, calls)
    if WORLD > 1:
        t = torch.tensor([ms], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        ms = t.item()
    return ms


def time_fn(fn, samples):
    fn()
    torch.cuda.synchronize()
    once = loop_ms(fn, 1)
    calls = max(1, min(200, int(LOOP_MS / max(once, 1e-3) + 0.5)))
    times = sorted(loop_ms(fn, calls) for _ in range(samples))
    return times[len(times) // 2], times[0], times[-1]


def make_logits(T, E, routing, gen):
    logits = torch.randn(T, E, device="cuda", generator=gen)
    if routing == "skewed":
        logits[:, [e for e in range(E) if e % 3 == 2][: max(0, E - 8)]] = -1e4  # a third never chosen
        hot = torch.rand(T, device="cuda", generator=gen) < 0.7
        logits[hot, 0] = 1e4  # 70% of tokens send their first slot to expert 0
    return logits


class Case:
    """One rank's inputs and torch's path for one config."""

    def __init__(self, cfg, routing, gen):
        self.T, self.k, self.H, self.I, self.G = cfg["T"], cfg["k"], cfg["H"], cfg["I"], cfg["local"]
        self.E = self.G * WORLD
        dev = "cuda"
        self.x = torch.randn(self.T, self.H, device=dev, dtype=torch.bfloat16, generator=gen)
        self.logits = make_logits(self.T, self.E, routing, gen)
        # Linear weights [G, N, K]; torch._grouped_mm wants mat_b [G, K, N], so they go in transposed.
        scale = 0.02
        self.w_up = (torch.randn(self.G, self.I, self.H, device=dev, generator=gen) * scale).to(torch.bfloat16)
        self.w_up_kn = self.w_up.transpose(-2, -1).contiguous()  # [G, H, I]
        self.w_gate_up = (torch.randn(self.G, 2 * self.I, self.H, device=dev, generator=gen) * scale).to(torch.bfloat16)
        self.w_down = (torch.randn(self.G, self.H, self.I, device=dev, generator=gen) * scale).to(torch.bfloat16)

    def topk(self):
        probs = torch.softmax(self.logits, dim=-1, dtype=torch.float32)
        return torch.topk(probs, self.k, dim=-1)

    def permute(self, ids):
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.E)
        rows = self.x.index_select(0, order // self.k)
        return order, counts, rows

    def gmm(self, rows, w, counts):
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        return torch._grouped_mm(rows, w.transpose(-2, -1), offs=offs)

    def gmm_kn(self, rows, w_kn, counts):
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        return torch._grouped_mm(rows, w_kn, offs=offs)

    # ---- one rank ----
    def up_one(self):
        w, ids = self.topk()
        order, counts, rows = self.permute(ids)
        return self.gmm(rows, self.w_up, counts)

    def layer_one(self):
        w, ids = self.topk()
        order, counts, rows = self.permute(ids)
        h = self.gmm(rows, self.w_gate_up, counts)
        a = F.silu(h[:, : self.I]) * h[:, self.I:]
        y = self.gmm(a, self.w_down, counts)
        back = torch.empty_like(y).index_copy_(0, order, y)
        return (back.view(self.T, self.k, self.H).float() * w.unsqueeze(-1)).sum(1).to(torch.bfloat16)

    # ---- two or more ranks: all_to_all_single ----
    def exchange(self):
        w, ids = self.topk()
        order, counts, rows = self.permute(ids)  # rows grouped by global expert, so by owner rank
        recv_counts = torch.empty_like(counts)
        dist.all_to_all_single(recv_counts, counts)  # [source][local expert]
        send_split = counts.view(WORLD, self.G).sum(1).tolist()  # the host sync
        recv_split = recv_counts.view(WORLD, self.G).sum(1).tolist()
        recv = rows.new_empty(sum(recv_split), self.H)
        dist.all_to_all_single(recv, rows, recv_split, send_split)
        # Received rows are [source][local expert]: sort them by local expert for the grouped GEMM.
        local_ids = torch.repeat_interleave(torch.arange(self.G, device="cuda").repeat(WORLD), recv_counts)
        local_order = torch.argsort(local_ids, stable=True)
        per_expert = recv_counts.view(WORLD, self.G).sum(0)
        return w, order, send_split, recv_split, recv.index_select(0, local_order), local_order, per_expert

    def up_ep(self):
        _, _, _, _, rows, _, per_expert = self.exchange()
        return self.gmm(rows, self.w_up, per_expert)

    def layer_ep(self):
        w, order, send_split, recv_split, rows, local_order, per_expert = self.exchange()
        h = self.gmm(rows, self.w_gate_up, per_expert)
        a = F.silu(h[:, : self.I]) * h[:, self.I:]
        y = self.gmm(a, self.w_down, per_expert)
        y = torch.empty_like(y).index_copy_(0, local_order, y)  # back to [source][local expert]
        ret = y.new_empty(sum(send_split), self.H)
        dist.all_to_all_single(ret, y, send_split, recv_split)
        back = torch.empty_like(ret).index_copy_(0, order, ret)
        return (back.view(self.T, self.k, self.H).float() * w.unsqueeze(-1)).sum(1).to(torch.bfloat16)


def run_case(name, cfg, routing, samples):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234 + RANK)
    c = Case(cfg, routing, gen)
    out = {"config": name, "routing": routing, "world": WORLD, **cfg, "experts": c.E}
    stages = {}
    try:
        if WORLD == 1:
            w, ids = c.topk()
            order, counts, rows = c.permute(ids)
            stages["topk"] = lambda: c.topk()
            stages["permute"] = lambda: c.permute(ids)
            stages["up_gemm"] = lambda: c.gmm(rows, c.w_up, counts)
            stages["up_gemm_kn"] = lambda: c.gmm_kn(rows, c.w_up_kn, counts)
            stages["dispatch_up"] = c.up_one
            stages["layer"] = c.layer_one
        else:
            stages["dispatch_up"] = c.up_ep
            stages["layer"] = c.layer_ep
            _, _, _, _, rows, _, per_expert = c.exchange()
            stages["up_gemm"] = lambda: c.gmm(rows, c.w_up, per_expert)
        for stage, fn in stages.items():
            ms, lo, hi = time_fn(fn, samples)
            out[stage] = {"ms": ms, "min": lo, "max": hi}
        rows_total = c.T * c.k * WORLD if WORLD > 1 else c.T * c.k
        out["up_tflops"] = 2.0 * c.T * c.k * c.H * c.I / (out["up_gemm"]["ms"] * 1e9)
        out["rows_per_rank"] = rows_total // WORLD
    except Exception as e:  # noqa: BLE001 - report and go on with the other configs
        out["error"] = f"{type(e).__name__}: {e}"
    del c
    torch.cuda.empty_cache()
    return out


def main():
    global WORLD, RANK, REST_MS, LOOP_MS
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--configs", default="A,B,decode")
    p.add_argument("--routing", default="uniform,skewed")
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--rest-ms", type=float, default=2.0)
    a = p.parse_args()
    REST_MS = a.rest_ms
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        dist.init_process_group("nccl")
        WORLD, RANK = dist.get_world_size(), dist.get_rank()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", RANK)))
    results = []
    for name in a.configs.split(","):
        for routing in a.routing.split(","):
            r = run_case(name, CONFIGS[name], routing, a.samples)
            if RANK == 0:
                print(json.dumps(r), flush=True)
            results.append(r)
    if RANK == 0:
        with open(a.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "world": WORLD,
                       "samples": a.samples, "rest_ms": REST_MS, "results": results}, f, indent=1)
    if WORLD > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
