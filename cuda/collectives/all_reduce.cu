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
// Both sum in rank order, so every rank ends with the same bits. In-place (in == out) is safe:
// every element is read and then written by the same thread.
#include "collectives/direct_kernel.cuh"
#include "collectives/move.cuh"

namespace weft::coll {

namespace {

struct AllReduceDirect : ToEveryPeer {
  __device__ static void move(const Args& a, const Shared& s) {
    uint64_t begin, len;
    split(a.count, a.elem_bytes, a.rank, a.world, begin, len);
    const uint64_t at = begin * a.elem_bytes;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      sum_out<T>([&](uint32_t q) { return on_rank(a, s, q, a.in) + at; }, a.world,
                 [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % a.world, a.out) + at; },
                 a.world, len, grid_workers());
    });
  }
};

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

__global__ void __launch_bounds__(kThreads, 1) all_reduce_staged_kernel(const __grid_constant__ Args a) {
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
  if (is_peer) sys::store_line_payload(staged_desc(a, s, p, parity, a.rank), describe(a, p));
  __syncthreads();
  // Release, cumulative through the barrier: the CTA's slice and the descriptor before the flag.
  if (is_peer) sys::signal_store(&staged_desc(a, s, p, parity, a.rank)->epoch, a.epoch);
  bool failed = false;
  if (is_peer) failed = !await_desc(a, s, staged_desc(a, s, a.rank, parity, p), p, WEFT_STAGE_STAGED);
  const bool any_failed = __syncthreads_or(failed);
  if (!any_failed) {
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      sum_out<T>([&](uint32_t q) { return q == a.rank ? a.in + at : staged_data(a, s, a.rank, parity, q) + at; },
                 a.world, [&](uint32_t) { return a.out + at; }, 1, len, cta_workers());
    });
  }
  // Every wait of this kernel reports through `failed`: a CTA that saw none recorded none.
  cta_finish(a, !any_failed);
}

}  // namespace

KernelLaunch all_reduce_launch(const Args& a) {
  return a.algo == kStaged ? collective_launch(reinterpret_cast<const void*>(&all_reduce_staged_kernel), a)
                           : direct_launch<AllReduceDirect>(a);
}

}  // namespace weft::coll
