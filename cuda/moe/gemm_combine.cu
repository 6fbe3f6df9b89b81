// gemm_combine.cu — the GEMM half of MoE down-projection + combine: the engine over the dispatch's
// receive layout (grouped.cuh: a group per local expert, rows expert_offsets[le] .. + counts[le]),
// A = the hidden rows [capacity, k] by TMA, B = w2[expert], and the routed-rows epilogue
// (routed_rows.cuh): each output row straight into its source rank's returned-row slot, then the
// source's per-block counter. The reduction (out = the weighted sum of a token's k returned rows, in
// top-k order) is the combine kernel that follows on the stream (combine.cu, CombineArgs::pieces).
//
// Ready words: CTA 0 raises ready[me] = epoch in every rank's combine workspace at its start (this
// rank's reduction of the launch before is done: stream order); a rank's epilogue stores into rank
// q's slots only after it has seen ready[q] >= epoch. The epoch is the combine plan's launch count
// + 1: the reduction advances it at its end, after this kernel.
// A failed layout (the dispatch's status word) has no tiles (GroupScheduler), so nothing is sent;
// the reduction then credits its own counters and reports it (combine.cu).
#include "fused/launch.cuh"
#include "moe/grouped.cuh"
#include "moe/moe.h"
#include "moe/routed_rows.cuh"

namespace weft::moe {

namespace {

struct GemmCombineState : GroupedBase {
  RoutedRows routed;
};

struct GemmCombineHooks : gemm::DefaultHooks {
  using State = GemmCombineState;
  template <class Cfg>
  using Scheduler = GroupScheduler<Cfg>;
  template <class Cfg>
  using BSource = GroupB<Cfg, false, GemmCombineState>;
  template <class Cfg, class H>
  using Epilogue = RoutedRowsEpilogue<Cfg, H>;

  static __device__ void on_kernel_start(const State& s) {
    if (blockIdx.x != 0) return;
    const RoutedRows& r = s.routed;
    const uint64_t epoch = *reinterpret_cast<const volatile uint64_t*>(r.peers[r.rank] + r.ws_offset + r.epoch) + 1;
    for (int q = 0; q < r.world; ++q)
      sys::signal_store(reinterpret_cast<uint64_t*>(r.peers[q] + r.ws_offset + r.ready) + r.rank, epoch);
  }
};

template <class Cfg>
cudaError_t launch_config(const GemmCombineLaunch& l) {
  gemm::KernelParams<GemmCombineState> p{};
  p.a = l.a;
  p.b = l.b;
  p.c = l.a;  // unused (the epilogue stores rows, not boxes), but a valid map for the prefetch
  p.problem = gemm::Problem{l.rows, l.n, l.k, 1, 0};
  p.tail = gemm::OutputTail{nullptr, l.n, l.n};
  p.completion = Completion{l.completion.done, l.completion.seq, l.completion.arrivals};
  p.hooks.groups = l.groups;
  p.hooks.completion = p.completion;
  p.hooks.routed = l.routed;
  return fused::launch_persistent<Cfg, gemm::gemm_kernel<Cfg, GemmCombineHooks>>(p, l.ctas, l.stream);
}

template <int TileN>
cudaError_t launch_width(const GemmCombineLaunch& l) {
  if (l.b_n_major) return launch_config<gemm::Config<TileN, 1, 1, true, false>>(l);
  return launch_config<gemm::Config<TileN, 1, 1, false, false>>(l);
}

}  // namespace

cudaError_t launch_gemm_combine(const GemmCombineLaunch& l) {
  switch (l.tile_n) {
    case 256: return launch_width<256>(l);
    case 128: return launch_width<128>(l);
    default: return cudaErrorInvalidConfiguration;
  }
}

}  // namespace weft::moe
