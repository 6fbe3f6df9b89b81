// op_launch.hpp — a WeftOpLaunch (weft.h: every op's launch-and-completion struct) checked and read
// into the completion words a kernel takes (each device layer has its own CompletionWords with the
// same three fields: done, seq, arrivals).
#pragma once

#include <cstdint>

#include "status.hpp"
#include "weft.h"

namespace weft {

// launch == NULL: no completion. Otherwise a WeftOpLaunch of version 1 whose done and arrivals are
// set together (done = 0: no completion either, e.g. for CUDA-graph capture).
template <class Words>
Words completion_words(const WeftOpLaunch* launch) {
  if (!launch) return Words{nullptr, 0, nullptr};
  WEFT_REQUIRE(launch->size == sizeof(WeftOpLaunch) && launch->version == 1,
               "launch must be a WeftOpLaunch with size %zu and version 1", sizeof(WeftOpLaunch));
  WEFT_REQUIRE((launch->done == 0) == (launch->arrivals == 0), "launch: done and arrivals must be set together");
  return Words{reinterpret_cast<uint64_t*>(launch->done), launch->seq, reinterpret_cast<uint32_t*>(launch->arrivals)};
}

}  // namespace weft
