// dispatch.cu — MoE dispatch as one persistent kernel per rank and launch: routing (optional),
// counts, their exchange, every owner's receive layout and the row pushes (the steps, the layout and
// the epoch rules are in moe.h). Params: WeftMoeDispatchParams (weft.h), turned into DispatchArgs
// by ffi/src/moe/dispatch.cpp once per plan. The steps are device functions in dispatch.cuh (the
// fused dispatch + GEMM kernel runs them too); this kernel adds step 6, the wait for the rows.
#include <cuda_runtime.h>

#include <atomic>

#include "moe/dispatch.cuh"

namespace weft::moe {

namespace {

__global__ void __launch_bounds__(kThreads, 1) dispatch_kernel(const __grid_constant__ DispatchArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const steps::Shared s = steps::carve(smem, a.experts, a.peer.world);
  if (steps::run_steps(a, s)) {
    steps::await_rows(a, s, *s.epoch);
    if (s.fail->code == WEFT_MOE_FAIL_TIMEOUT && threadIdx.x == 0) raise_abort(s.peers, a.peer.world, a.layout.abort, *s.epoch);
  }
  if (threadIdx.x == 0) report(a.peer, *s.fail);
  cta::finish(completion_of(a.peer));
}

}  // namespace

size_t dispatch_smem_bytes(int experts, int world) {
  auto r = [](size_t b) { return (b + 15) / 16 * 16; };
  return r(size_t(world) * 8) + r(8) + r(sizeof(Failures)) + r(16) + r(size_t(world) * 4) +
         7 * r(size_t(experts) * 4) + 5 * r(size_t(kPiece) * 4);
}

cudaError_t preload_dispatch(int experts, int world) {
  constexpr int kMaxDevices = 64;
  static std::atomic<size_t> opted_in[kMaxDevices];  // the dynamic shared memory set per device so far
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  const size_t smem = dispatch_smem_bytes(experts, world);
  if (opted_in[device].load(std::memory_order_relaxed) < smem) {
    e = cudaFuncSetAttribute(dispatch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
    opted_in[device].store(smem, std::memory_order_relaxed);
  }
  return cudaSuccess;
}

cudaError_t preload_kernels(int experts, int world) {
  cudaError_t e = preload_dispatch(experts, world);
  if (e == cudaSuccess) e = preload_combine();
  if (e == cudaSuccess) e = preload_dispatch_gemm();
  return e != cudaSuccess ? e : preload_gemm_combine();
}

cudaError_t launch_dispatch(const DispatchArgs& a, int ctas, cudaStream_t stream) {
  // A no-op after the plan's preload (the attribute only ever grows).
  const cudaError_t e = preload_dispatch(a.experts, a.peer.world);
  if (e != cudaSuccess) return e;
  dispatch_kernel<<<ctas, kThreads, dispatch_smem_bytes(a.experts, a.peer.world), stream>>>(a);
  return cudaGetLastError();
}

}  // namespace weft::moe
