// route.cuh — top-k routing of one token by one warp (warp::route_token), used by the routing
// kernel (route.cu) and by the dispatch kernel when it routes its own tokens (dispatch.cu).
//
// Contract: ids[j], j < k, are the k largest logits of the token in descending order, ties to the
// lower expert id (a total order, so the result is deterministic and the same on every GPU); a NaN
// logit ranks as -inf. weights[j] = exp(l[ids[j]] - max) / sum over all experts of exp(l - max), in
// fp32; with `normalize`, divided by their sum over j (in order j = 0 .. k-1). Ranking by logit and
// not by probability is the same order (softmax is monotonic) without the ties that rounding of the
// probabilities could make.
//
// Cost: k + 2 passes over the token's E logits (L1-resident after the first) by 32 lanes, k warp
// argmax reductions of 5 shuffles: ~2 us for E = 256, k = 8, far below the dispatch's own latency.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "moe/moe.h"

namespace weft::moe::warp {

__device__ __forceinline__ float logit_at(const void* logits, int dtype, int64_t i) {
  const float v = dtype == WEFT_BF16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(logits)[i])
                                     : static_cast<const float*>(logits)[i];
  return isnan(v) ? -INFINITY : v;
}

// (v, e) ranks above (bv, be): larger value, or equal value and lower id.
__device__ __forceinline__ bool ranks_above(float v, int e, float bv, int be) {
  return v > bv || (v == bv && e < be);
}

// Called by all 32 lanes of a warp. E <= kMaxExperts (so <= 32 ids per lane: one taken-mask word).
__device__ inline void route_token(const void* logits, int dtype, int64_t token, int experts, int topk,
                                   bool normalize, int32_t* ids, float* weights) {
  const int lane = threadIdx.x & 31;
  const int64_t row = token * experts;
  float m = -INFINITY;
  for (int e = lane; e < experts; e += 32) m = fmaxf(m, logit_at(logits, dtype, row + e));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  float sum = 0.0f;
  for (int e = lane; e < experts; e += 32) sum += expf(logit_at(logits, dtype, row + e) - m);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);

  uint32_t taken = 0;  // bit i: expert lane + 32 i is already chosen
  float chosen = 0.0f;
  for (int j = 0; j < topk; ++j) {
    float bv = -INFINITY;
    int be = 0x7fffffff;
    for (int i = 0, e = lane; e < experts; ++i, e += 32) {
      if (taken & (1u << i)) continue;
      const float v = logit_at(logits, dtype, row + e);
      if (ranks_above(v, e, bv, be)) {
        bv = v;
        be = e;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
      const int oe = __shfl_xor_sync(0xffffffffu, be, off);
      if (ranks_above(ov, oe, bv, be)) {
        bv = ov;
        be = oe;
      }
    }
    // Every lane holds the same (bv, be): the butterfly reduces a total order.
    if ((be & 31) == lane) taken |= 1u << (be >> 5);
    const float p = expf(bv - m) / sum;
    chosen += p;
    if (lane == (j & 31)) {
      ids[token * topk + j] = be;
      weights[token * topk + j] = p;
    }
  }
  if (normalize) {
    // Each lane rescales the weights it wrote itself (program order: no fence needed).
    for (int j = lane; j < topk; j += 32) weights[token * topk + j] /= chosen;
  }
}

}  // namespace weft::moe::warp
