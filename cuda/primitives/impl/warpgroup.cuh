// Implementation of warpgroup.cuh. Read the contract there.
#pragma once

namespace weft::wg {

template <int Registers>
__device__ __forceinline__ void release_registers() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256,
                "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
}

template <int Registers>
__device__ __forceinline__ void claim_registers() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256,
                "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
}

__device__ __forceinline__ void sync(uint32_t barrier_id) {
  asm volatile("bar.sync %0, %1;" ::"r"(barrier_id), "n"(kThreads) : "memory");
}

template <int Groups>
__device__ __forceinline__ void sync_groups(uint32_t barrier_id) {
  asm volatile("bar.sync %0, %1;" ::"r"(barrier_id), "n"(Groups * kThreads) : "memory");
}

__device__ __forceinline__ bool all(bool value, uint32_t barrier_id) {
  uint32_t result;
  asm volatile(
      "{\n .reg .pred in, out;\n setp.ne.u32 in, %1, 0;\n bar.red.and.pred out, %2, %3, in;\n"
      " selp.u32 %0, 1, 0, out;\n}"
      : "=r"(result)
      : "r"(uint32_t(value)), "r"(barrier_id), "n"(kThreads)
      : "memory");
  return result != 0;
}

}  // namespace weft::wg
