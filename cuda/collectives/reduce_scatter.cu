// reduce_scatter.cu — rank r's output is the sum over ranks of block r of their inputs.
// Direct protocol, pull: each rank reads its block from every rank's (symmetric) input over
// NVLink, sums in rank order in fp32 and stores locally; "done" tells each peer that its input
// is no longer read.
#include "collectives/direct_kernel.cuh"
#include "collectives/move.cuh"

namespace weft::coll {

namespace {

struct ReduceScatter : ToEveryPeer {
  __device__ static void move(const Args& a, const Shared& s) {
    const uint64_t at = uint64_t(a.rank) * a.count * a.elem_bytes;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      sum_out<T>([&](uint32_t q) { return on_rank(a, s, q, a.in) + at; }, a.world,
                 [&](uint32_t) { return a.out; }, 1, a.count, grid_workers());
    });
  }
};

}  // namespace

KernelLaunch reduce_scatter_launch(const Args& a) { return direct_launch<ReduceScatter>(a); }

}  // namespace weft::coll
