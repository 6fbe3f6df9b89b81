// completion.cuh — how a persistent kernel tells the host it is done (DESIGN.md "Completion").
//
// Contract:
//   - The host owns a pinned, host-mapped completion area. Each op launch carries the device alias
//     of two 64-bit words there (`done[0]`: sequence, `done[1]`: failure reason) and the value to
//     publish (`seq`, the op's sequence number, which only grows), plus two 32-bit words of device
//     memory that start at 0 (`arrivals[0]`: CTAs finished, `arrivals[1]`: failed flag; the slot has
//     four: `arrivals[2]` is a kernel's own scheduler word, cuda/attention/scheduler.cuh).
//   - cta::finish() is called by every CTA of the grid exactly once, at its very end, by all of its
//     threads. Each CTA arrives with a GPU-scope acquire-release add; the last to arrive writes `seq`
//     to `done` with st.release.sys, so every store the grid made (to any memory: the chain of
//     arrivals carries them to the last CTA, and its system-scope release is cumulative) is visible
//     to the host before it sees `seq`. Stores made through the async proxy (TMA) must be complete
//     and fenced into the generic proxy before the call. That CTA also returns the counter to 0, so
//     no reset is needed between launches.
//   - A CTA that cannot go on (a wait timed out, peers disagree) calls cta::fail(code, stage), then
//     still calls cta::finish(). The reason goes to `done[1]` (code in the low 32 bits, stage above)
//     and the last CTA publishes `seq | kFailedBit` instead of `seq`. The host checks the bit.
#pragma once

#include <cstdint>

namespace weft {

struct Completion {
  uint64_t* done;        // device alias of the host-mapped word; nullptr: no host notification
  uint64_t seq;          // value to publish
  uint32_t* arrivals;    // device words, 0 between launches: [0], [1] here, [2] a kernel's scheduler
};

constexpr uint64_t kFailedBit = 1ull << 63;

namespace cta {
__device__ inline void finish(const Completion& c);
__device__ inline void fail(const Completion& c, int32_t code, uint32_t stage);
}  // namespace cta

}  // namespace weft

#include "impl/completion.cuh"
