"""torch.compile(fullgraph=True) traces weft's custom ops without graph breaks (their fake
implementations give the shapes) and the compiled function gives eager's results."""
import pytest

from support import rel_error


@pytest.fixture(scope="module")
def setup():
    from support import need_torch

    torch = need_torch()
    torch.backends.cuda.matmul.allow_tf32 = False
    import weft.torch as wt

    (comm,) = wt.local([0], heap_bytes=256 << 20)
    yield torch, wt, comm
    comm.close()


def test_a_compiled_function_calling_weft_ops_has_no_graph_break(setup):
    torch, wt, comm = setup
    from torch_support import rand

    def step(x, w):
        y = torch.ops.weft.all_gather_gemm(x, w.t(), comm.id, False)[0]
        return torch.relu(wt.all_reduce(y, comm)) * 2

    explain = torch._dynamo.explain(step)(rand((256, 512), 1), rand((384, 512), 2))
    assert explain.graph_break_count == 0, explain.break_reasons
    compiled = torch.compile(step, fullgraph=True)
    for seed in range(3):
        x, w = rand((256, 512), 10 + seed), rand((384, 512), 20 + seed)
        got = compiled(x, w)
        ref = torch.relu(x.float() @ w.float().t()) * 2
        assert got.shape == (256, 384) and rel_error(got, ref) <= 1e-2
        assert torch.equal(got, step(x, w))


def test_fake_implementations_give_the_real_shapes(setup):
    torch, wt, comm = setup
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(64, 128, dtype=torch.bfloat16, device="cuda:0")
        b = torch.empty(128, 96, dtype=torch.bfloat16, device="cuda:0")
        out, gathered = torch.ops.weft.all_gather_gemm(a, b, comm.id, True)
        assert (tuple(out.shape), tuple(gathered.shape)) == ((64, 96), (64, 128))
        assert tuple(torch.ops.weft.gemm_reduce_scatter(a, b, comm.id).shape) == (64, 96)
        assert tuple(torch.ops.weft.all_gather(a, comm.id).shape) == (64, 128)
