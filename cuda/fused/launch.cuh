// launch.cuh — what every fused kernel shares: its engine configuration, its kernel parameters,
// the kernel shape with mover CTAs, and the one generic launcher: a persistent grid of exactly
// `ctas` CTAs (the cost model sized it to at most one per SM, and every CTA must be resident at
// once, because CTAs of one rank wait for CTAs of another), with the engine Config's shared memory.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "gemm/kernel.cuh"
#include "gemm/launch.cuh"
#include "gemm/params.cuh"
#include "primitives/persistent_launch.cuh"

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

// ctas == 0: only set the opt-in, which also loads the kernel's module (plans do it at creation;
// see build_and_preload() in ffi/src/tp/abi.cpp). Kernel is the __global__ function itself.
template <class Cfg, auto Kernel, class State>
cudaError_t launch_persistent(const gemm::KernelParams<State>& p, int ctas, cudaStream_t stream) {
  const cudaError_t e = opt_in_shared_memory<Kernel>(Cfg::kSmemBytes);
  if (e != cudaSuccess || ctas == 0) return e;
  return launch_persistent_grid<Kernel>(p, ctas, Cfg::kThreads, Cfg::kSmemBytes, stream);
}

// A kernel with mover CTAs for the launch struct's tile width (one of Tiles) and B layout: the GEMM
// reads A through `a` and writes the launch's c; `ctas` is the whole grid (movers and GEMM CTAs).
template <class Hooks, auto Mover, int... Tiles, class Launch>
cudaError_t launch_mover_gemm(const Launch& l, const CUtensorMap& a, int ctas) {
  return launch_tile_shape<Tiles...>(l, [&]<int TileN, bool BNMajor>() {
    using Gemm = FusedGemm<TileN, BNMajor>;
    return launch_persistent<Gemm, mover_gemm_kernel<Gemm, typename Hooks::State, Hooks, Mover>>(fused_params(l, a, l.c),
                                                                                                  ctas, l.stream);
  });
}

}  // namespace weft::fused
