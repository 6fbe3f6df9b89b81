// kv_cache.cu — the slotted KV cache: appending a step's keys and values, and the attention of each
// query row over its own slot.
//
// Cache layout: k_cache, v_cache [slots][max_seq][width], width = kv_heads x head_dim. A sequence
// owns one slot for its lifetime; its token at position p is row p. Slots make continuous batching
// cheap (a finished sequence frees its slot, a new one takes it, nothing moves) at the price of
// reserving max_seq rows per sequence.
#include <cmath>

#include "nn.h"
#include "reduce.cuh"
#include "vec.cuh"

namespace weft::nn {

namespace {

// ---- append -----------------------------------------------------------------------------------------
// Napkin: 64 decode rows of 8 kv heads x 128: 128 KiB of k and v read and written, launch-bound;
// a 2048-token prefill moves 8 MiB, ~3 us.
__global__ void kv_append_kernel(WeftKvAppendParams p) {
  const int64_t per_row = p.width / kVec, total = p.rows * per_row;
  const auto* slots = reinterpret_cast<const int32_t*>(p.slot_ids);
  const auto* positions = reinterpret_cast<const int32_t*>(p.positions);
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = v / per_row, c = (v % per_row) * kVec;
    const int32_t slot = slots[r], pos = positions[r];
    if (slot < 0 || slot >= p.slots || pos < 0 || pos >= p.max_seq) continue;
    const int64_t at = (int64_t(slot) * p.max_seq + pos) * p.width + c;
    copy8(reinterpret_cast<bf16*>(p.k_cache) + at, reinterpret_cast<const bf16*>(p.k) + r * p.src_stride + c);
    copy8(reinterpret_cast<bf16*>(p.v_cache) + at, reinterpret_cast<const bf16*>(p.v) + r * p.src_stride + c);
  }
}

// ---- attention ----------------------------------------------------------------------------------------
// One CTA per (query row, head), kThreads threads. Keys go tile by tile, kThreads keys per tile: each
// thread scores one key (its K row read as 16-byte vectors against q in shared memory), the tile's
// max and sum update the online softmax, then every thread accumulates kDimsPerThread output
// dimensions over the tile's V rows (row j read by all threads at once: coalesced). Simple, not fast:
// a decode row of 1000 cached positions reads 256 KiB of K and V per kv head; the attention engine
// (cuda/attention) is the fast path and is checked against this one.
constexpr int kThreads = 128;
constexpr int kMaxHeadDim = 256;
constexpr int kDimsPerThread = kMaxHeadDim / kThreads;

__global__ void __launch_bounds__(kThreads) cache_attention_kernel(WeftCacheAttentionParams p) {
  __shared__ float q[kMaxHeadDim];
  __shared__ float probs[kThreads];
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t head = blockIdx.y;
  const int64_t d = p.head_dim;
  const int32_t slot = reinterpret_cast<const int32_t*>(p.slot_ids)[row];
  const int32_t pos = reinterpret_cast<const int32_t*>(p.positions)[row];
  bf16* out = reinterpret_cast<bf16*>(p.out) + row * p.out_stride + head * d;
  if (slot < 0 || slot >= p.slots || pos < 0 || pos >= p.max_seq) {
    // Padding rows (slot < 0) read as zeros; a bad slot or position is loud.
    const float fill = slot < 0 ? 0.0f : NAN;
    for (int64_t i = threadIdx.x; i < d; i += kThreads) out[i] = __float2bfloat16_rn(fill);
    return;
  }
  const bf16* qrow = reinterpret_cast<const bf16*>(p.q) + row * p.q_stride + head * d;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) q[i] = __bfloat162float(qrow[i]) * p.scale;
  __syncthreads();

  const int64_t width = p.kv_heads * d;
  const int64_t kv_head = head / (p.heads / p.kv_heads);
  const int64_t base = int64_t(slot) * p.max_seq * width + kv_head * d;
  const bf16* kc = reinterpret_cast<const bf16*>(p.k_cache) + base;
  const bf16* vc = reinterpret_cast<const bf16*>(p.v_cache) + base;

  float m = -INFINITY, l = 0.0f;
  float acc[kDimsPerThread] = {};
  for (int64_t t0 = 0; t0 <= pos; t0 += kThreads) {
    const int64_t j = t0 + threadIdx.x;
    float s = -INFINITY;
    if (j <= pos) {
      s = 0.0f;
      const bf16* krow = kc + j * width;
      for (int64_t i = 0; i < d; i += kVec) {
        float k8[kVec];
        load8(krow + i, k8);
#pragma unroll
        for (int e = 0; e < kVec; ++e) s += q[i + e] * k8[e];
      }
    }
    const float m_new = fmaxf(m, block::max(s, scratch));  // finite: key t0 is always in range
    const float pj = j <= pos ? expf(s - m_new) : 0.0f;
    probs[threadIdx.x] = pj;
    const float correction = expf(m - m_new);  // 0 on the first tile (m = -inf)
    l = l * correction + block::sum(pj, scratch);  // its barriers also publish probs[]
#pragma unroll
    for (int e = 0; e < kDimsPerThread; ++e) acc[e] *= correction;
    const int64_t n = (pos + 1 - t0) < kThreads ? (pos + 1 - t0) : kThreads;
    for (int64_t jj = 0; jj < n; ++jj) {
      const bf16* vrow = vc + (t0 + jj) * width;
      const float pr = probs[jj];
#pragma unroll
      for (int e = 0; e < kDimsPerThread; ++e) {
        const int64_t i = threadIdx.x + int64_t(e) * kThreads;
        if (i < d) acc[e] += pr * __bfloat162float(vrow[i]);
      }
    }
    __syncthreads();  // probs[] is rewritten by the next tile
    m = m_new;
  }
#pragma unroll
  for (int e = 0; e < kDimsPerThread; ++e) {
    const int64_t i = threadIdx.x + int64_t(e) * kThreads;
    if (i < d) out[i] = __float2bfloat16_rn(acc[e] / l);
  }
}

}  // namespace

cudaError_t kv_append(const WeftKvAppendParams& p) {
  constexpr int kAppendThreads = 256;
  const uint64_t vectors = uint64_t(p.rows) * uint64_t(p.width / kVec);
  kv_append_kernel<<<grid_for(vectors, kAppendThreads), kAppendThreads, 0, reinterpret_cast<cudaStream_t>(p.stream)>>>(p);
  return cudaGetLastError();
}

cudaError_t cache_attention(const WeftCacheAttentionParams& p) {
  const dim3 grid(unsigned(p.rows), unsigned(p.heads));
  cache_attention_kernel<<<grid, kThreads, 0, reinterpret_cast<cudaStream_t>(p.stream)>>>(p);
  return cudaGetLastError();
}

}  // namespace weft::nn
