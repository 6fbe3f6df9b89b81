"""Every weft op on torch tensors against torch's own result (an fp32 reference from the same bf16
inputs), at world 1 and at world 2 with both ranks in this process sharing GPU 0; back to back
with no reset; and what a rank that does not take part does to the others (a bounded error)."""
import pytest

from support import rel_error


@pytest.fixture(scope="module")
def torch():
    from support import need_torch

    t = need_torch()
    t.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference is fp32
    return t


@pytest.fixture(scope="module", params=[1, 2], ids=["world1", "world2-one-gpu"])
def comms(request, torch):
    import weft.torch as wt

    cs = wt.local([0] * request.param, heap_bytes=1 << 30, timeout_s=20)
    yield cs
    cs[0].close()


@pytest.fixture
def tp(comms, torch):
    """The module's communicators, with every plan of the test freed after it (on every rank at
    the same point, as clear_cache() requires): plans hold weights, buffers and side streams."""
    yield comms
    for c in comms:
        c.synchronize()
    torch.cuda.synchronize()
    for c in comms:
        c.clear_cache()


def tolerance(dtype, torch):
    return 1e-2 if dtype == torch.bfloat16 else 1e-5


# ---- collectives ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1000, 1 << 20])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_all_reduce(comms, torch, dtype, n):
    from torch_support import per_rank, rand

    dt = getattr(torch, dtype)
    xs = per_rank(comms, lambda r, c: rand((n,), 100 + r, dt))
    outs = per_rank(comms, lambda r, c: c.all_reduce(xs[r]))
    ref = sum(x.float() for x in xs)
    for o in outs:
        assert o.dtype == dt and o.shape == (n,)
        assert rel_error(o, ref) <= tolerance(dt, torch)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_all_gather(comms, torch, dtype):
    from torch_support import per_rank, rand

    dt = getattr(torch, dtype)
    xs = per_rank(comms, lambda r, c: rand((37, 24), 200 + r, dt))
    outs = per_rank(comms, lambda r, c: c.all_gather(xs[r]))
    ref = torch.cat(xs)
    for o in outs:
        assert torch.equal(o, ref)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_reduce_scatter(comms, torch, dtype):
    from torch_support import per_rank, rand

    dt, w = getattr(torch, dtype), len(comms)
    xs = per_rank(comms, lambda r, c: rand((w * 40, 33), 300 + r, dt))
    outs = per_rank(comms, lambda r, c: c.reduce_scatter(xs[r]))
    ref = sum(x.float() for x in xs).chunk(w)
    for r, o in enumerate(outs):
        assert o.shape == (40, 33) and rel_error(o, ref[r]) <= tolerance(dt, torch)


def test_symmetric_tensors_are_used_in_place(comms, torch):
    from torch_support import per_rank

    xs = per_rank(comms, lambda r, c: c.empty((4096,), torch.float32).fill_(r + 1))
    assert all(c.is_symmetric(x) for c, x in zip(comms, xs))
    outs = per_rank(comms, lambda r, c: c.all_reduce(xs[r]))
    total = sum(range(1, len(comms) + 1))
    assert all(torch.equal(o, torch.full_like(o, total)) for o in outs)


# ---- fused tensor-parallel GEMMs -------------------------------------------------------------------

SHAPES = [(128, 256, 384), (72, 264, 200), (1024, 4096, 2048)]  # (rows per rank, K, N): whole tiles, tails, large


def weights(torch, k, n, seed, nk):
    """The logical [k, n] operand, row-major or as W.t() of a row-major [n, k]."""
    from torch_support import rand

    return rand((n, k), seed).t() if nk else rand((k, n), seed)


@pytest.mark.parametrize("nk", [False, True], ids=["b-kn", "b-nk"])
@pytest.mark.parametrize("m, k, n", SHAPES)
def test_all_gather_gemm(tp, torch, m, k, n, nk):
    comms = tp
    from torch_support import per_rank, rand

    a = per_rank(comms, lambda r, c: rand((m, k), 400 + r))
    b = per_rank(comms, lambda r, c: weights(torch, k, n, 410 + r, nk))
    outs = per_rank(comms, lambda r, c: c.all_gather_gemm(a[r], b[r], return_gathered=True))
    full = torch.cat(a)
    for r, (out, gathered) in enumerate(outs):
        assert torch.equal(gathered, full)
        assert out.shape == (len(comms) * m, n)
        assert rel_error(out, full.float() @ b[r].float()) <= 1e-2


@pytest.mark.parametrize("nk", [False, True], ids=["b-kn", "b-nk"])
@pytest.mark.parametrize("m, k, n", SHAPES)
def test_gemm_reduce_scatter(tp, torch, m, k, n, nk):
    comms = tp
    from torch_support import per_rank, rand

    w = len(comms)
    a = per_rank(comms, lambda r, c: rand((w * m, k), 500 + r))
    b = per_rank(comms, lambda r, c: weights(torch, k, n, 510 + r, nk))
    outs = per_rank(comms, lambda r, c: c.gemm_reduce_scatter(a[r], b[r]))
    ref = sum(x.float() @ y.float() for x, y in zip(a, b)).chunk(w)
    for r, out in enumerate(outs):
        assert out.shape == (m, n) and rel_error(out, ref[r]) <= 1e-2


@pytest.mark.parametrize("nk", [False, True], ids=["b-kn", "b-nk"])
@pytest.mark.parametrize("m, k, n", SHAPES + [(16, 512, 1000)])  # and a decode size
def test_gemm_all_reduce(tp, torch, m, k, n, nk):
    comms = tp
    from torch_support import per_rank, rand

    a = per_rank(comms, lambda r, c: rand((m, k), 600 + r))
    b = per_rank(comms, lambda r, c: weights(torch, k, n, 610 + r, nk))
    outs = per_rank(comms, lambda r, c: c.gemm_all_reduce(a[r], b[r]))
    ref = sum(x.float() @ y.float() for x, y in zip(a, b))
    for out in outs:
        assert out.shape == (m, n) and rel_error(out, ref) <= 1e-2


def test_back_to_back_runs_with_fresh_inputs_and_no_reset(tp, torch):
    """100 launches of each op's cached plan, all queued before any is checked."""
    comms = tp
    from torch_support import per_rank, rand

    w, steps, m, k, n = len(comms), 100, 128, 256, 256
    b = per_rank(comms, lambda r, c: weights(torch, k, n, 700 + r, True))
    a = per_rank(comms, lambda r, c: [rand((w * m, k), 10_000 + 100 * i + r) for i in range(steps)])

    def run(r, c):
        return [(c.all_gather_gemm(a[r][i].chunk(w)[r], b[r]), c.gemm_reduce_scatter(a[r][i], b[r]),
                 c.all_reduce(a[r][i])) for i in range(steps)]

    outs = per_rank(comms, run)
    for i in range(steps):
        full = torch.cat([a[q][i].chunk(w)[q] for q in range(w)])
        partial = sum(a[q][i].float() @ b[q].float() for q in range(w))
        summed = sum(a[q][i].float() for q in range(w))
        for r in range(w):
            ag, rs, ar = outs[r][i]
            assert rel_error(ag, full.float() @ b[r].float()) <= 1e-2, f"all_gather_gemm, launch {i}, rank {r}"
            assert rel_error(rs, partial.chunk(w)[r]) <= 1e-2, f"gemm_reduce_scatter, launch {i}, rank {r}"
            assert rel_error(ar, summed) <= 1e-2, f"all_reduce, launch {i}, rank {r}"
    assert len(comms[0].plan_choices()) >= 2  # one plan per op, reused 100 times


def test_arguments_are_checked_before_any_launch(comms, torch):
    c = comms[0]
    with c.use():
        x = torch.zeros(8, 8, dtype=torch.bfloat16, device="cuda:0")
        import weft

        with pytest.raises(weft.ArgumentError, match="'b' has 9 rows but a has 8 columns"):
            c.all_gather_gemm(x, torch.zeros(9, 8, dtype=torch.bfloat16, device="cuda:0"))
        with pytest.raises(weft.ArgumentError, match="'a' must be bf16"):
            c.gemm_all_reduce(x.float(), x)
        with pytest.raises(weft.ArgumentError, match="row-major \\[K, N\\] or the transpose"):
            c.gemm_all_reduce(x, torch.zeros(8, 16, dtype=torch.bfloat16, device="cuda:0")[:, ::2])
        with pytest.raises(weft.ArgumentError, match="'x' must be bf16 or f16 or f32"):
            c.all_reduce(torch.zeros(4, dtype=torch.int32, device="cuda:0"))
        with pytest.raises(weft.ArgumentError, match="is on cpu"):
            c.all_reduce(torch.zeros(4))


def test_a_rank_that_does_not_take_part_gives_a_bounded_error(torch):
    """Ranks sharing a GPU must not share a stream (refused before the launch); the rank that did
    launch times out in its timeout_s and says which peer it waited for."""
    import weft
    import weft.torch as wt
    from support import need_gpus

    need_gpus(1)
    cs = wt.local([0, 0], heap_bytes=64 << 20, timeout_s=1)
    try:
        x = torch.ones(1024, device="cuda:0")
        cs[0].all_reduce(x)  # on the default stream, and rank 1 never joins
        with pytest.raises(weft.ArgumentError, match="is the stream rank 0 ran on"):
            cs[1].all_reduce(x)
        with pytest.raises(weft.TimeoutError, match="rank 0 waited 1 s for rank 1"):
            cs[0].synchronize()
    finally:
        cs[0].close()
