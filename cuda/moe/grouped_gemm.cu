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
  const gemm::KernelParams<GroupedState> p =
      grouped_params<GroupedState>(l.a, l.b, l.c, gemm::Problem{l.rows, l.n, l.k, 1, l.a_box_rows},
                                   gemm::OutputTail{l.c_ptr, l.ldc, l.n}, l.completion, l.groups);
  return fused::launch_persistent<Cfg, gemm::gemm_kernel<Cfg, Hooks>>(p, l.ctas, l.stream);
}

}  // namespace

cudaError_t launch_grouped(const GroupedLaunch& l) {
  return with_grouped_config(l, [&]<class Cfg>(std::type_identity<Cfg>) { return launch_config<Cfg>(l); });
}

int grouped_stages(int tile_n) {
  return tile_n == 256 ? gemm::Config<256, 1, 1, false, false>::kStages : gemm::Config<128, 1, 1, false, false>::kStages;
}

}  // namespace weft::moe
