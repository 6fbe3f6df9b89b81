// live_counters.hpp — how many transport resources are alive in this process, so tests can prove
// that teardown released everything (weft_transport_counters).
#pragma once

#include <atomic>
#include <cstdint>

namespace weft {

struct LiveCounters {
  std::atomic<int64_t> transports{0};     // open libfabric endpoints (fabric+domain+ep+cq+av)
  std::atomic<int64_t> regions{0};        // registered memory regions (fi_mr), internal ones included
  std::atomic<int64_t> proxy_threads{0};  // proxy threads running
  std::atomic<int64_t> host_buffers{0};   // HostMemory blocks (FIFOs, control regions, user buffers)
};

LiveCounters& live_counters();

}  // namespace weft
