// reduce.cuh — block-wide reductions for CTAs whose size is a multiple of 32 (up to 1024). The
// order of every sum is fixed by the thread layout (a butterfly inside each warp, then the warps'
// partials in warp order), so the same inputs give the same bits on every run: sampling depends on
// that. Every thread of the block must call, and every thread gets the result.
#pragma once

#include <cstdint>

namespace weft::nn::block {

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

struct Sum {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// `scratch` holds 32 values; the trailing barrier lets the caller reuse it right away.
template <typename T, typename Op>
__device__ __forceinline__ T reduce(T v, Op op, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w]);
  __syncthreads();
  return r;
}

template <typename T>
__device__ __forceinline__ T sum(T v, T* scratch) { return reduce(v, Sum{}, scratch); }
__device__ __forceinline__ float max(float v, float* scratch) { return reduce(v, Max{}, scratch); }

// Exclusive prefix sum over the block in thread order; `total` gets the block's sum. Rounding makes
// thread t's prefix plus its own value differ from thread t+1's prefix in the last bit: callers that
// search the ranges must allow for a gap or an overlap there.
__device__ __forceinline__ float exclusive_scan(float v, float* scratch, float* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float t = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += t;
  }
  float excl = __shfl_up_sync(0xffffffffu, inc, 1);
  if (lane == 0) excl = 0.0f;
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  float before = 0.0f, all = 0.0f;
  for (int w = 0; w < warps; ++w) {
    if (w < warp) before += scratch[w];
    all += scratch[w];
  }
  __syncthreads();
  *total = all;
  return before + excl;
}

}  // namespace weft::nn::block
