// reduce_scatter.cu — rank r's output is the sum over ranks of block r of their inputs.
// Direct protocol, pull: each rank reads its block from every rank's (symmetric) input over
// NVLink, sums in rank order in fp32 and stores locally; "done" tells each peer that its input
// is no longer read.
#include "collectives/move.cuh"
#include "collectives/protocol.cuh"

namespace weft::coll {

namespace {

struct Config {
  static constexpr int kThreads = coll::kThreads;
};

__global__ void __launch_bounds__(Config::kThreads, 1) reduce_scatter_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    const uint64_t at = uint64_t(a.rank) * a.count * a.elem_bytes;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      sum_out<T>([&](uint32_t q) { return on_rank(a, s, q, a.in) + at; }, a.world,
                 [&](uint32_t) { return a.out; }, 1, a.count, grid_workers());
    });
    cta_leave(a, s, Every{}, Every{});
  }
  cta_finish(a);
}

}  // namespace

KernelLaunch reduce_scatter_launch(const Args& a) {
  return {reinterpret_cast<const void*>(&reduce_scatter_kernel), a.nctas, Config::kThreads, uint32_t(shared_bytes(a.world))};
}

}  // namespace weft::coll
