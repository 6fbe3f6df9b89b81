// Implementation of protocol.cuh. Read the contract there.
#pragma once

#include "weft.h"

namespace weft::coll {

namespace detail {

// kAborted: a rank raised the arena's abort word; kDeclared: the host declared a rank failed.
enum class Waited { kOk, kTimeout, kAborted, kDeclared };

__device__ __forceinline__ uint64_t* word(const Shared& s, uint32_t rank, uint64_t offset) {
  return reinterpret_cast<uint64_t*>(s.peers[rank] + offset);
}

__device__ __forceinline__ PairDesc* entry_slot(const Args& a, const Shared& s, uint32_t owner,
                                                uint32_t writer) {
  return reinterpret_cast<PairDesc*>(s.peers[owner] + a.layout.entry) +
         (uint64_t(blockIdx.x) * a.world + writer);
}

__device__ __forceinline__ uint64_t* done_slot(const Args& a, const Shared& s, uint32_t owner,
                                               uint32_t writer) {
  return word(s, owner, a.layout.done) + (uint64_t(blockIdx.x) * a.world + writer);
}

// Polls a local word (peers write it over NVLink). Local polls are cheap L2 hits, so the backoff
// stays short; the abort word and the clock are read every 16 polls.
__device__ inline Waited wait_epoch(const Args& a, const Shared& s, const uint64_t* w) {
  if (sys::signal_load(w) >= a.epoch) return Waited::kOk;
  const uint64_t* abort_word = word(s, a.rank, a.layout.abort);
  const uint64_t start = sys::globaltimer_ns();
  // The first 64 polls (~20 us of L2 round trips) do not sleep: a peer that is on its way shows up
  // within a few us, and a sleep there only adds its own length to the latency of small ops.
  unsigned sleep_ns = 16;
  for (uint32_t spins = 1;; ++spins) {
    if (sys::signal_load(w) >= a.epoch) return Waited::kOk;
    if ((spins & 15) == 0) {
      if (sys::signal_load(abort_word) >= a.epoch) return Waited::kAborted;
      if (a.host_abort && *a.host_abort) return Waited::kDeclared;
      if (sys::globaltimer_ns() - start > a.timeout_ns) return Waited::kTimeout;
    }
    if (spins >= 64) {
      __nanosleep(sleep_ns);
      if (sleep_ns < 256) sleep_ns <<= 1;
    }
  }
}

// Records the failure (the first one of the grid wins) and, unless the CTA is only echoing
// someone else's abort, raises every rank's abort word so that nobody waits out its timeout.
__device__ inline void fail(const Args& a, const Shared& s, int32_t code, uint32_t stage,
                            uint32_t field, uint32_t peer, uint64_t abort_epoch) {
  const Completion c{a.completion.done, a.completion.seq, a.completion.arrivals};
  cta::fail(c, code, stage | (field << 8) | (peer << 16));
  if (stage == WEFT_STAGE_ABORTED) return;
  for (uint32_t r = 0; r < a.world; ++r)
    atomicMax_system(reinterpret_cast<unsigned long long*>(word(s, r, a.layout.abort)),
                     static_cast<unsigned long long>(abort_epoch));
}

__device__ inline void report_wait(const Args& a, const Shared& s, Waited w, uint32_t stage,
                                   uint32_t peer) {
  if (w == Waited::kTimeout) fail(a, s, WEFT_E_TIMEOUT, stage, 0, peer, a.epoch);
  else if (w == Waited::kDeclared) fail(a, s, WEFT_E_PEER, WEFT_STAGE_ABORTED, WEFT_ABORT_HOST, uint32_t(*a.host_abort - 1), a.epoch);
  else fail(a, s, WEFT_E_PEER, WEFT_STAGE_ABORTED, WEFT_ABORT_PEER, peer, a.epoch);
}

__device__ __forceinline__ uint64_t a2a(const Args& a, uint32_t table, uint32_t peer) {
  return a.a2a[uint64_t(table) * a.world + peer];
}
enum A2aTable : uint32_t { kSendOff = 0, kSendCount = 1, kRecvOff = 2, kRecvCount = 3 };

// The first field in which the peer's call differs from ours (WeftCollectiveField), or 0.
__device__ inline uint32_t differs(const Args& a, const PairDesc& t, uint64_t their_epoch,
                                   uint32_t peer) {
  if (their_epoch != a.epoch) return WEFT_FIELD_EPOCH;
  if (t.kind != a.kind) return WEFT_FIELD_KIND;
  if (t.world != a.world) return WEFT_FIELD_WORLD;
  if (t.dtype != a.dtype) return WEFT_FIELD_DTYPE;
  if (t.count != a.count) return WEFT_FIELD_COUNT;
  if (t.algo != a.algo) return WEFT_FIELD_ALGORITHM;
  if (t.nctas != a.nctas) return WEFT_FIELD_CTAS;
  if (t.root != a.root) return WEFT_FIELD_ROOT;
  if (a.kind == kAllToAll && t.aux0 != a2a(a, kSendCount, peer)) return WEFT_FIELD_PAIR_COUNT;
  return 0;
}

}  // namespace detail

__device__ inline Shared cta_setup(const Args& a) {
  extern __shared__ __align__(16) unsigned char weft_coll_smem[];
  Shared s;
  s.peers = reinterpret_cast<char**>(weft_coll_smem);
  s.remote_off = reinterpret_cast<uint64_t*>(weft_coll_smem + size_t(a.world) * 8);
  s.failed = reinterpret_cast<int*>(weft_coll_smem + size_t(a.world) * 16);
  const bool inline_peers = a.world <= kInlinePeers;
  for (uint32_t i = threadIdx.x; i < a.world; i += blockDim.x)
    s.peers[i] = inline_peers ? a.peer_inline[i] : a.peers[i];
  __syncthreads();
  return s;
}

__device__ inline char* on_rank(const Args& a, const Shared& s, uint32_t rank, const char* local) {
  return s.peers[rank] + (local - s.peers[a.rank]);
}

__device__ inline PairDesc describe(const Args& a, uint32_t peer) {
  PairDesc d{};
  d.kind = a.kind;
  d.dtype = a.dtype;
  d.count = a.count;
  d.nctas = a.nctas;
  d.root = a.root;
  d.world = a.world;
  d.algo = a.algo;
  if (a.kind == kAllToAll) {
    d.aux0 = detail::a2a(a, detail::kRecvCount, peer);
    d.aux1 = detail::a2a(a, detail::kRecvOff, peer);
  }
  return d;
}

__device__ inline bool await_desc(const Args& a, const Shared& s, const PairDesc* slot,
                                  uint32_t peer, uint32_t wait_stage) {
  const detail::Waited w = detail::wait_epoch(a, s, &slot->epoch);
  if (w != detail::Waited::kOk) {
    detail::report_wait(a, s, w, wait_stage, peer);
    return false;
  }
  // Acquired the epoch: the three payload lines the same peer thread wrote before it are visible.
  const uint64_t their_epoch = sys::signal_load(&slot->epoch);
  const PairDesc t = sys::load_line_payload(slot);
  const uint32_t field = detail::differs(a, t, their_epoch, peer);
  if (field != 0) {
    // Abort at the later of the two epochs, so that a peer that is ahead stops waiting as well.
    detail::fail(a, s, WEFT_E_INVALID, WEFT_STAGE_CHECK, field, peer,
                 their_epoch > a.epoch ? their_epoch : a.epoch);
    return false;
  }
  if (a.kind == kAllToAll) s.remote_off[peer] = t.aux1;
  return true;
}

__device__ inline bool cta_enter(const Args& a, const Shared& s) {
  const uint32_t p = threadIdx.x;
  bool failed = false;
  if (p < a.world && p != a.rank) {
    const PairDesc d = describe(a, p);
    PairDesc* remote = detail::entry_slot(a, s, p, a.rank);
    sys::store_line_payload(remote, d);
    sys::signal_store(&remote->epoch, a.epoch);  // release: orders the descriptor before it
    failed = !await_desc(a, s, detail::entry_slot(a, s, a.rank, p), p, WEFT_STAGE_ENTRY);
  }
  if (p == a.rank && a.kind == kAllToAll) s.remote_off[p] = detail::a2a(a, detail::kRecvOff, p);
  return !__syncthreads_or(failed);
}

template <class SignalTo, class WaitFor>
__device__ inline bool cta_leave(const Args& a, const Shared& s, SignalTo signal_to, WaitFor wait_for) {
  __syncthreads();  // every data store of this CTA has been issued
  const uint32_t p = threadIdx.x;
  bool failed = false;
  if (p < a.world && p != a.rank) {
    // st.release.sys is cumulative through the barrier above: every store the CTA made is
    // ordered before the flag (the same pattern as a fence + relaxed flag, one fence cheaper).
    if (signal_to(p)) sys::signal_store(detail::done_slot(a, s, p, a.rank), a.epoch);
    if (wait_for(p)) {
      const detail::Waited w = detail::wait_epoch(a, s, detail::done_slot(a, s, a.rank, p));
      if (w != detail::Waited::kOk) {
        detail::report_wait(a, s, w, WEFT_STAGE_DONE, p);
        failed = true;
      }
    }
  }
  return !__syncthreads_or(failed);
}

__device__ inline void cta_finish(const Args& a, bool clean) {
  if (gridDim.x * gridDim.y * gridDim.z != 1) {
    cta::finish(Completion{a.completion.done, a.completion.seq, a.completion.arrivals});
    return;
  }
  // One CTA (barrier, small staged all-reduce): it is the last CTA, so completion.cuh's arrival
  // count is not needed; the failed flag was set, if at all, by this CTA before the barrier.
  __syncthreads();
  if (threadIdx.x == 0) {
    bool bad = false;
    if (!clean) {
      volatile uint32_t* failed = a.completion.arrivals + 1;
      bad = *failed != 0;
      if (bad) *failed = 0;
    }
    sys::signal_store(a.completion.done, bad ? (a.completion.seq | kFailedBit) : a.completion.seq);
  }
}

}  // namespace weft::coll
