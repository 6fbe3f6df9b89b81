// launch.cuh — what every fused kernel shares: its engine configuration, its kernel parameters,
// the kernel shape with mover CTAs, and the one generic launcher: a persistent grid of exactly
// `ctas` CTAs (the cost model sized it to at most one per SM, and every CTA must be resident at
// once, because CTAs of one rank wait for CTAs of another), with the engine Config's shared memory.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>

#include "gemm/kernel.cuh"
#include "gemm/launch.cuh"
#include "gemm/params.cuh"

namespace weft::fused {

// The engine of every fused kernel: 128-row tiles of TileN columns, one CTA per tile (no cluster),
// B n-major or k-major, bf16 out.
template <int TileN, bool BNMajor>
using FusedGemm = gemm::Config<TileN, 1, 1, BNMajor, false>;

// A launch struct's kernel parameters: `a` and `c` as the GEMM reads and writes them (a landing
// buffer, a staging slot, ...), the rest as every fused launch struct carries it. Fused outputs fill
// whole 16-byte chunks (the planner requires n % 8 == 0), so there is no tail staging.
// a_box_rows: Problem::a_box_rows (0: a whole tile, what every map but a short plain A uses).
template <class Launch>
auto fused_params(const Launch& l, const CUtensorMap& a, const CUtensorMap& c, int32_t a_box_rows = 0) {
  gemm::KernelParams<std::remove_cvref_t<decltype(l.state)>> p{};
  p.a = a;
  p.b = l.b;
  p.c = c;
  p.problem = gemm::Problem{l.m, l.n, l.k, l.state.group_m, a_box_rows};
  p.tail = gemm::OutputTail{nullptr, l.n, l.n};
  p.completion = Completion{l.completion.done, l.completion.seq, l.completion.arrivals};
  p.hooks = l.state;
  return p;
}

// Runs launch.template operator()<TileN, BNMajor>() for the launch struct's tile width (one of Tiles:
// each is a separate instantiation of the kernel) and B layout; any other width is a configuration
// error.
template <int... Tiles, class Launch, class Fn>
cudaError_t launch_tile_shape(const Launch& l, Fn&& launch) {
  cudaError_t e = cudaErrorInvalidConfiguration;
  (void)((l.tile_n == Tiles &&
          (e = l.b_n_major ? launch.template operator()<Tiles, true>() : launch.template operator()<Tiles, false>(), true)) ||
         ...);
  return e;
}

// A fused kernel with mover CTAs: the first state.comm_ctas CTAs run Mover(state, completion), which
// moves data and raises the flags the GEMM's hooks wait on, then report done like every CTA; the
// rest run the GEMM engine with Hooks. Hooks::on_kernel_start runs in every CTA, movers included.
template <class Gemm, class State, class Hooks, auto Mover>
__global__ void __launch_bounds__(Gemm::kThreads, 1)
    mover_gemm_kernel(const __grid_constant__ gemm::KernelParams<State> p) {
  grid::wait_previous();
  if (threadIdx.x == 0) Hooks::on_kernel_start(p.hooks);
  if (blockIdx.x < static_cast<uint32_t>(p.hooks.comm_ctas)) {
    Mover(p.hooks, p.completion);
    grid::allow_next();
    cta::finish(p.completion);  // starts with the CTA barrier the mover's last stores need
    return;
  }
  gemm::engine_cta<Gemm, Hooks>(p);
}

// ctas == 0: only set the opt-in, which also loads the kernel's module (plans do it at creation).
// Kernel is the __global__ function itself (a template argument, so that the opt-in flag below is
// per kernel: two kernels with the same Config need one opt-in each).
template <class Cfg, auto Kernel, class State>
cudaError_t launch_persistent(const gemm::KernelParams<State>& p, int ctas, cudaStream_t stream) {
  constexpr int kMaxDevices = 64;
  // The shared-memory opt-in is per device and per kernel: set it once.
  static std::atomic<bool> opted_in[kMaxDevices];
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!opted_in[device].load(std::memory_order_relaxed)) {
    e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
    if (e != cudaSuccess) return e;
    opted_in[device].store(true, std::memory_order_relaxed);
  }
  if (ctas == 0) return cudaSuccess;  // opt-in only: loads the kernel (see build_and_preload() in ffi/src/tp/abi.cpp)
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr = gemm::programmatic_launch();
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, Kernel, p);
}

}  // namespace weft::fused
