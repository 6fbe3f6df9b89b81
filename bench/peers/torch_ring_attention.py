"""Peer baseline for the fused ring (issue 32): a small, honest torch ring attention on W GPUs.

    torchrun --nproc-per-node=2 bench/peers/torch_ring_attention.py --out result.json

Each rank holds its shard of q, k, v ([B, H, shard, D], bf16, random; zigzag: chunks r and
2W - 1 - r of 2W for causal, contiguous otherwise). W steps: at step i every rank computes attention
of its queries against the K and V it holds (its own at step 0), with torch's flash kernel through
aten._scaled_dot_product_flash_attention (which returns the log-sum-exp), while dist.batch_isend_irecv
passes the K and V on to the next rank; partial outputs merge by their log-sum-exp (the standard
zigzag schedule: step 0 causal over the own two chunks; an upstream source's first chunk is seen by
every query, a downstream source's two chunks by the second half only). Timed with CUDA events,
median of --samples launches after warm-up, the slower rank counting. NVLink multicast stays off.
"""
import argparse
import json
import os
import statistics

os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NCCL_NVLS_ENABLE"] = "0"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def flash(q, k, v, causal):
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)[:2]
    return out, lse.float()


def merge(out, lse, o2, l2):
    if out is None:
        return o2.float(), l2
    new = torch.logaddexp(lse, l2)
    out = out * torch.exp(lse - new).unsqueeze(-1) + o2.float() * torch.exp(l2 - new).unsqueeze(-1)
    return out, new


def ring(q, k, v, causal, zigzag, rank, world):
    half = q.shape[2] // 2 if zigzag else None
    out = lse = None
    out1 = lse1 = None  # zigzag: the second half's separate accumulator for partial steps
    kv = torch.stack([k, v])
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for step in range(world):
        reqs = []
        if step + 1 < world:
            recv = torch.empty_like(kv)
            ops = [dist.P2POp(dist.isend, kv, nxt), dist.P2POp(dist.irecv, recv, prv)]
            reqs = dist.batch_isend_irecv(ops)
        kk, vv = kv[0], kv[1]
        src = (rank - step) % world
        if not causal:
            o, l = flash(q, kk, vv, False)
            out, lse = merge(out, lse, o, l)
        elif not zigzag:
            if src <= rank:
                o, l = flash(q, kk, vv, src == rank)
                out, lse = merge(out, lse, o, l)
        elif step == 0:
            o, l = flash(q, kk, vv, True)
            out, lse = merge(out, lse, o, l)
        elif src < rank:
            o, l = flash(q, kk[:, :, :half], vv[:, :, :half], False)
            out, lse = merge(out, lse, o, l)
        else:
            o, l = flash(q[:, :, half:], kk, vv, False)
            out1, lse1 = merge(out1, lse1, o, l)
        for r in reqs:
            r.wait()
        if step + 1 < world:
            kv = recv
    if out1 is not None:
        a, b = merge(out[:, :, half:], lse[:, :, half:], out1, lse1)
        out = torch.cat([out[:, :, :half], a], dim=2)
        lse = torch.cat([lse[:, :, :half], b], dim=2)
    return out.to(q.dtype), lse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--seqs", default="8192,32768,131072")
    a = ap.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    results = []
    for s in [int(x) for x in a.seqs.split(",")]:
        for causal in (True, False):
            for hk in (32, 8) if s == 32768 else (32,):
                b, h, d = 1, 32, 128
                shard = s // world
                gen = torch.Generator(device="cuda").manual_seed(rank + 1)
                q = torch.rand((b, h, shard, d), device="cuda", dtype=torch.bfloat16, generator=gen) - 0.5
                k = torch.rand((b, hk, shard, d), device="cuda", dtype=torch.bfloat16, generator=gen) - 0.5
                v = torch.rand((b, hk, shard, d), device="cuda", dtype=torch.bfloat16, generator=gen) - 0.5
                if hk != h:  # flash wants equal heads: expanded once, outside the timing
                    k, v = k.repeat_interleave(h // hk, 1), v.repeat_interleave(h // hk, 1)
                fn = lambda: ring(q, k, v, causal, causal, rank, world)  # noqa: E731
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                times = []
                st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                for _ in range(a.samples):
                    dist.barrier()
                    st.record()
                    fn()
                    en.record()
                    en.synchronize()
                    t = torch.tensor([st.elapsed_time(en)], device="cuda")
                    dist.all_reduce(t, op=dist.ReduceOp.MAX)
                    times.append(t.item())
                results.append({"seq": s, "causal": causal, "kvHeads": hk, "layout": "zigzag" if causal else "contiguous",
                                "medianMs": statistics.median(times), "minMs": min(times), "maxMs": max(times), "samples": a.samples})
                del q, k, v
                torch.cuda.empty_cache()
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"torch": torch.__version__, "world": world, "device": torch.cuda.get_device_name(0), "results": results}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
