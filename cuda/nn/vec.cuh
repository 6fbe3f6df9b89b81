// vec.cuh — 16-byte vectors of eight bf16, converted to and from fp32 registers: the one access
// width every nn kernel uses (a full 32-byte sector per pair of threads, one instruction per 8
// elements).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace weft::nn {

using bf16 = __nv_bfloat16;

constexpr int kVec = 8;  // bf16 per 16-byte vector

__device__ __forceinline__ void load8(const bf16* p, float (&f)[kVec]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ void store8(bf16* p, const float (&f)[kVec]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

__device__ __forceinline__ void copy8(bf16* dst, const bf16* src) {
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

__device__ __forceinline__ void fill8(bf16* dst, float v) {
  float f[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) f[i] = v;
  store8(dst, f);
}

// Grid-stride launches: enough CTAs to cover every SM several times, never more than the work.
inline unsigned grid_for(uint64_t items, int threads) {
  const uint64_t blocks = (items + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 8192 ? (blocks ? blocks : 1) : 8192);
}

}  // namespace weft::nn
