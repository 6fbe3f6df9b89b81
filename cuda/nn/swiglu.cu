// swiglu.cu — out[r, j] = silu(gate) * up with gate = x[r, j], up = x[r, dim + j]: the MLP's
// activation between its stacked gate/up GEMM and its down GEMM.
//
// Napkin: 64 decode rows of a 14336 / 2 shard read 1.8 MiB and write 0.9 MiB: under 1 us at
// 3.3 TB/s (launch-bound); a 2048-token prefill at that shard moves 84 MiB, ~27 us.
#include "nn.h"
#include "vec.cuh"

namespace weft::nn {

namespace {

__global__ void swiglu_kernel(const bf16* x, bf16* out, int64_t rows, int64_t dim) {
  const int64_t per_row = dim / kVec, total = rows * per_row;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = v / per_row, c = (v % per_row) * kVec;
    float g[kVec], u[kVec];
    load8(x + r * 2 * dim + c, g);
    load8(x + r * 2 * dim + dim + c, u);
#pragma unroll
    for (int i = 0; i < kVec; ++i) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    store8(out + r * dim + c, g);
  }
}

}  // namespace

cudaError_t swiglu(const WeftSwigluParams& p) {
  constexpr int kThreads = 256;
  const uint64_t vectors = uint64_t(p.rows) * uint64_t(p.dim / kVec);
  swiglu_kernel<<<grid_for(vectors, kThreads), kThreads, 0, reinterpret_cast<cudaStream_t>(p.stream)>>>(
      reinterpret_cast<const bf16*>(p.x), reinterpret_cast<bf16*>(p.out), p.rows, p.dim);
  return cudaGetLastError();
}

}  // namespace weft::nn
