// call_checks.hpp — what every collective call checks about its arguments, on one node
// (collectives.cpp) and across nodes (hierarchical_collective.cpp) alike. Each check fails through WEFT_REQUIRE
// with a message that names the collective (`op`) and the argument.
#pragma once

#include <cstdint>

#include "weft.h"

struct WeftComm;

namespace weft::comm {

// "all_gather", "reduce_scatter", ... (messages); "?" for a value outside WeftCollectiveKind.
const char* kind_name(int32_t kind);
// Bytes per element of a WeftDtype; 0 for a value that is none.
uint32_t dtype_bytes(int32_t dtype);
// reduceScatter and allReduce sum, so they take only bf16, f16 and f32.
bool is_sum(int32_t kind);
bool summable(int32_t dtype);

// [ptr, ptr + bytes) must lie in this rank's user heap: a peer reaches it at the same offset.
void require_symmetric(const WeftComm& c, uint64_t ptr, uint64_t bytes, const char* what, const char* op);
// ptr must be memory of this rank's device (a local, non-symmetric tensor is fine).
void require_on_device(const WeftComm& c, uint64_t ptr, const char* what, const char* op);

}  // namespace weft::comm
