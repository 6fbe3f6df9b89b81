// device_push.h — a kernel whose threads push commands into a proxy's device lane: the GPU-side
// FIFO test (test/transport/device-push.test.ts) and the GPU-pushed command-rate benchmark.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "primitives/proxy_command.h"

namespace weft::kernels {

// Every thread g of ctas x threads pushes `per_thread` copies of `tmpl` in order, the i-th with
// signal_offset = tmpl.signal_offset + 8 * g and signal_value = i + 1, so that each thread raises
// its own word to per_thread. failures[0] counts pushes that did not succeed, failures[1] holds
// the last proxy status seen (device memory, zeroed by the caller).
cudaError_t push_commands(const proxy::FifoDevice& fifo, const proxy::Command& tmpl, uint32_t ctas,
                          uint32_t threads, uint32_t per_thread, unsigned long long* failures,
                          uint64_t timeout_ns, cudaStream_t stream);

}  // namespace weft::kernels
