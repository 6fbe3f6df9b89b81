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
//
// At world 1 (GemmCombineLaunch::local_rows) every row stays on this GPU, and the kernel is the
// grouped GEMM's own (BoundedEpilogue: a TMA store per 64 x 64 box) into the returned region in the
// receive layout; the reduction reads each item's row by the dispatch's positions. Routing 16 bytes
// per thread through st.global cost the routed epilogue 7.7% more GEMM cycles than the TMA stores
// at config A, with the same DRAM bytes (bench/DECISIONS.md, "The MoE layer's structure cost").
#include "fused/launch.cuh"
#include "moe/grouped.cuh"
#include "moe/moe.h"
#include "moe/routed_rows.cuh"

namespace weft::moe {

namespace {

struct GemmCombineState : GroupedBase {
  RoutedRows routed;
};

// World 1: the rows stored in place, nobody to tell (the reduction follows on the stream).
struct LocalCombineHooks : GroupHooks<GemmCombineState, false, BoundedEpilogue> {};

struct GemmCombineHooks : GroupHooks<GemmCombineState, false, RoutedRowsEpilogue> {
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
  if (l.local_rows) {
    const gemm::KernelParams<GemmCombineState> p = grouped_params<GemmCombineState>(
        l.a, l.b, l.c, gemm::Problem{l.rows, l.n, l.k, 1, 0}, gemm::OutputTail{l.c_ptr, l.ldc, l.n}, l.completion, l.groups);
    return fused::launch_persistent<Cfg, gemm::gemm_kernel<Cfg, LocalCombineHooks>>(p, l.ctas, l.stream);
  }
  // c: unused (the epilogue stores rows, not boxes), but a valid map for the prefetch.
  gemm::KernelParams<GemmCombineState> p = grouped_params<GemmCombineState>(
      l.a, l.b, l.a, gemm::Problem{l.rows, l.n, l.k, 1, 0}, gemm::OutputTail{nullptr, l.n, l.n}, l.completion, l.groups);
  p.hooks.routed = l.routed;
  return fused::launch_persistent<Cfg, gemm::gemm_kernel<Cfg, GemmCombineHooks>>(p, l.ctas, l.stream);
}

}  // namespace

cudaError_t preload_gemm_combine() {
  return for_each_grouped_config([]<class Cfg>(std::type_identity<Cfg>) {
    cudaError_t e = opt_in_shared_memory<gemm::gemm_kernel<Cfg, GemmCombineHooks>>(Cfg::kSmemBytes);
    if (e == cudaSuccess) e = opt_in_shared_memory<gemm::gemm_kernel<Cfg, LocalCombineHooks>>(Cfg::kSmemBytes);
    return e;
  });
}

cudaError_t launch_gemm_combine(const GemmCombineLaunch& l) {
  return with_grouped_config(l, [&]<class Cfg>(std::type_identity<Cfg>) { return launch_config<Cfg>(l); });
}

}  // namespace weft::moe
