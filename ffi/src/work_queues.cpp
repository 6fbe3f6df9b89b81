// work_queues.cpp — how many hardware work queues the CUDA driver gives this process per device.
//
// Every plan with the copy-engine mover adds world - 1 side streams that wait on device words
// (cuStreamWaitValue64) before their copies. The driver maps a process's streams onto
// CUDA_DEVICE_MAX_CONNECTIONS queues per device (8 by default): with more streams than queues,
// several share one, and a wait at the head of a queue holds back every stream behind it, including
// another rank's kernel launch that the waited-for word depends on. Four ranks on one GPU in one
// process (16 streams): the all-reduce's back-to-back test ran until a 3 s wait bound in 3 runs out
// of 3, and ran ~10x slower before that; with 32 queues it passed 4 runs out of 4, in 4-5 s
// (bench/DECISIONS.md, "The library asks for 32 device work queues"). So when the library loads, before any CUDA call of the process
// (the driver reads the variable when it creates a context), it asks for the maximum, unless the
// user has set it (some frameworks set 1 on purpose, to keep kernels in issue order).
#include <cstdlib>

namespace {

__attribute__((constructor)) void ask_for_work_queues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }

}  // namespace
