// protocol.cuh — how the CTAs of one collective on different ranks meet, check that they run the
// same call, and hand data over (DESIGN.md "Memory, peers, signals"). Every collective kernel is
// built from these pieces; the layout of the words they use is in args.h.
//
// Contract (every function named cta_* is called by every thread of the CTA):
//   - cta_setup() copies the peer table into shared memory; on_rank(r, p) is where the symmetric
//     pointer p of this rank lives on rank r (same offset, rank r's arena).
//   - cta_enter() is the direct protocol's entry: CTA c of this rank shows CTA c of every peer its
//     descriptor (PairDesc, published with st.release.sys, the epoch last) and waits for theirs.
//     After it returns true, every peer's CTA c has entered this very call (so all of that peer's
//     earlier stream work is done and its buffers may be read or written) and agrees on it.
//   - cta_leave() publishes "my part is done" (after every store of the CTA, release at system
//     scope) to the peers `signal_to` selects and waits for the peers `wait_for` selects.
//   - Waits never hang: each one gives up after Args::timeout_ns, or as soon as the arena's abort
//     word reaches this epoch (a rank that fails raises it on every rank). Failures go to the
//     completion word (rank, peer, stage, field) and the CTA skips to cta_finish().
//   - cta_finish() is the last call of every CTA; the last one publishes the op's sequence number.
//     A kernel of one CTA that knows it recorded no failure says so (`clean`): the publish then
//     skips reading the failure flag, one dependent memory round trip off the latency path.
//   - Epoch rule: no word is ever reset. Launch e waits for values >= e; the host gives every
//     launch on a communicator the next epoch, identically on every rank.
#pragma once

#include <cstdint>

#include "collectives/args.h"
#include "primitives/completion.cuh"
#include "primitives/signal.cuh"

namespace weft::coll {

struct Shared {
  char** peers;          // [world] arena bases
  uint64_t* remote_off;  // [world] all-to-all: element offset of my data in each peer's output
  int* failed;
};

// cta_leave's selector for "every peer" (signal them all, wait for them all).
struct Every {
  __device__ bool operator()(uint32_t) const { return true; }
};

// Dynamic shared memory every collective kernel is launched with.
inline size_t shared_bytes(uint32_t world) { return size_t(world) * 16 + 16; }

__device__ inline Shared cta_setup(const Args& a);
__device__ inline char* on_rank(const Args& a, const Shared& s, uint32_t rank, const char* local);
__device__ inline bool cta_enter(const Args& a, const Shared& s);
template <class SignalTo, class WaitFor>
__device__ inline bool cta_leave(const Args& a, const Shared& s, SignalTo signal_to, WaitFor wait_for);
__device__ inline void cta_finish(const Args& a, bool clean = false);

// Pieces the staged (one-shot) path assembles itself; a descriptor travels with
// sys::store_line_payload() (signal.cuh), then its epoch with sys::signal_store().
__device__ inline PairDesc describe(const Args& a, uint32_t peer);
// Waits for `slot` (written by `peer`) to reach this epoch and checks it; false after reporting.
__device__ inline bool await_desc(const Args& a, const Shared& s, const PairDesc* slot, uint32_t peer,
                                  uint32_t wait_stage);

}  // namespace weft::coll

#include "collectives/impl/protocol.cuh"
