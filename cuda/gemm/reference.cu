// reference.cu — a deliberately simple GEMM for checking the engine: CUDA-core fp32 FMAs, shared
// memory tiles filled by ordinary guarded loads, no tensor cores, no TMA, no swizzles. Its only
// optimisation is register tiling (each thread owns 8 x 8 outputs), so that the largest test shape
// (3.9 TFLOP) takes a fraction of a second of device time.
#include <cuda_bf16.h>

#include "gemm.h"

namespace weft::gemm {

namespace {

constexpr int kRefTile = 128;  // C tile per block, both dimensions
constexpr int kRefK = 8;       // K per shared-memory step
constexpr int kRefThreads = 256;
constexpr int kRefPerThread = 8;  // 16 x 16 threads x 8 x 8 outputs

__global__ void __launch_bounds__(kRefThreads, 2) reference_kernel(const __nv_bfloat16* __restrict__ a,
                                                                 const __nv_bfloat16* __restrict__ b,
                                                                 float* __restrict__ c, int64_t m, int64_t n,
                                                                 int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                                                                 bool b_n_major) {
  __shared__ float as[kRefK][kRefTile];  // as[kk][row]
  __shared__ float bs[kRefK][kRefTile];  // bs[kk][col]
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int64_t row0 = int64_t(blockIdx.y) * kRefTile;
  const int64_t col0 = int64_t(blockIdx.x) * kRefTile;

  float acc[kRefPerThread][kRefPerThread] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kRefK) {
    // 128 x 8 of A and 8 x 128 of B, four elements per thread each; out of range reads as 0.
    for (int i = 0; i < 4; ++i) {
      const int idx = tid + i * kRefThreads;
      const int r = idx / kRefK, kk = idx % kRefK;
      const int64_t gr = row0 + r, gk = k0 + kk;
      as[kk][r] = (gr < m && gk < k) ? __bfloat162float(a[gr * lda + gk]) : 0.0f;
      if (b_n_major) {  // B is [K, N]: consecutive threads read consecutive columns
        const int kb = idx / kRefTile, cc = idx % kRefTile;
        const int64_t gc = col0 + cc, gkb = k0 + kb;
        bs[kb][cc] = (gc < n && gkb < k) ? __bfloat162float(b[gkb * ldb + gc]) : 0.0f;
      } else {  // B is [N, K]
        const int cc = idx / kRefK, kb = idx % kRefK;
        const int64_t gc = col0 + cc, gkb = k0 + kb;
        bs[kb][cc] = (gc < n && gkb < k) ? __bfloat162float(b[gc * ldb + gkb]) : 0.0f;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kRefK; ++kk) {
      float av[kRefPerThread], bv[kRefPerThread];
#pragma unroll
      for (int i = 0; i < kRefPerThread; ++i) av[i] = as[kk][ty * kRefPerThread + i];
#pragma unroll
      for (int j = 0; j < kRefPerThread; ++j) bv[j] = bs[kk][tx * kRefPerThread + j];
#pragma unroll
      for (int i = 0; i < kRefPerThread; ++i)
#pragma unroll
        for (int j = 0; j < kRefPerThread; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < kRefPerThread; ++i) {
    const int64_t gr = row0 + ty * kRefPerThread + i;
    if (gr >= m) continue;
    for (int j = 0; j < kRefPerThread; ++j) {
      const int64_t gc = col0 + tx * kRefPerThread + j;
      if (gc < n) c[gr * ldc + gc] = acc[i][j];
    }
  }
}

}  // namespace

cudaError_t reference_gemm(const void* a, const void* b, float* c, int64_t m, int64_t n, int64_t k, int64_t lda,
                           int64_t ldb, int64_t ldc, bool b_n_major, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + kRefTile - 1) / kRefTile),
                  static_cast<unsigned>((m + kRefTile - 1) / kRefTile));
  reference_kernel<<<grid, kRefThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(a),
                                                      static_cast<const __nv_bfloat16*>(b), c, m, n, k, lda, ldb,
                                                      ldc, b_n_major);
  return cudaGetLastError();
}

}  // namespace weft::gemm
