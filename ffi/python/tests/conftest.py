"""Test set-up shared by every test: the package under test is this checkout's ffi/python (installed
or not), and the environment is safe for the shared GPU hosts before anything loads NCCL or JAX."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# NVLink multicast must never be touched on the shared GPU hosts (as test/support/preload.ts does).
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
# JAX takes 75% of GPU memory at its first use unless told not to; torch shares this process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Several tests drive two ranks from this one process (weft.torch.local): rank 0's fused kernel waits
# for rank 1's, which is launched after rank 0's torch ops. CUDA loads a kernel at its first launch,
# and that load waits for the running kernels: a torch kernel's first launch between the two ranks'
# launches would wait for rank 0's kernel for good (README, "Several ranks can share one GPU").
# Loading every kernel when CUDA starts takes that wait away, at a slower start.
# Set, not defaulted: a host environment that sets LAZY would otherwise keep it. On one H200 the
# world-2 layer test still timed out in its backward with EAGER, rank 1's all_gather_gemm waiting
# while the autograd thread sat in a matmul between the ranks' fused ops, under torch's native
# allocator and cudaMallocAsync alike (bench/repro/python-stall.sh). CUDA_MODULE_LOADING does not
# cover libraries loaded through cuLibraryLoad, as cuBLAS's kernels are: their data loads lazily
# unless CUDA_MODULE_DATA_LOADING says EAGER too (CUDA programming guide, "Lazy Loading"), so both.
os.environ["CUDA_MODULE_LOADING"] = "EAGER"
os.environ["CUDA_MODULE_DATA_LOADING"] = "EAGER"
