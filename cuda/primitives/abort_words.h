// abort_words.h — what an op's peer waits give up on, as plain data (host and device code include
// it; the waits and the reporting are in primitives/abort.cuh).
//
//   host     the communicator's host-mapped word (weft_comm_abort): 0 while healthy, else the
//            declared rank + 1. The host stores it once; every wait polls it.
//   plan[q]  the op plan's abort word in rank q's workspace, as this process maps it. A rank whose
//            own wait runs out raises every rank's word to abort_tag(epoch, itself) (atomicMax), so
//            that the peers waiting on it stop within a poll instead of at their own timeout. The
//            words only grow and are compared with the launch's epoch << 16, so a later launch is
//            not affected.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define WEFT_ABORT_HD __host__ __device__
#else
#define WEFT_ABORT_HD
#endif

namespace weft {

// Ranks an op's AbortWords can name (the fused TP ops' and the ring's world limit).
constexpr int kAbortMaxRanks = 8;

struct AbortWords {
  const volatile uint64_t* host;
  uint64_t* plan[kAbortMaxRanks];
};

WEFT_ABORT_HD constexpr uint64_t abort_tag(uint64_t epoch, int raiser) { return (epoch << 16) | uint64_t(raiser + 1); }

}  // namespace weft
