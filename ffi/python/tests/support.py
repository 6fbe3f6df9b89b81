"""Gating and checks for the tests. Without what a GPU test needs (GPUs, torch, JAX, CuPy) it is
skipped and says why. REQUIRE_GPU=N says the run expects N GPUs: what needs at most N GPUs (and the
modules a GPU test uses) then fails instead of skipping, so a GPU run cannot pass by skipping; what
needs more than N still skips, saying why (as test/support/gpu.ts does for the bun tests)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import weft

def _required_gpus() -> int:
    try:
        return max(0, int(os.environ.get("REQUIRE_GPU", "0")))
    except ValueError:
        return 0


REQUIRED_GPUS = _required_gpus()
REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "ffi" / "python"


def gpu_count() -> int:
    try:
        return weft.device_count()
    except weft.WeftError:
        return 0


def _gate(ok: bool, why: str, gpus: int = 1) -> None:
    if ok:
        return
    if 0 < gpus <= REQUIRED_GPUS:
        pytest.fail(f"REQUIRE_GPU={REQUIRED_GPUS} but {why}")
    pytest.skip(f"{why}; REQUIRE_GPU={max(gpus, 1)} turns this into a failure")


def need_gpus(n: int) -> None:
    have = gpu_count()
    _gate(have >= n, f"needs {n} GPU{'s' if n > 1 else ''}, this machine has {have}", n)


def need_module(name: str):
    """The module (torch, jax, cupy) for a GPU test, after the GPU gate."""
    need_gpus(1)
    try:
        module = __import__(name)
    except ImportError as e:
        _gate(False, f"needs {name} ({e})")
    return module


def need_torch():
    torch = need_module("torch")
    _gate(torch.cuda.is_available(), f"torch {torch.__version__} sees no CUDA device")
    return torch


def run_python(code: str, env: dict = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter (the library loads once per process) with ffi/python on the path.
    -X faulthandler: a child that dies of a signal (the JAX check's SIGABRT at exit) prints every
    thread's Python stack to its stderr, which the failing assertion shows."""
    full = {**os.environ, "PYTHONPATH": f"{PACKAGE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **(env or {})}
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, env=full,
                          timeout=timeout)


def have_cc() -> bool:
    return shutil.which("cc") is not None


def rel_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in fp64 over every element (torch tensors); NaN anywhere gives NaN."""
    d = (out.double() - ref.double()).norm()
    return float(d / ref.double().norm())
