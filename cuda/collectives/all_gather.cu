// all_gather.cu — every rank's `count` elements land in block `rank` of every rank's output.
// Direct protocol, push: each rank stores its block into every peer's (symmetric) output over
// NVLink and into its own, then tells each peer its part is done.
#include "collectives/direct_kernel.cuh"
#include "collectives/move.cuh"

namespace weft::coll {

namespace {

struct AllGather : ToEveryPeer {
  __device__ static void move(const Args& a, const Shared& s) {
    const uint64_t bytes = a.count * a.elem_bytes;
    const uint64_t at = uint64_t(a.rank) * bytes;
    // Destination i is rank (rank + 1 + i) % world: peers first, each rank starting at a
    // different peer so that no link is everyone's first target; the local copy comes last.
    copy_out(a.in, [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % a.world, a.out) + at; },
             a.world, bytes, grid_workers());
  }
};

}  // namespace

KernelLaunch all_gather_launch(const Args& a) { return direct_launch<AllGather>(a); }

}  // namespace weft::coll
