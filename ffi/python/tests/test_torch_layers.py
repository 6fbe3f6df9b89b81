"""ColumnParallelLinear → GELU → RowParallelLinear (a sequence-parallel TP MLP) on weft's fused ops:
outputs and every gradient (input, both weights) against the same model in fp32 on one device,
at world 1 and 2 (ranks sharing GPU 0), for both RowParallelLinear reductions."""
import pytest

from support import rel_error


@pytest.fixture(scope="module")
def torch():
    from support import need_torch

    t = need_torch()
    t.backends.cuda.matmul.allow_tf32 = False
    return t


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("reduce", ["scatter", "all"])
def test_tp_mlp_forward_and_backward_match_one_device_fp32(torch, world, reduce):
    import weft.torch as wt
    from torch_support import rand

    tokens, hidden, ffn = 256 * world, 512, 1024
    w1, w2 = rand((ffn, hidden), 1).float(), rand((hidden, ffn), 2).float() * 0.5
    x = rand((tokens, hidden), 3).float()
    g = rand((tokens, hidden), 4).float()  # the upstream gradient
    torch.cuda.synchronize()  # made on the default stream, read on the ranks' streams

    # One device, fp32, from the same bf16-rounded values.
    xr = x.clone().requires_grad_()
    w1r, w2r = w1.clone().requires_grad_(), w2.clone().requires_grad_()
    y_ref = torch.nn.functional.gelu(xr @ w1r.t()) @ w2r.t()
    (y_ref * g).sum().backward()

    comms = wt.local([0] * world, heap_bytes=512 << 20, timeout_s=20)
    try:
        layers = []
        for c in comms:
            with c.use():
                layers.append((wt.ColumnParallelLinear(hidden, ffn, c, weight=w1),
                               wt.RowParallelLinear(ffn, hidden, c, weight=w2, reduce=reduce)))
        wt.warm_up([m for pair in layers for m in pair], tokens)  # ranks sharing the GPU: warm_up says why
        ranks = []
        for c, (col, row) in zip(comms, layers):
            with c.use():
                xs = x.chunk(world)[c.rank].to(torch.bfloat16).requires_grad_()
                y = row(torch.nn.functional.gelu(col(xs)))
                # scatter: this rank's rows of the output; all: every row, replicated on every rank.
                gr = g.chunk(world)[c.rank] if reduce == "scatter" else g
                loss = (y.float() * gr).sum()
                ranks.append((col, row, xs, y, loss))
        torch.autograd.backward([r[4] for r in ranks])
        for c in comms:
            c.synchronize()
        torch.cuda.synchronize()
        for c, (col, row, xs, y, _) in zip(comms, ranks):
            rows = y_ref.chunk(world)[c.rank] if reduce == "scatter" else y_ref
            assert y.shape == rows.shape
            assert rel_error(y, rows) <= 1e-2, f"rank {c.rank}: output"
            assert rel_error(xs.grad, xr.grad.chunk(world)[c.rank]) <= 1e-2, f"rank {c.rank}: input gradient"
            assert rel_error(col.weight.grad, w1r.grad.chunk(world, 0)[c.rank]) <= 1e-2, f"rank {c.rank}: W1 gradient"
            assert rel_error(row.weight.grad, w2r.grad.chunk(world, 1)[c.rank]) <= 1e-2, f"rank {c.rank}: W2 gradient"
    finally:
        comms[0].close()


def test_layers_check_their_arguments(torch):
    import weft
    import weft.torch as wt
    from support import need_gpus

    need_gpus(1)
    (c,) = wt.local([0], heap_bytes=64 << 20)
    try:
        with pytest.raises(weft.ArgumentError, match="'reduce' must be 'scatter' or 'all'"):
            wt.RowParallelLinear(8, 8, c, reduce="sum")
        with pytest.raises(weft.ArgumentError, match=r"must be the full \[16, 8\] matrix"):
            wt.ColumnParallelLinear(8, 16, c, weight=torch.zeros(8, 8))
        with pytest.raises(weft.ArgumentError, match="must be a weft.torch.Communicator"):
            wt.ColumnParallelLinear(8, 16, "comm")
        with pytest.raises(weft.ArgumentError, match="'tokens' must be a positive int"):
            wt.warm_up([wt.ColumnParallelLinear(8, 16, c)], 0)
    finally:
        c.close()
