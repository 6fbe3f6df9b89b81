// call_checks.cpp — see call_checks.hpp.
#include "call_checks.hpp"

#include "comm.hpp"
#include "device_guard.hpp"
#include "status.hpp"

namespace weft::comm {

const char* kind_name(int32_t k) {
  static const char* names[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast", "barrier"};
  return k >= 0 && k <= WEFT_BARRIER ? names[k] : "?";
}

uint32_t dtype_bytes(int32_t d) {
  switch (d) {
    case WEFT_BF16: case WEFT_F16: return 2;
    case WEFT_F32: case WEFT_I32: return 4;
    case WEFT_U8: return 1;
    default: return 0;
  }
}

bool is_sum(int32_t kind) { return kind == WEFT_REDUCE_SCATTER || kind == WEFT_ALL_REDUCE; }

bool summable(int32_t d) { return d == WEFT_BF16 || d == WEFT_F16 || d == WEFT_F32; }

void require_symmetric(const WeftComm& c, uint64_t ptr, uint64_t bytes, const char* what, const char* op) {
  const uint64_t base = reinterpret_cast<uint64_t>(c.arena) + c.layout.heap;
  WEFT_REQUIRE(ptr >= base && ptr + bytes <= base + c.heap_bytes,
               "%s: %s (%#llx, %llu bytes) must be a symmetric tensor inside this communicator's heap [%#llx, %#llx)",
               op, what, (unsigned long long)ptr, (unsigned long long)bytes, (unsigned long long)base,
               (unsigned long long)(base + c.heap_bytes));
}

void require_on_device(const WeftComm& c, uint64_t ptr, const char* what, const char* op) {
  WEFT_REQUIRE(ptr != 0, "%s: %s must not be NULL", op, what);
  // Inside this rank's own arena it is on this device; skip the driver query (every collective
  // call checks its tensors, and symmetric ones live here).
  const uint64_t arena = reinterpret_cast<uint64_t>(c.arena);
  if (ptr >= arena && ptr - arena < c.layout.total) return;
  const int dev = pointer_device(reinterpret_cast<const void*>(ptr));
  WEFT_REQUIRE(dev == c.device, "%s: %s (%#llx) is on device %d but this rank's communicator is on device %d",
               op, what, (unsigned long long)ptr, dev, c.device);
}

}  // namespace weft::comm
