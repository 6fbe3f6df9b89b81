// cpu_affinity.hpp — pins the calling thread to the CPUs nearest a GPU, read from sysfs (the
// device's local_cpulist, the same answer libnuma gives, with no library to load).
#pragma once

#include <string>

namespace weft {

// Returns a note for logs: "cpus 0-15 (near GPU 0000:19:00.0)", or why nothing was pinned (no GPU,
// no sysfs entry, affinity refused). Never throws: pinning is an optimisation.
std::string pin_thread_near_device(int device);

}  // namespace weft
