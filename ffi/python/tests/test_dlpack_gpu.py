"""Zero-copy DLPack round trips on a GPU with torch, JAX and CuPy, and the stream hand-over: a
producer's pending work is ordered before the consumer's stream (on the GPU, no host wait)."""
import struct


import weft
from support import need_module


def f32(t, n):
    return struct.unpack(f"{n}f", t.to_bytes()[: 4 * n])


def test_torch_reads_and_writes_weft_memory_and_back():
    from support import need_torch

    torch = need_torch()
    t = weft.Tensor.empty((4, 8), "f32")
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.ptr and x.shape == (4, 8) and x.dtype == torch.float32 and x.device.index == 0
    x.fill_(3)
    torch.cuda.synchronize()
    assert f32(t, 32) == (3.0,) * 32
    y = torch.arange(12, dtype=torch.bfloat16, device="cuda:0").reshape(3, 4)
    u = weft.from_dlpack(y)
    assert (u.ptr, u.shape, u.dtype) == (y.data_ptr(), (3, 4), "bf16")
    z = torch.from_dlpack(u)  # weft -> torch of a torch tensor: still the same memory
    assert z.data_ptr() == y.data_ptr() and torch.equal(z, y)


def test_a_producers_pending_work_is_ordered_before_the_consumer():
    from support import need_torch

    torch = need_torch()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.rand(2048, 2048, device="cuda:0")
        y = torch.zeros(1 << 20, device="cuda:0")
        for _ in range(20):  # a few ms of queued work on `side` before y holds its final value
            a = a @ a / 2048
        y += a.sum() * 0 + 7
        u = weft.from_dlpack(y)  # torch orders `side` before the legacy default stream weft reads on
    assert f32(u, 4) == (7.0,) * 4
    # weft -> torch: a weft tensor whose writer ran on `side` hands over to torch's current stream.
    t = weft.Tensor.empty((1 << 20,), "f32")
    with torch.cuda.stream(side):
        v = torch.from_dlpack(t)
        b = torch.rand(2048, 2048, device="cuda:0")
        for _ in range(20):
            b = b @ b / 2048
        v.copy_(b.sum() * 0 + torch.full_like(v, 5))
    t.stream = side.cuda_stream
    w = torch.from_dlpack(t)  # on the default stream: must see side's writes without a host wait
    assert w.sum().item() == 5.0 * (1 << 20)


def test_cupy_round_trips_zero_copy():
    cupy = need_module("cupy")
    t = weft.Tensor.empty((16,), "f32")
    c = cupy.from_dlpack(t)
    assert c.data.ptr == t.ptr
    c[:] = cupy.arange(16, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    assert f32(t, 16) == tuple(float(i) for i in range(16))
    src = cupy.arange(6, dtype=cupy.int32).reshape(2, 3)
    u = weft.from_dlpack(src)
    assert (u.ptr, u.shape, u.dtype) == (src.data.ptr, (2, 3), "i32")


JAX_CHECK = """
import struct, sys
import jax, jax.numpy as jnp
import weft

gpus = [d for d in jax.devices() if d.platform == "gpu"]
if not gpus:
    print(f"NO-GPU jax {jax.__version__} has no GPU backend here"); sys.exit(0)
x = jax.device_put(jnp.arange(32, dtype=jnp.float32), gpus[0])
x.block_until_ready()
u = weft.from_dlpack(x)
assert u.ptr == x.unsafe_buffer_pointer() and u.shape == (32,), (u, x.unsafe_buffer_pointer())
assert struct.unpack("32f", u.to_bytes()) == tuple(float(i) for i in range(32))
t = weft.Tensor.empty((8,), "f32")
t.write_bytes(struct.pack("8f", *range(8)))
try:
    y = jax.dlpack.from_dlpack(t)
except TypeError:  # an older JAX takes only capsules
    y = jax.dlpack.from_dlpack(t.__dlpack__())
assert y.unsafe_buffer_pointer() == t.ptr, "JAX copied the weft tensor"
assert [float(v) for v in y] == [float(i) for i in range(8)]
print("JAX-OK", jax.__version__)
"""


def test_jax_round_trips_zero_copy():
    # In its own process: JAX brings its own CUDA libraries and allocator, kept apart from torch's.
    import importlib.util

    from support import _gate, need_gpus, run_python

    need_gpus(1)
    _gate(importlib.util.find_spec("jax") is not None, "needs jax (not installed for this Python)")

    r = run_python(JAX_CHECK, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, timeout=300)
    _gate("NO-GPU" not in r.stdout, r.stdout.strip())
    assert r.returncode == 0 and "JAX-OK" in r.stdout, r.stdout + r.stderr
