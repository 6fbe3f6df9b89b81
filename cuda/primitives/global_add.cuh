// global_add.cuh — in-place adds into global memory, done at L2 (red: no value comes back, so the
// issuing thread does not wait for it).
//
// Contract:
//   - add_bf16x8(dst, v) adds the eight bf16 values packed in v (two per 32-bit word, low half first)
//     to the eight at dst (16-byte aligned), each rounded once to bf16; relaxed, device scope.
//   - Adds from several threads to one element are atomic; their order is not defined, so a sum of
//     more than two terms may round differently from one run to the next. With two terms (the
//     value in memory and v) the result is the same whichever rank or thread adds.
#pragma once

#include <cstdint>

namespace weft::gpu {

__device__ __forceinline__ void add_bf16x8(void* dst, const uint4& v) {
  asm volatile("red.relaxed.gpu.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

}  // namespace weft::gpu
