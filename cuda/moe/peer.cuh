// peer.cuh — the pieces the MoE kernels share: peer workspace addresses, bounded and abortable
// waits on epoch-derived words, the abort fan-out, row copies by one warp, arrival counters raised
// once per group of rows, failure records.
//
// Contract (functions named cta_* are called by every thread of the CTA, warp_* by all 32 lanes):
//   - cta_peers() copies every rank's workspace base into shared memory.
//   - wait_at_least() spins until *word >= target, gives up after the plan's timeout_ns, as soon as
//     the plan's abort word (local, raised by any rank that gives up) reaches this launch's epoch, or
//     when the host declared a rank failed (weft_comm_abort: failure_of() then names that rank). The
//     PeerArgs form reads the timeout and the host's word from the plan's PeerArgs.
//   - raise_abort() sets every rank's abort word to at least `epoch` (atomicMax at system scope), so
//     that peers waiting for this rank stop within a poll instead of their own timeout.
//   - warp_copy_row() copies one row with 16-byte loads (ld.global.nc: the source is not written
//     while the kernel runs) and 16-byte stores to a local or peer address.
//   - warp_arrive(): lanes with `valid` each landed one row counted by `counter`; lanes whose keys
//     are equal share a counter, and the lowest of them adds the group's size with red.release.sys
//     (red.release.gpu with one_device: world 1, where every thread touching the word is on this GPU).
//     Call it after __syncwarp() behind the row stores: the release is cumulative over the stores
//     the warp made before the barrier, so a reader that acquires the counter's value sees them.
//   - Failure: Failures records the first failure of the CTA (code, stage, field, peer) in shared
//     memory; report() moves it into the launch's reason word (cuda/primitives/completion.cuh).
#pragma once

#include <cstdint>

#include "moe/moe.h"
#include "primitives/completion.cuh"
#include "primitives/signal.cuh"

namespace weft::moe {

enum class Waited { kOk, kTimeout, kAborted, kDeclared };

__device__ __forceinline__ Completion completion_of(const PeerArgs& p) {
  return Completion{p.completion.done, p.completion.seq, p.completion.arrivals};
}

// Every rank's workspace base, in shared memory (peers[q] = rank q's, as this process maps it).
__device__ inline void cta_peers(const PeerArgs& p, char** peers) {
  for (int q = threadIdx.x; q < p.world; q += blockDim.x) peers[q] = p.peers[q] + p.ws_offset;
  __syncthreads();
}

__device__ inline Waited wait_at_least(const uint64_t* word, uint64_t target, const uint64_t* abort_word,
                                       uint64_t epoch, uint64_t timeout_ns, const volatile uint64_t* host_abort) {
  if (sys::signal_load(word) >= target) return Waited::kOk;
  const uint64_t start = sys::globaltimer_ns();
  unsigned sleep_ns = 32;
  for (uint32_t spins = 1;; ++spins) {
    if (sys::signal_load(word) >= target) return Waited::kOk;
    // The abort word and the clock every 16 polls: each is one more memory round trip.
    if ((spins & 15) == 0) {
      if (sys::signal_load(abort_word) >= epoch) return Waited::kAborted;
      if (host_abort && *host_abort) return Waited::kDeclared;
      if (sys::globaltimer_ns() - start > timeout_ns) return Waited::kTimeout;
    }
    // Hot for the first 64 polls (a peer on its way shows up within a few us), then a backoff that
    // settles at 512 ns so that long waits do not flood NVLink with polls.
    if (spins >= 64) {
      __nanosleep(sleep_ns);
      if (sleep_ns < 512) sleep_ns <<= 1;
    }
  }
}

__device__ __forceinline__ Waited wait_at_least(const uint64_t* word, uint64_t target, const uint64_t* abort_word,
                                                uint64_t epoch, const PeerArgs& p) {
  return wait_at_least(word, target, abort_word, epoch, p.timeout_ns, p.host_abort);
}

// What a wait that gave up reports: the code, and the field and peer of the reason word. kDeclared:
// WEFT_MOE_FAIL_ABORTED with field WEFT_ABORT_HOST and the declared rank as the peer.
struct WaitFailure {
  int code, field, peer;
};
__device__ inline WaitFailure failure_of(Waited w, int peer, const volatile uint64_t* host_abort) {
  if (w == Waited::kTimeout) return WaitFailure{WEFT_MOE_FAIL_TIMEOUT, 0, peer};
  if (w == Waited::kDeclared) return WaitFailure{WEFT_MOE_FAIL_ABORTED, WEFT_ABORT_HOST, int(*host_abort - 1)};
  return WaitFailure{WEFT_MOE_FAIL_ABORTED, WEFT_ABORT_PEER, peer};
}

__device__ inline void raise_abort(char* const* peers, int world, uint64_t abort_offset, uint64_t epoch) {
  for (int q = 0; q < world; ++q)
    atomicMax_system(reinterpret_cast<unsigned long long*>(peers[q] + abort_offset), static_cast<unsigned long long>(epoch));
}

struct Failures {
  int code, stage, field, peer;
};

// The first failure a thread of the CTA records wins.
__device__ inline void record(Failures* f, int code, int stage, int field, int peer) {
  if (atomicCAS(&f->code, 0, code) == 0) {
    f->stage = stage;
    f->field = field;
    f->peer = peer;
  }
}

// One thread: the CTA's recorded failure into the launch's reason word (stage | field << 8 |
// peer << 16 above the code, as the collectives report theirs).
__device__ inline void report(const PeerArgs& p, const Failures& f) {
  if (f.code == 0) return;
  cta::fail(completion_of(p), f.code,
            uint32_t(f.stage) | (uint32_t(f.field) << 8) | (uint32_t(f.peer & 0xffff) << 16));
}

// Records a wait that gave up (failure_of) as the CTA's failure.
__device__ inline Waited wait_failed(Failures* f, Waited w, int stage, int peer, const PeerArgs& p) {
  if (w == Waited::kOk) return w;
  const WaitFailure why = failure_of(w, peer, p.host_abort);
  record(f, why.code, stage, why.field, why.peer);
  return w;
}

// The reason-word bits above the code (stage | field << 8 | peer << 16) of a wait that gave up.
__device__ __forceinline__ uint32_t reason_bits(const WaitFailure& why, int stage) {
  return uint32_t(stage) | (uint32_t(why.field) << 8) | (uint32_t(why.peer & 0xffff) << 16);
}

namespace mem {

__device__ __forceinline__ uint4 ld_nc16(const char* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ld_cg16(const char* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ int ld_cg(const int* p) {
  int v;
  asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ void st16(char* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void red_release_add(uint64_t* p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// The same at device scope: every thread that touches the word runs on this GPU (world 1).
__device__ __forceinline__ void red_release_add_gpu(uint64_t* p, uint64_t v) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// A credit that publishes no data (padding rows): relaxed, but at system scope like the peers' adds
// on the same word, so that all of them are atomic with each other (at world 1 the releases are at
// device scope, red_release_add_gpu, whose scope then holds every thread that touches the word).
__device__ __forceinline__ void red_relaxed_add(uint64_t* p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

}  // namespace mem

// 4 vectors of 16 bytes in flight per lane: 2 KiB per warp per round, so a 14 KiB row (H = 7168)
// takes 7 rounds. `bytes` is a multiple of 16 and both rows are 16-byte aligned (the plan checks).
__device__ inline void warp_copy_row(const char* src, char* dst, uint32_t bytes) {
  constexpr int kUnroll = 4;
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t nv = bytes / 16;
  for (uint32_t v = lane; v < nv; v += 32 * kUnroll) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = v + 32 * u;
      if (i < nv) r[u] = mem::ld_nc16(src + uint64_t(i) * 16);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = v + 32 * u;
      if (i < nv) mem::st16(dst + uint64_t(i) * 16, r[u]);
    }
  }
}

__device__ inline void warp_arrive(uint64_t* counter, uint64_t key, bool valid, bool one_device = false) {
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t mask = __ballot_sync(0xffffffffu, valid);
  if (!valid) return;
  const uint32_t group = __match_any_sync(mask, key);
  if (lane == uint32_t(__ffs(group) - 1)) {
    if (one_device) mem::red_release_add_gpu(counter, uint64_t(__popc(group)));
    else mem::red_release_add(counter, uint64_t(__popc(group)));
  }
}

}  // namespace weft::moe
