// reference.cu — deliberately simple references for checking the MoE ops (weft.h, "Test support"):
// one thread per token for the routing, plain row copies, plain fp32 loops for the weighted sums,
// a CUDA-core fp32 GEMM over gathered rows, and SwiGLU. Nothing here shares code with the kernels
// it checks.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "moe/moe.h"

namespace weft::moe {

namespace {

__device__ __forceinline__ float load(const void* p, int dtype, int64_t i) {
  return dtype == WEFT_BF16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<const float*>(p)[i];
}

__device__ __forceinline__ void store(void* p, int dtype, int64_t i, float v) {
  if (dtype == WEFT_BF16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else static_cast<float*>(p)[i] = v;
}

__global__ void route_reference_kernel(const void* logits, int dtype, int64_t tokens, int experts, int topk,
                                       bool normalize, int32_t* ids, float* weights) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  auto logit = [&](int e) {
    const float v = load(logits, dtype, t * experts + e);
    return isnan(v) ? -INFINITY : v;
  };
  float m = -INFINITY;
  for (int e = 0; e < experts; ++e) m = fmaxf(m, logit(e));
  float sum = 0.0f;
  for (int e = 0; e < experts; ++e) sum += expf(logit(e) - m);
  // k rounds of "the largest logit not chosen yet, the lowest id among equals" (O(k E), simple).
  float chosen = 0.0f;
  for (int j = 0; j < topk; ++j) {
    int best = -1;
    for (int e = 0; e < experts; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || ids[t * topk + i] == e;
      if (taken) continue;
      if (best < 0 || logit(e) > logit(best)) best = e;
    }
    ids[t * topk + j] = best;
    weights[t * topk + j] = expf(logit(best) - m) / sum;
    chosen += weights[t * topk + j];
  }
  if (normalize)
    for (int j = 0; j < topk; ++j) weights[t * topk + j] /= chosen;
}

__global__ void gather_reference_kernel(const __nv_bfloat16* src, int64_t src_rows, int64_t cols, const int32_t* index,
                                        int64_t rows, __nv_bfloat16* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const int64_t from = index[r];
    out[i] = from >= 0 && from < src_rows ? src[from * cols + c] : __float2bfloat16_rn(NAN);
  }
}

__global__ void combine_reference_kernel(const void* rows, int dtype, int64_t nrows, int64_t hidden,
                                         const int32_t* index, const float* weights, int64_t tokens, int topk,
                                         float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < tokens * hidden; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / hidden, h = i % hidden;
    float acc = 0.0f;
    for (int j = 0; j < topk; ++j) {
      const int64_t r = index[t * topk + j];
      acc += r >= 0 && r < nrows ? weights[t * topk + j] * load(rows, dtype, r * hidden + h) : NAN;
    }
    out[i] = acc;
  }
}

// 64 x 64 tiles of C, 16 x 16 threads of 4 x 4 outputs, 16-wide K steps through shared memory.
constexpr int kTile = 64, kStepK = 16, kPer = 4;

__global__ void __launch_bounds__(256) rows_gemm_reference_kernel(const void* a, int a_dtype, int64_t lda,
                                                                  const int32_t* a_index, const __nv_bfloat16* b,
                                                                  int64_t ldb, bool b_nk, float* c, int64_t ldc,
                                                                  const int32_t* c_index, int64_t m, int64_t n,
                                                                  int64_t k) {
  __shared__ float as[kStepK][kTile];
  __shared__ float bs[kStepK][kTile];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t row0 = int64_t(blockIdx.y) * kTile, col0 = int64_t(blockIdx.x) * kTile;
  float acc[kPer][kPer] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kStepK) {
    for (int idx = tid; idx < kTile * kStepK; idx += 256) {
      const int r = idx / kStepK, kk = idx % kStepK;
      const int64_t gr = row0 + r, gk = k0 + kk;
      float v = 0.0f;
      if (gr < m && gk < k) v = load(a, a_dtype, (a_index ? int64_t(a_index[gr]) : gr) * lda + gk);
      as[kk][r] = v;
      const int cc = b_nk ? idx / kStepK : idx % kTile, kb = b_nk ? idx % kStepK : idx / kTile;
      const int64_t gc = col0 + cc, gkb = k0 + kb;
      float w = 0.0f;
      if (gc < n && gkb < k) w = __bfloat162float(b_nk ? b[gc * ldb + gkb] : b[gkb * ldb + gc]);
      bs[kb][cc] = w;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kStepK; ++kk) {
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc[i][j] = fmaf(as[kk][ty * kPer + i], bs[kk][tx * kPer + j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < kPer; ++i) {
    const int64_t gr = row0 + ty * kPer + i;
    if (gr >= m) continue;
    const int64_t out_row = c_index ? int64_t(c_index[gr]) : gr;
    for (int j = 0; j < kPer; ++j) {
      const int64_t gc = col0 + tx * kPer + j;
      if (gc < n) c[out_row * ldc + gc] = acc[i][j];
    }
  }
}

__global__ void swiglu_reference_kernel(const void* h, int h_dtype, int64_t rows, int64_t inter, void* out,
                                        int out_dtype) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * inter; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / inter, c = i % inter;
    const float g = load(h, h_dtype, r * 2 * inter + c), u = load(h, h_dtype, r * 2 * inter + inter + c);
    store(out, out_dtype, i, g / (1.0f + expf(-g)) * u);
  }
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

}  // namespace

cudaError_t reference_route(const void* logits, int dtype, int64_t tokens, int experts, int topk, bool normalize,
                            int32_t* ids, float* weights, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  route_reference_kernel<<<unsigned((tokens + 127) / 128), 128, 0, stream>>>(logits, dtype, tokens, experts, topk,
                                                                            normalize, ids, weights);
  return cudaGetLastError();
}

cudaError_t reference_gather(const void* src, int64_t src_rows, int64_t cols, const int32_t* index, int64_t rows,
                             void* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  gather_reference_kernel<<<grid_for(rows * cols, 256), 256, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(src), src_rows, cols, index, rows, static_cast<__nv_bfloat16*>(out));
  return cudaGetLastError();
}

cudaError_t reference_combine(const void* rows, int dtype, int64_t nrows, int64_t hidden, const int32_t* index,
                              const float* weights, int64_t tokens, int topk, float* out, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  combine_reference_kernel<<<grid_for(tokens * hidden, 256), 256, 0, stream>>>(rows, dtype, nrows, hidden, index,
                                                                              weights, tokens, topk, out);
  return cudaGetLastError();
}

cudaError_t reference_rows_gemm(const void* a, int a_dtype, int64_t lda, const int32_t* a_index, const void* b,
                                int64_t ldb, bool b_nk, float* c, int64_t ldc, const int32_t* c_index, int64_t m,
                                int64_t n, int64_t k, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  const dim3 grid(unsigned((n + kTile - 1) / kTile), unsigned((m + kTile - 1) / kTile));
  rows_gemm_reference_kernel<<<grid, 256, 0, stream>>>(a, a_dtype, lda, a_index, static_cast<const __nv_bfloat16*>(b),
                                                      ldb, b_nk, c, ldc, c_index, m, n, k);
  return cudaGetLastError();
}

cudaError_t reference_swiglu(const void* h, int h_dtype, int64_t rows, int64_t inter, void* out, int out_dtype,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  swiglu_reference_kernel<<<grid_for(rows * inter, 256), 256, 0, stream>>>(h, h_dtype, rows, inter, out, out_dtype);
  return cudaGetLastError();
}

}  // namespace weft::moe
