// grouped_gemm.cu — groupedGemm: the engine with GroupedHooks (grouped.cuh), one instantiation per
// tile width and B layout, on a persistent grid of GroupedLaunch::ctas CTAs (the host cannot count
// the tiles: the group sizes are on the device; CTAs past the last tile leave at once).
#include "fused/launch.cuh"
#include "moe/grouped.cuh"
#include "moe/moe.h"

namespace weft::moe {

namespace {

template <class Cfg>
cudaError_t launch_config(const GroupedLaunch& l) {
  using Hooks = GroupedHooks<false>;
  gemm::KernelParams<GroupedState> p{};
  p.a = l.a;
  p.b = l.b;
  p.c = l.c;
  p.problem = gemm::Problem{l.rows, l.n, l.k, 1, l.a_box_rows};
  p.tail = gemm::OutputTail{l.c_ptr, l.ldc, l.n};
  p.completion = Completion{l.completion.done, l.completion.seq, l.completion.arrivals};
  p.hooks.groups = l.groups;
  p.hooks.completion = p.completion;
  return fused::launch_persistent<Cfg, gemm::gemm_kernel<Cfg, Hooks>>(p, l.ctas, l.stream);
}

template <int TileN>
cudaError_t launch_width(const GroupedLaunch& l) {
  if (l.b_n_major) return launch_config<gemm::Config<TileN, 1, 1, true, false>>(l);
  return launch_config<gemm::Config<TileN, 1, 1, false, false>>(l);
}

}  // namespace

cudaError_t launch_grouped(const GroupedLaunch& l) {
  switch (l.tile_n) {
    case 256: return launch_width<256>(l);
    case 128: return launch_width<128>(l);
    default: return cudaErrorInvalidConfiguration;
  }
}

int grouped_stages(int tile_n) {
  return tile_n == 256 ? gemm::Config<256, 1, 1, false, false>::kStages : gemm::Config<128, 1, 1, false, false>::kStages;
}

}  // namespace weft::moe
