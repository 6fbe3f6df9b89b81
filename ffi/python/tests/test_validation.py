"""Bad arguments raise ArgumentError naming the argument and the rule, before anything crosses the
ABI; the symmetric heap is deterministic."""
import pytest

import weft
from weft import _tp
from weft._heap import HeapAllocator
from weft.comm import NativeComm
from support import gpu_count


def test_tensor_arguments_are_checked_first():
    with pytest.raises(weft.ArgumentError, match=r"'shape\[1\]' must be an integer in \[0,"):
        weft.Tensor.empty((2, -1), "f32")
    with pytest.raises(weft.ArgumentError, match="'dtype' must be one of bf16, f16, f32, i32, u8"):
        weft.Tensor.host((2,), "f64")
    with pytest.raises(weft.ArgumentError, match="at most 8 sizes"):
        weft.Tensor.host((1,) * 9, "u8")
    with pytest.raises(weft.ArgumentError, match="'ptr'"):
        weft.Tensor.wrap(0, (1,), "f32", weft.Device(weft.CPU, 0))
    with pytest.raises(weft.ArgumentError, match="'strides' has 1 entries but shape has 2"):
        weft.Tensor.wrap(4096, (2, 2), "f32", weft.Device(weft.CPU, 0), strides=(1,))


@pytest.mark.skipif(gpu_count() > 0, reason="checks the no-GPU path: this machine has a GPU")
def test_device_memory_without_a_gpu_is_a_device_error():
    with pytest.raises(weft.DeviceError, match="out of range"):
        weft.Tensor.empty((4,), "f32", device=0)


def test_communicator_arguments_are_checked_before_the_device():
    with pytest.raises(weft.ArgumentError, match="'world_size' must be an integer in \\[1, 32\\]"):
        NativeComm(device=0, rank=0, world_size=0)
    with pytest.raises(weft.ArgumentError, match="'rank' must be an integer in \\[0, 1\\]"):
        NativeComm(device=0, rank=2, world_size=2)
    with pytest.raises(weft.ArgumentError, match="'timeout_s'"):
        NativeComm(device=0, rank=0, world_size=1, timeout_s=0)
    with pytest.raises(weft.ArgumentError, match="'sm_budget'"):
        NativeComm(device=0, rank=0, world_size=1, sm_budget=-1)


@pytest.mark.skipif(gpu_count() > 0, reason="checks the no-GPU path: this machine has a GPU")
def test_a_communicator_needs_an_existing_device():
    with pytest.raises(weft.ArgumentError, match="'device' must be < 0"):
        NativeComm(device=0, rank=0, world_size=1)


def test_tp_problems_follow_the_ops_shapes():
    assert _tp.problem(_tp.ALL_GATHER_GEMM, 2, (64, 520), (520, 500), False).out_shape == (128, 500)
    rs = _tp.problem(_tp.GEMM_REDUCE_SCATTER, 2, (128, 260), (260, 1000), True)
    assert (rs.m, rs.n, rs.k, rs.b_nk, rs.out_shape) == (128, 1000, 260, True, (64, 1000))
    assert _tp.problem(_tp.GEMM_ALL_REDUCE, 4, (16, 64), (64, 32), False).out_shape == (16, 32)
    with pytest.raises(weft.ArgumentError, match="'b' has 33 rows but a has 32 columns"):
        _tp.problem(_tp.ALL_GATHER_GEMM, 2, (4, 32), (33, 16), False)
    with pytest.raises(weft.ArgumentError, match="127 rows, which do not split evenly over 2 ranks"):
        _tp.problem(_tp.GEMM_REDUCE_SCATTER, 2, (127, 32), (32, 16), False)
    with pytest.raises(weft.ArgumentError, match="'a' must be a matrix"):
        _tp.problem(_tp.GEMM_ALL_REDUCE, 2, (4, 4, 4), (4, 4), False)
    with pytest.raises(weft.ArgumentError, match="no empty dimension"):
        _tp.problem(_tp.GEMM_ALL_REDUCE, 2, (0, 4), (4, 4), False)


def test_the_heap_gives_every_rank_the_same_offsets_whatever_order_it_frees_in():
    a, b = HeapAllocator(1 << 20), HeapAllocator(1 << 20)
    for h, order in ((a, [0, 1, 2]), (b, [2, 0, 1])):
        offs = [h.alloc(n, "t") for n in (1000, 300, 5000)]
        assert offs == [0, 1024, 1536]  # 256-byte granules
        for i in order:
            h.free(offs[i], (1000, 300, 5000)[i])
        assert h.live == 0 and h.free_bytes == 1 << 20
    assert [a.alloc(n, "t") for n in (7, 70000, 1)] == [b.alloc(n, "t") for n in (7, 70000, 1)]


def test_a_full_heap_says_how_much_is_free():
    h = HeapAllocator(4096)
    h.alloc(4000, "Communicator.empty")
    with pytest.raises(weft.OutOfMemoryError, match=r"no free range of 512 bytes \(0 of 4096 bytes free.*heap_bytes"):
        h.alloc(300, "Communicator.empty")
