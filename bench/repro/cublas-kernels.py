# cublas-kernels.py: which cuBLAS kernels torch's matmul runs at our local GEMM shapes,
# for ncu to name (grid, block, registers, shared memory, duration):
#   ncu --section LaunchStats --section SpeedOfLight --csv python3 bench/repro/cublas-kernels.py
# (What it found: cuBLAS uses 128 x 256 and 128 x 320 tiles in 2-CTA clusters there;
# bench/DECISIONS.md, "Tile-order bands are √(ctas × tile_n / 128) tile rows high".)
import torch
shapes = [(8192, 4096, 8192), (8192, 8192, 4096), (4096, 14336, 2048), (512, 8192, 4096), (8192, 8192, 8192)]
for m, n, k in shapes:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
