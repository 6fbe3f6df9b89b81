// grid_dependency.cuh — programmatic dependent launch between two of our persistent kernels on one
// stream (sm_90 griddepcontrol). Launched with cudaLaunchAttributeProgrammaticStreamSerialization,
// a kernel's CTAs may start while the previous kernel's last CTAs are still finishing, on the SMs
// its earlier CTAs gave back: the launch and the prologue overlap the previous kernel's tail (its
// completion's system fence and host write, ~3 us at decode sizes: bench/DECISIONS.md, "Every
// persistent kernel is launched with programmatic dependent launch").
//
// Contract:
//   - grid::wait_previous() is every such kernel's first statement, in every thread: it returns once
//     the previous kernel on the stream has completed and its memory is visible, so nothing before
//     it may touch global memory (kernel parameters, tensor maps among them, are not global memory).
//     Without a programmatic predecessor it returns at once.
//   - grid::allow_next() is called by every thread of every CTA once the CTA waits for nothing any
//     more (its last stores issued, right before cta::finish). The next kernel is then launched once
//     every CTA has called it or exited; its CTAs wait in wait_previous(), so they only hold SMs that
//     this kernel's finished CTAs gave back and never keep a CTA of this one (or of a peer's kernel
//     waiting on it) from running.
#pragma once

namespace weft::grid {

__device__ __forceinline__ void wait_previous() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void allow_next() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

}  // namespace weft::grid
