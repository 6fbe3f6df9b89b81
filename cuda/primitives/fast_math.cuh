// fast_math.cuh — the special-function unit's approximations, for inner loops that can afford
// their error (softmax: 2^-22 relative, far below bf16's 2^-8).
//
// Contract:
//   - fast::exp2(x) = 2^x by ex2.approx.ftz.f32 (one MUFU op): exp2(-inf) = +0, denormal results
//     flush to 0, relative error at most 2^-22.
//   - fast::log2(x) = log2(x) by lg2.approx.ftz.f32: log2(0) = -inf.
#pragma once

namespace weft::fast {

__device__ __forceinline__ float exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace weft::fast
