"""jax_exit.py — which step of the JAX DLPack check makes its process crash at exit (GPU host).

Each variant runs in its own process (`python3 -X faulthandler -c ...`) and the exit status is
printed: the steps add up (jax alone, + import weft, + weft viewing JAX memory, + JAX viewing weft
memory), then the full check with the views dropped in either order before exit.
    python3 bench/repro/jax_exit.py
"""
import os
import subprocess
import sys

HEAD = """
import gc, struct, sys
import jax, jax.numpy as jnp
gpu = [d for d in jax.devices() if d.platform == "gpu"][0]
x = jax.device_put(jnp.arange(32, dtype=jnp.float32), gpu)
x.block_until_ready()
"""
WEFT = "import weft\n"
WEFT_VIEWS_JAX = "u = weft.from_dlpack(x)\nassert u.ptr == x.unsafe_buffer_pointer()\n"
JAX_VIEWS_WEFT = """t = weft.Tensor.empty((8,), "f32")
t.write_bytes(struct.pack("8f", *range(8)))
y = jax.dlpack.from_dlpack(t)
assert [float(v) for v in y] == [float(i) for i in range(8)]
"""
VARIANTS = {
    "jax alone": HEAD,
    "+ import weft": HEAD + WEFT,
    "+ weft views jax": HEAD + WEFT + WEFT_VIEWS_JAX,
    "+ jax views weft (the test)": HEAD + WEFT + WEFT_VIEWS_JAX + JAX_VIEWS_WEFT,
    "the test, jax's view dropped first": HEAD + WEFT + WEFT_VIEWS_JAX + JAX_VIEWS_WEFT + "del y\ngc.collect()\n",
    "the test, every view dropped": HEAD + WEFT + WEFT_VIEWS_JAX + JAX_VIEWS_WEFT + "del y, u, t, x\ngc.collect()\n",
    "the test, weft tensor dropped first": HEAD + WEFT + WEFT_VIEWS_JAX + JAX_VIEWS_WEFT + "del t\ngc.collect()\n",
    "jax views weft, no weft view of jax": HEAD + WEFT + JAX_VIEWS_WEFT,
}

env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
for name, code in VARIANTS.items():
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code + "print('END')\n"], capture_output=True,
                       text=True, env=env, timeout=180)
    tail = " | ".join((r.stderr or "").strip().splitlines()[-3:])
    print(f"{name:42s} rc {r.returncode:4d}  printed END: {'END' in r.stdout}  {tail[:300]}", flush=True)
