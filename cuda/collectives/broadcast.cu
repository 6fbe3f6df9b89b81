// broadcast.cu — the root's input lands in every rank's output. Direct protocol, push from the
// root; the others only wait for the root's "done".
#include "collectives/direct_kernel.cuh"
#include "collectives/move.cuh"

namespace weft::coll {

namespace {

// Only the root signals; every other rank waits only for the root.
struct Broadcast {
  bool root;
  __device__ void move(const Args& a, const Shared& s) {
    root = a.rank == a.root;
    if (root) {
      // Peers first; the root's own copy last, skipped when it broadcasts in place.
      const uint32_t ndst = a.in == a.out ? a.world - 1 : a.world;
      copy_out(a.in, [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % a.world, a.out); }, ndst,
               a.count * a.elem_bytes, grid_workers());
    }
  }
  __device__ bool signals(const Args&, uint32_t) const { return root; }
  __device__ bool waits_for(const Args& a, uint32_t peer) const { return peer == a.root; }
};

}  // namespace

KernelLaunch broadcast_launch(const Args& a) { return direct_launch<Broadcast>(a); }

}  // namespace weft::coll
