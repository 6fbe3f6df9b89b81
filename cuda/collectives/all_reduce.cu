// all_reduce.cu — every rank's output is the elementwise sum of all inputs. Two algorithms, the
// launcher picks by size (WeftCollectiveParams.algorithm overrides):
//
//   staged (one-shot, small): each CTA pushes its slice of the input into every peer's staging
//     slot (epoch parity, see args.h), signals, waits for the peers' slices of the same range and
//     sums all of them locally in rank order. One NVLink hop, no entry handshake: latency.
//   direct (two-shot, large): after the entry handshake, rank r owns chunk r: it reads chunk r
//     of every rank's input, sums in rank order and stores the sum into chunk r of every rank's
//     output, in one pass. Each byte crosses NVLink once each way: bandwidth.
//
//   staged LL (smallest): the staged path with the epoch inside every data word (see below).
//
// All sum in rank order, so every rank ends with the same bits. In-place (in == out) is safe:
// every element is read and then written by the same thread.
#include <type_traits>

#include "collectives/move.cuh"
#include "collectives/protocol.cuh"

namespace weft::coll {

namespace {

struct Config {
  static constexpr int kThreads = coll::kThreads;
};

__device__ __forceinline__ uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// [begin, begin + len) elements of `n` for part `part` of `parts`, parts aligned to 16 bytes.
__device__ __forceinline__ void split(uint64_t n, uint32_t elem, uint32_t part, uint32_t parts,
                                      uint64_t& begin, uint64_t& len) {
  const uint64_t align = 16 / elem;
  const uint64_t each = ceil_div(ceil_div(n, parts), align) * align;
  begin = min(n, uint64_t(part) * each);
  len = min(n, begin + each) - begin;
}

__global__ void __launch_bounds__(Config::kThreads, 1) all_reduce_direct_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    uint64_t begin, len;
    split(a.count, a.elem_bytes, a.rank, a.world, begin, len);
    const uint64_t at = begin * a.elem_bytes;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      sum_out<T>([&](uint32_t q) { return on_rank(a, s, q, a.in) + at; }, a.world,
                 [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % a.world, a.out) + at; },
                 a.world, len, grid_workers());
    });
    cta_leave(a, s, [](uint32_t) { return true; }, [](uint32_t) { return true; });
  }
  cta_finish(a);
}

__device__ __forceinline__ PairDesc* staged_desc(const Args& a, const Shared& s, uint32_t owner,
                                                 uint32_t parity, uint32_t writer) {
  return reinterpret_cast<PairDesc*>(s.peers[owner] + a.layout.staged_desc) +
         ((uint64_t(parity) * kMaxCtas + blockIdx.x) * a.world + writer);
}

__device__ __forceinline__ char* staged_data(const Args& a, const Shared& s, uint32_t owner,
                                             uint32_t parity, uint32_t writer) {
  return s.peers[owner] + a.layout.staged_data +
         (uint64_t(parity) * a.world + writer) * a.layout.staged_bytes;
}

__global__ void __launch_bounds__(Config::kThreads, 1) all_reduce_staged_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  const uint32_t parity = uint32_t(a.epoch & 1);
  uint64_t begin, len;
  split(a.count, a.elem_bytes, blockIdx.x, a.nctas, begin, len);
  const uint64_t at = begin * a.elem_bytes;
  const uint32_t npeers = a.world - 1;
  // Peer i is rank (rank + 1 + i) % world, i < world - 1.
  copy_out(a.in + at, [&](uint32_t i) { return staged_data(a, s, (a.rank + 1 + i) % a.world, parity, a.rank) + at; },
           npeers, len * a.elem_bytes, cta_workers());
  const uint32_t p = threadIdx.x;
  const bool is_peer = p < a.world && p != a.rank;
  if (is_peer) write_desc(staged_desc(a, s, p, parity, a.rank), describe(a, p));
  __syncthreads();
  // Release, cumulative through the barrier: the CTA's slice and the descriptor before the flag.
  if (is_peer) sys::signal_store(&staged_desc(a, s, p, parity, a.rank)->epoch, a.epoch);
  bool failed = false;
  if (is_peer) failed = !await_desc(a, s, staged_desc(a, s, a.rank, parity, p), p, WEFT_STAGE_STAGED);
  if (!__syncthreads_or(failed)) {
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      sum_out<T>([&](uint32_t q) { return q == a.rank ? a.in + at : staged_data(a, s, a.rank, parity, q) + at; },
                 a.world, [&](uint32_t) { return a.out + at; }, 1, len, cta_workers());
    });
  }
  cta_finish(a);
}

// ---- staged LL (small inputs) ----------------------------------------------------------------
// The staged kernel's parity rule on slots of its own (args.h), but every 4 bytes of input travel in an
// LL word with the launch's epoch (protocol.cuh): the receiver polls the words themselves, so
// the sender never waits for its stores to be acknowledged before a flag. Costs 2x the bytes,
// which is nothing at these sizes. Slot layout: [kMaxCtas][kLLDescWords] descriptor words, then
// one word per 4 bytes of input.

__device__ __forceinline__ uint64_t* ll_slot(const Args& a, const Shared& s, uint32_t owner,
                                             uint32_t parity, uint32_t writer) {
  return reinterpret_cast<uint64_t*>(s.peers[owner] + a.layout.ll +
                                     (uint64_t(parity) * a.world + writer) * kLLSlotBytes);
}

__device__ __forceinline__ uint32_t ll_desc_word(const Args& a, uint32_t i) {
  switch (i) {
    case 0: return (a.kind & 0xf) | ((a.dtype & 0xf) << 4) | ((a.algo & 0xff) << 8) | (a.world << 16);
    case 1: return uint32_t(a.count);
    case 2: return uint32_t(a.count >> 32);
    default: return a.nctas;
  }
}

// The peer's descriptor words for this CTA, checked field by field; false after reporting.
__device__ inline bool ll_check_desc(const Args& a, const Shared& s, const uint64_t* d, uint32_t peer,
                                     uint32_t flag) {
  uint32_t w[kLLDescWords];
  for (uint32_t i = 0; i < kLLDescWords; ++i)
    if (!ll_wait(a, s, d + i, flag, w[i], WEFT_STAGE_STAGED, peer)) return false;
  const uint64_t count = uint64_t(w[1]) | (uint64_t(w[2]) << 32);
  uint32_t field = 0;
  if ((w[0] & 0xf) != a.kind) field = WEFT_FIELD_KIND;
  else if ((w[0] >> 16) != a.world) field = WEFT_FIELD_WORLD;
  else if (((w[0] >> 4) & 0xf) != a.dtype) field = WEFT_FIELD_DTYPE;
  else if (count != a.count) field = WEFT_FIELD_COUNT;
  else if (((w[0] >> 8) & 0xff) != a.algo) field = WEFT_FIELD_ALGORITHM;
  else if (w[3] != a.nctas) field = WEFT_FIELD_CTAS;
  if (field != 0) {
    detail::fail(a, s, WEFT_E_INVALID, WEFT_STAGE_CHECK, field, peer, a.epoch);
    return false;
  }
  return true;
}

template <typename T>
__device__ __forceinline__ void ll_add(float (&acc)[2], uint32_t v) {
  if constexpr (sizeof(T) == 4) {
    acc[0] += __uint_as_float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    acc[0] += __bfloat162float(__ushort_as_bfloat16(uint16_t(v)));
    acc[1] += __bfloat162float(__ushort_as_bfloat16(uint16_t(v >> 16)));
  } else {
    acc[0] += __half2float(__ushort_as_half(uint16_t(v)));
    acc[1] += __half2float(__ushort_as_half(uint16_t(v >> 16)));
  }
}

template <typename T>
__device__ __forceinline__ void ll_store(char* dst, const float (&acc)[2], bool half_word) {
  if constexpr (sizeof(T) == 4) {
    mem::st<4>(dst, __float_as_uint(acc[0]));
  } else {
    uint32_t lo, hi;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      lo = __bfloat16_as_ushort(__float2bfloat16_rn(acc[0]));
      hi = __bfloat16_as_ushort(__float2bfloat16_rn(acc[1]));
    } else {
      lo = __half_as_ushort(__float2half_rn(acc[0]));
      hi = __half_as_ushort(__float2half_rn(acc[1]));
    }
    if (half_word) mem::st<2>(dst, lo);
    else mem::st<4>(dst, lo | (hi << 16));
  }
}

__global__ void __launch_bounds__(Config::kThreads, 1) all_reduce_ll_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  const uint32_t parity = uint32_t(a.epoch & 1);
  const uint32_t flag = uint32_t(a.epoch);
  uint64_t begin, len;
  split(a.count, a.elem_bytes, blockIdx.x, a.nctas, begin, len);
  const uint64_t at = begin * a.elem_bytes;  // a multiple of 16 (split aligns parts)
  const uint64_t bytes = len * a.elem_bytes;
  const uint64_t units = (bytes + 3) / 4;    // the last one may hold only 2 bytes (odd 16-bit count)
  const uint64_t first = kMaxCtas * kLLDescWords + at / 4;
  const uint32_t p = threadIdx.x;
  if (p < a.world && p != a.rank) {
    uint64_t* d = ll_slot(a, s, p, parity, a.rank) + uint64_t(blockIdx.x) * kLLDescWords;
    for (uint32_t i = 0; i < kLLDescWords; ++i) ll_put(d + i, ll_desc_word(a, i), flag);
  }
  for (uint64_t u = threadIdx.x; u < units; u += blockDim.x) {
    const char* src = a.in + at + u * 4;
    const uint32_t v = u * 4 + 4 <= bytes ? uint32_t(mem::ld<4>(src)) : uint32_t(mem::ld<2>(src));
    for (uint32_t i = 1; i < a.world; ++i)
      ll_put(ll_slot(a, s, (a.rank + i) % a.world, parity, a.rank) + first + u, v, flag);
  }
  bool failed = false;
  if (p < a.world && p != a.rank)
    failed = !ll_check_desc(a, s, ll_slot(a, s, a.rank, parity, p) + uint64_t(blockIdx.x) * kLLDescWords, p, flag);
  if (!__syncthreads_or(failed)) {
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      for (uint64_t u = threadIdx.x; u < units; u += blockDim.x) {
        const bool half_word = u * 4 + 4 > bytes;
        float acc[2] = {0.0f, 0.0f};
        for (uint32_t q = 0; q < a.world; ++q) {
          uint32_t v;
          if (q == a.rank) {
            const char* src = a.in + at + u * 4;
            v = half_word ? uint32_t(mem::ld<2>(src)) : uint32_t(mem::ld<4>(src));
          } else if (!ll_wait(a, s, ll_slot(a, s, a.rank, parity, q) + first + u, flag, v, WEFT_STAGE_STAGED, q)) {
            return;  // reported; the abort word releases the other threads
          }
          ll_add<T>(acc, half_word ? (v & 0xffff) : v);
        }
        ll_store<T>(a.out + at + u * 4, acc, half_word);
      }
    });
  }
  cta_finish(a);
}

}  // namespace

cudaError_t launch_all_reduce(const Args& a, cudaStream_t stream) {
  if (a.algo == kStagedLL)
    all_reduce_ll_kernel<<<a.nctas, Config::kThreads, shared_bytes(a.world), stream>>>(a);
  else if (a.algo == kStaged)
    all_reduce_staged_kernel<<<a.nctas, Config::kThreads, shared_bytes(a.world), stream>>>(a);
  else
    all_reduce_direct_kernel<<<a.nctas, Config::kThreads, shared_bytes(a.world), stream>>>(a);
  return cudaGetLastError();
}

}  // namespace weft::coll
