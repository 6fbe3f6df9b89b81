// fifo.cuh — GPU threads push commands to the rank's proxy thread (DESIGN.md "Inter-node").
//
// Contract:
//   - A FifoDevice (proxy_command.h) describes the proxy's device lane (weft_proxy_fifo gives the addresses): 64-byte
//     slots in pinned host memory mapped into the GPU, a ticket counter in device memory, and the
//     lane's control words (tail, completed, error) read through the host mapping. Slot layout and
//     the meaning of each command: primitives/proxy_command.h.
//   - thread::push() is called by ONE thread per command (any number of threads and CTAs at once).
//     It claims a ticket with a device-scope atomicAdd, waits while the FIFO is full (backpressure:
//     ticket >= tail + capacity), writes the slot body with plain stores and commits the header with
//     st.release.sys, so the proxy, which loads the header with acquire, sees the whole body.
//     Returns the ticket through `ticket`.
//   - The caller's own stores that the command's data depends on (the PUT source bytes) must be
//     visible system-wide before push(): a __threadfence_system() by the thread that wrote them, or
//     __syncthreads() + one thread's __threadfence_system() for a CTA's tile, then push().
//   - thread::wait_done() waits until the proxy completed every ticket <= `ticket` (PUT: data landed
//     at the peer and its signal raised). Useful before reusing a PUT's source buffer.
//   - Every wait is bounded (WaitBudget, as in signal.cuh) and stops early when the proxy has failed
//     (its error word is non-zero): kAborted, with the proxy's WEFT_E_* status in `*status`.
//     A push that gives up has claimed a ticket it never filled; the proxy stops at that ticket, so
//     the kernel must report failure (cta::fail) and the host must tear the communicator down.
//
// Why the ticket counter is in device memory: atomics of many GPU threads on one word of mapped
// host memory cross PCIe as PCIe AtomicOps, which not every root complex supports, and CUDA does
// not make them atomic with respect to the CPU (hostNativeAtomicSupported is 0 on x86 hosts). So
// host producers use a separate host lane with its own counter, and device producers never share a
// counter with the CPU.
//
// Cost (napkin): one push = 1 device atomic (~1 us under contention across SMs), 1 PCIe read of
// the tail (~1 us), 64 B of posted PCIe writes. Amortise by putting large tiles per command.
#pragma once

#include <cstdint>

#include "proxy_command.h"
#include "signal.cuh"

namespace weft::proxy {

namespace thread {

__device__ inline sys::WaitResult push(const FifoDevice& fifo, const Command& command, uint64_t* ticket,
                                       int64_t* status, sys::WaitBudget budget = {});

__device__ inline sys::WaitResult wait_done(const FifoDevice& fifo, uint64_t ticket, int64_t* status,
                                            sys::WaitBudget budget = {});

}  // namespace thread

}  // namespace weft::proxy

#include "impl/fifo.cuh"
