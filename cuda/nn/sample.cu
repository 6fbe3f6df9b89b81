// sample.cu — next-token sampling on the GPU, one CTA of kSampleThreads per row (contract in
// weft.h, WeftSampleParams).
//
// The cuts are found without sorting: a logit's fp32 bits map to a uint32 key that orders like the
// value, and a binary search over the 2^32 keys (32 passes over the row, each a block count or sum)
// finds the largest key t with count(key >= t) >= top_k, then the largest t with the kept mass above
// t >= top_p x the kept mass. The draw is an inverse CDF in index order: each thread sums its own
// contiguous chunk, a block scan places the chunks, and the one chunk holding u x total walks to the
// token. Every sum runs in an order fixed by the thread layout, so a row's token depends only on its
// logits, settings, seed and counter.
//
// Cost: a 128k vocabulary row is 256 KiB of bf16, L2-resident after the first pass; 32 + 32 passes
// of ~1 us each at one CTA per row, rows in parallel: ~70 us for top-k + top-p, ~5 us for greedy.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "nn.h"
#include "primitives/completion.cuh"
#include "reduce.cuh"

namespace weft::nn {

namespace {

constexpr int kThreads = kSampleThreads;

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// u in [0, 1) with 24 random bits (exact in fp32). lib/ops/nn.ts has the same function for tests.
__device__ __forceinline__ float uniform(uint64_t seed, uint64_t counter) {
  return float(splitmix64(seed ^ splitmix64(counter ^ 0x5851f42d4c957f2dull)) >> 40) * (1.0f / 16777216.0f);
}

// Order-preserving map of a float's bits to uint32 (NaN sorts above +inf, and is excluded below).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct Row {
  const void* logits;
  bool bf16;
  int64_t vocab;
  __device__ __forceinline__ float at(int64_t i) const {
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(logits)[i]) : static_cast<const float*>(logits)[i];
  }
};

// Largest key t in [lo, 2^32) with measure(t) >= target, for a measure that falls as t grows and
// with measure(lo) >= target.
template <typename Measure>
__device__ uint32_t largest_key(uint32_t lo, float target, Measure measure) {
  uint64_t a = lo, b = 0xffffffffull;  // answer in [a, b]
  while (a < b) {
    const uint64_t mid = a + (b - a + 1) / 2;
    if (measure(uint32_t(mid)) >= target) a = mid;
    else b = mid - 1;
  }
  return uint32_t(a);
}

__global__ void __launch_bounds__(kThreads) sample_kernel(WeftSampleParams p, Completion completion) {
  __shared__ float scratch[32];
  __shared__ int32_t chosen;
  const int64_t r = blockIdx.x;
  const Row row{static_cast<const char*>(reinterpret_cast<const void*>(p.logits)) +
                    r * p.row_stride * (p.dtype == WEFT_BF16 ? 2 : 4),
                p.dtype == WEFT_BF16, p.vocab};
  const int64_t V = p.vocab;
  const float temperature = reinterpret_cast<const float*>(p.temperature)[r];
  const int32_t top_k = reinterpret_cast<const int32_t*>(p.top_k)[r];
  const float top_p = reinterpret_cast<const float*>(p.top_p)[r];
  const uint64_t seed = reinterpret_cast<const uint64_t*>(p.seed)[r];
  const uint64_t counter = reinterpret_cast<const uint64_t*>(p.counter)[r];

  // Pass 1: the max (NaN logits never win) and the lowest index holding it.
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) mx = fmaxf(mx, row.at(i));
  mx = block::max(mx, scratch);
  if (threadIdx.x == 0) chosen = int32_t(V);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < V; i += kThreads) {
    if (row.at(i) == mx) {
      atomicMin(&chosen, int32_t(i));
      break;  // later indices of this thread are larger
    }
  }
  // log-sum-exp at temperature 1, for the logprob.
  float z = 0.0f;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) {
    const float x = row.at(i);
    if (!isnan(x)) z += expf(x - mx);
  }
  z = block::sum(z, scratch);  // its barriers also publish `chosen`
  const int32_t argmax = chosen;

  // No finite maximum (every logit NaN or -inf, or one +inf): no distribution to draw from; the
  // first maximum if there is one, else -1. A temperature or top_p that is not > 0 means greedy.
  int32_t token = argmax < V ? argmax : -1;
  if (temperature > 0.0f && top_p > 0.0f && isfinite(mx)) {
    const float inv_t = 1.0f / temperature;
    auto weight = [&](float x) { return expf((x - mx) * inv_t); };
    // top-k: the largest key that at least k logits reach (ties at the cut all stay).
    uint32_t cut = 0;
    if (top_k > 0 && top_k < V) {
      cut = largest_key(0u, float(top_k), [&](uint32_t t) {
        float n = 0.0f;
        for (int64_t i = threadIdx.x; i < V; i += kThreads) {
          const float x = row.at(i);
          n += (!isnan(x) && order_key(x) >= t) ? 1.0f : 0.0f;
        }
        return block::sum(n, scratch);
      });
    }
    auto mass_above = [&](uint32_t t) {
      float s = 0.0f;
      for (int64_t i = threadIdx.x; i < V; i += kThreads) {
        const float x = row.at(i);
        if (!isnan(x) && order_key(x) >= t) s += weight(x);
      }
      return block::sum(s, scratch);
    };
    // top-p: the largest key above which the kept mass still reaches top_p of it.
    if (top_p < 1.0f) cut = largest_key(cut, top_p * mass_above(cut), mass_above);

    // Inverse CDF in index order over the kept logits.
    const int64_t chunk = (V + kThreads - 1) / kThreads;
    const int64_t begin = threadIdx.x * chunk, end = begin + chunk < V ? begin + chunk : V;
    float mine = 0.0f;
    int32_t last_kept = -1;
    for (int64_t i = begin; i < end; ++i) {
      const float x = row.at(i);
      if (!isnan(x) && order_key(x) >= cut) {
        mine += weight(x);
        last_kept = int32_t(i);
      }
    }
    float total;
    const float before = block::exclusive_scan(mine, scratch, &total);
    const float target = uniform(seed, counter) * total;
    if (threadIdx.x == 0) chosen = int32_t(V);
    __syncthreads();
    if (mine > 0.0f && before <= target && target < before + mine) {
      float cum = before;
      int32_t pick = last_kept;  // rounding between the scan and this walk: the chunk's last kept
      for (int64_t i = begin; i < end; ++i) {
        const float x = row.at(i);
        if (!isnan(x) && order_key(x) >= cut) {
          cum += weight(x);
          if (cum > target) {
            pick = int32_t(i);
            break;
          }
        }
      }
      atomicMin(&chosen, pick);
    }
    __syncthreads();
    // No chunk held the target (it fell in a rounding gap between two chunks, or at the very top):
    // the last kept token, found as the largest kept index.
    if (chosen == int32_t(V)) {
      const float lk = block::max(float(last_kept), scratch);
      token = int32_t(lk);
    } else {
      token = chosen;
    }
  }
  if (threadIdx.x == 0) {
    reinterpret_cast<int32_t*>(p.tokens)[r] = token;
    if (p.logprobs) reinterpret_cast<float*>(p.logprobs)[r] = token >= 0 ? (row.at(token) - mx) - logf(z) : NAN;
  }
  cta::finish(completion);
}

}  // namespace

cudaError_t sample(const WeftSampleParams& p, const CompletionWords& c) {
  sample_kernel<<<unsigned(p.rows), kThreads, 0, reinterpret_cast<cudaStream_t>(p.stream)>>>(
      p, Completion{c.done, c.seq, c.arrivals});
  return cudaGetLastError();
}

}  // namespace weft::nn
