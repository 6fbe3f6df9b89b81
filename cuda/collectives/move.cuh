// move.cuh — moving and summing bytes between local and peer memory, split over many threads.
//
// Contract:
//   - Workers{id, count}: this thread's index among `count` threads sharing the work
//     (grid_workers(): the whole grid; cta_workers(): this CTA).
//   - copy_out(src, dst, ndst, bytes, w): dst(i) for i < ndst each receive `bytes` bytes of src.
//   - sum_out<T>(src, nsrc, dst, ndst, n, w): dst(i)[k] = sum over q < nsrc, in order, of
//     src(q)[k], for k < n elements of T (bf16, f16 or f32; accumulated in fp32). The order is
//     fixed, so every rank that sums the same inputs gets the same bits.
//   - When every address (and the length) is 16-byte aligned the body moves 16-byte vectors, several
//     in flight per thread; a misaligned call falls back to the widest unit that fits.
//   - Loads of data that other GPUs wrote use ld.global.cg (L2, never a stale L1 line).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace weft::coll {

struct Workers {
  uint64_t id;
  uint64_t count;
};

__device__ __forceinline__ Workers grid_workers() {
  return {uint64_t(blockIdx.x) * blockDim.x + threadIdx.x, uint64_t(gridDim.x) * blockDim.x};
}
__device__ __forceinline__ Workers cta_workers() { return {threadIdx.x, blockDim.x}; }

// [begin, begin + len) elements of `n` for part `part` of `parts` (a rank's shard, a CTA's slice),
// parts rounded up to 16 bytes so every part but the last moves whole vectors.
__device__ __forceinline__ void split(uint64_t n, uint32_t elem, uint32_t part, uint32_t parts, uint64_t& begin,
                                      uint64_t& len) {
  const uint64_t align = 16 / elem;
  const uint64_t each = ((n + parts - 1) / parts + align - 1) / align * align;
  begin = min(n, uint64_t(part) * each);
  len = min(n, begin + each) - begin;
}

namespace mem {

__device__ __forceinline__ uint4 ld16(const char* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void st16(char* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
template <int kBytes>
__device__ __forceinline__ uint64_t ld(const char* p) {
  if constexpr (kBytes == 8) {
    uint64_t v;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p));
    return v;
  } else if constexpr (kBytes == 4) {
    uint32_t v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
  } else if constexpr (kBytes == 2) {
    uint16_t v;
    asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
  } else {
    uint16_t v;
    asm volatile("ld.global.cg.u8 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
  }
}
template <int kBytes>
__device__ __forceinline__ void st(char* p, uint64_t v) {
  if constexpr (kBytes == 8) asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (kBytes == 4) asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(uint32_t(v)) : "memory");
  else if constexpr (kBytes == 2) asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(uint16_t(v)) : "memory");
  else asm volatile("st.global.u8 [%0], %1;" ::"l"(p), "h"(uint16_t(v & 0xff)) : "memory");
}

}  // namespace mem

// fp32 lanes of one 16-byte vector of T.
template <typename T>
struct Lanes {
  static constexpr int kCount = 16 / sizeof(T);
};

template <typename T>
__device__ __forceinline__ void add_lanes(float (&acc)[Lanes<T>::kCount], uint4 v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] += __uint_as_float(w[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 f;
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&w[i]);
        f = __bfloat1622float2(h);
      } else {
        __half2 h = *reinterpret_cast<const __half2*>(&w[i]);
        f = __half22float2(h);
      }
      acc[2 * i] += f.x;
      acc[2 * i + 1] += f.y;
    }
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack_lanes(const float (&acc)[Lanes<T>::kCount]) {
  uint32_t w[4];
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = __float_as_uint(acc[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        __nv_bfloat162 h = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
        w[i] = *reinterpret_cast<uint32_t*>(&h);
      } else {
        __half2 h = __floats2half2_rn(acc[2 * i], acc[2 * i + 1]);
        w[i] = *reinterpret_cast<uint32_t*>(&h);
      }
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <typename T>
__device__ __forceinline__ float load_elem(const char* p) {
  if constexpr (sizeof(T) == 4) return __uint_as_float(uint32_t(mem::ld<4>(p)));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(__ushort_as_bfloat16(uint16_t(mem::ld<2>(p))));
  else return __half2float(__ushort_as_half(uint16_t(mem::ld<2>(p))));
}

template <typename T>
__device__ __forceinline__ void store_elem(char* p, float v) {
  if constexpr (sizeof(T) == 4) mem::st<4>(p, __float_as_uint(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) mem::st<2>(p, __bfloat16_as_ushort(__float2bfloat16_rn(v)));
  else mem::st<2>(p, __half_as_ushort(__float2half_rn(v)));
}

namespace detail {

template <int kUnit, class Dst>
__device__ inline void copy_units(const char* src, Dst dst, uint32_t ndst, uint64_t bytes, Workers w) {
  const uint64_t n = bytes / kUnit;
  for (uint64_t i = w.id; i < n; i += w.count) {
    const uint64_t v = mem::ld<kUnit>(src + i * kUnit);
    for (uint32_t d = 0; d < ndst; ++d) mem::st<kUnit>(dst(d) + i * kUnit, v);
  }
}

template <class Dst>
__device__ inline void copy_any(const char* src, Dst dst, uint32_t ndst, uint64_t bytes, Workers w,
                                uint64_t bits) {
  if ((bits & 7) == 0) copy_units<8>(src, dst, ndst, bytes, w);
  else if ((bits & 3) == 0) copy_units<4>(src, dst, ndst, bytes, w);
  else if ((bits & 1) == 0) copy_units<2>(src, dst, ndst, bytes, w);
  else copy_units<1>(src, dst, ndst, bytes, w);
}

}  // namespace detail

template <class Dst>
__device__ inline void copy_out(const char* src, Dst dst, uint32_t ndst, uint64_t bytes, Workers w) {
  // 8 vectors in flight per thread: with 512 threads that is 64 KiB per CTA, enough to cover
  // local HBM latency so that stores to the peers never starve.
  constexpr int kUnroll = 8;
  uint64_t ptr_bits = reinterpret_cast<uintptr_t>(src);
  for (uint32_t d = 0; d < ndst; ++d) ptr_bits |= reinterpret_cast<uintptr_t>(dst(d));
  if ((ptr_bits & 15) != 0) {
    detail::copy_any(src, dst, ndst, bytes, w, ptr_bits | bytes);
    return;
  }
  const uint64_t nvec = bytes / 16;
  for (uint64_t v = w.id; v < nvec; v += w.count * kUnroll) {
    uint4 r[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const uint64_t i = v + k * w.count;
      if (i < nvec) r[k] = mem::ld16(src + i * 16);
    }
    for (uint32_t d = 0; d < ndst; ++d) {
      char* base = dst(d);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const uint64_t i = v + k * w.count;
        if (i < nvec) mem::st16(base + i * 16, r[k]);
      }
    }
  }
  const uint64_t tail = bytes - nvec * 16;
  if (tail != 0) {
    const uint64_t at = nvec * 16;
    detail::copy_any(src + at, [&](uint32_t d) { return dst(d) + at; }, ndst, tail, w, tail);
  }
}

template <typename T, class Src, class Dst>
__device__ inline void sum_out(Src src, uint32_t nsrc, Dst dst, uint32_t ndst, uint64_t n, Workers w) {
  // 4 vectors per source and 2 sources per round in flight per thread: 8 outstanding 16-byte
  // loads with 64 fp32 accumulator/load registers, which fits 512 threads per SM (<= 128 regs).
  constexpr int kUnroll = 4;
  constexpr int kGroup = 2;
  constexpr int L = Lanes<T>::kCount;
  uint64_t ptr_bits = 0;
  for (uint32_t q = 0; q < nsrc; ++q) ptr_bits |= reinterpret_cast<uintptr_t>(src(q));
  for (uint32_t d = 0; d < ndst; ++d) ptr_bits |= reinterpret_cast<uintptr_t>(dst(d));
  const uint64_t nvec = (ptr_bits & 15) == 0 ? n / L : 0;
  for (uint64_t v = w.id; v < nvec; v += w.count * kUnroll) {
    float acc[kUnroll][L];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
#pragma unroll
      for (int l = 0; l < L; ++l) acc[k][l] = 0.0f;
    for (uint32_t q0 = 0; q0 < nsrc; q0 += kGroup) {
      uint4 r[kGroup][kUnroll];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        if (q0 + g < nsrc) {
          const char* s = src(q0 + g);
#pragma unroll
          for (int k = 0; k < kUnroll; ++k) {
            const uint64_t i = v + k * w.count;
            if (i < nvec) r[g][k] = mem::ld16(s + i * 16);
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        if (q0 + g < nsrc) {
#pragma unroll
          for (int k = 0; k < kUnroll; ++k) {
            const uint64_t i = v + k * w.count;
            if (i < nvec) add_lanes<T>(acc[k], r[g][k]);
          }
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const uint64_t i = v + k * w.count;
      if (i < nvec) {
        const uint4 out = pack_lanes<T>(acc[k]);
        for (uint32_t d = 0; d < ndst; ++d) mem::st16(dst(d) + i * 16, out);
      }
    }
  }
  for (uint64_t i = nvec * L + w.id; i < n; i += w.count) {
    float acc = 0.0f;
    for (uint32_t q = 0; q < nsrc; ++q) acc += load_elem<T>(src(q) + i * sizeof(T));
    for (uint32_t d = 0; d < ndst; ++d) store_elem<T>(dst(d) + i * sizeof(T), acc);
  }
}

// Calls f(T{}) with T the element type of a float WeftDtype (bf16, f16, f32).
template <class F>
__device__ __forceinline__ void with_float_type(uint32_t dtype, F&& f) {
  if (dtype == 0) f(__nv_bfloat16{});
  else if (dtype == 1) f(__half{});
  else f(float{});
}

}  // namespace weft::coll
