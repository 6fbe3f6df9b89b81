// broadcast.cu — the root's input lands in every rank's output. Direct protocol, push from the
// root; the others only wait for the root's "done".
#include "collectives/move.cuh"
#include "collectives/protocol.cuh"

namespace weft::coll {

namespace {

struct Config {
  static constexpr int kThreads = coll::kThreads;
};

__global__ void __launch_bounds__(Config::kThreads, 1) broadcast_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    const bool root = a.rank == a.root;
    if (root) {
      // Peers first; the root's own copy last, skipped when it broadcasts in place.
      const uint32_t ndst = a.in == a.out ? a.world - 1 : a.world;
      copy_out(a.in, [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % a.world, a.out); }, ndst,
               a.count * a.elem_bytes, grid_workers());
    }
    cta_leave(a, s, [&](uint32_t) { return root; }, [&](uint32_t p) { return p == a.root; });
  }
  cta_finish(a);
}

}  // namespace

KernelLaunch broadcast_launch(const Args& a) {
  return {reinterpret_cast<const void*>(&broadcast_kernel), a.nctas, Config::kThreads, uint32_t(shared_bytes(a.world))};
}

}  // namespace weft::coll
