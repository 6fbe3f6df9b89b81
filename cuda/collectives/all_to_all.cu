// all_to_all.cu — rank r's input block d (send_counts[d] elements) lands in rank d's output at the
// place rank d reserved for rank r (its recv offset). Direct protocol, push. Each rank tells each
// peer, in its entry descriptor, how many elements it expects from it and where they go; the
// sender checks the count against its own send count before moving anything.
#include "collectives/direct_kernel.cuh"
#include "collectives/move.cuh"

namespace weft::coll {

namespace {

struct AllToAll : ToEveryPeer {
  __device__ static void move(const Args& a, const Shared& s) {
    const uint64_t* send_off = a.a2a;
    const uint64_t* send_count = a.a2a + a.world;
    for (uint32_t i = 0; i < a.world; ++i) {
      const uint32_t d = (a.rank + 1 + i) % a.world;  // peers first, self last
      char* dst = on_rank(a, s, d, a.out) + s.remote_off[d] * a.elem_bytes;
      copy_out(a.in + send_off[d] * a.elem_bytes, [&](uint32_t) { return dst; }, 1,
               send_count[d] * a.elem_bytes, grid_workers());
    }
  }
};

}  // namespace

KernelLaunch all_to_all_launch(const Args& a) { return direct_launch<AllToAll>(a); }

}  // namespace weft::coll
