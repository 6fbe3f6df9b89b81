// topology.hpp — how local GPUs are linked, and peer access between them.
#pragma once

#include <cstdint>

namespace weft {

// NVLink links from device a to device b, read through NVML (dlopen'ed: libnvidia-ml ships with
// the driver, not the toolkit). 0 when NVML is absent or the GPUs are not linked directly.
int nvlink_count(int a, int b);

// cudaDeviceEnablePeerAccess(device -> peer), idempotent and thread-safe. Throws
// WEFT_E_UNSUPPORTED when the pair cannot reach each other.
void enable_peer_access(int32_t device, int32_t peer);

}  // namespace weft
