// all_gather.cu — every rank's `count` elements land in block `rank` of every rank's output.
// Direct protocol, push: each rank stores its block into every peer's (symmetric) output over
// NVLink and into its own, then tells each peer its part is done.
#include "collectives/move.cuh"
#include "collectives/protocol.cuh"

namespace weft::coll {

namespace {

struct Config {
  static constexpr int kThreads = coll::kThreads;
};

__global__ void __launch_bounds__(Config::kThreads, 1) all_gather_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    const uint64_t bytes = a.count * a.elem_bytes;
    const uint64_t at = uint64_t(a.rank) * bytes;
    // Destination i is rank (rank + 1 + i) % world: peers first, each rank starting at a
    // different peer so that no link is everyone's first target; the local copy comes last.
    copy_out(a.in, [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % a.world, a.out) + at; },
             a.world, bytes, grid_workers());
    cta_leave(a, s, Every{}, Every{});
  }
  cta_finish(a);
}

}  // namespace

KernelLaunch all_gather_launch(const Args& a) {
  return {reinterpret_cast<const void*>(&all_gather_kernel), a.nctas, Config::kThreads, uint32_t(shared_bytes(a.world))};
}

}  // namespace weft::coll
