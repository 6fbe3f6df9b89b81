// gemm_all_reduce.cu — out [m, n] on every rank = the sum over ranks of a_q · b_q, as one persistent
// kernel, by one of three movers:
//   exchange     (decode sizes) every rank computes every tile and swaps partial tiles with its
//                peers inside the epilogue (gemm_exchange.cuh);
//   copyEngine   (row shards) reduce-scatter of the partials by the copy engines, then a broadcast
//                of the final rows (gemm_scatter_ce.cuh);
//   ctas         the owner scheme of gemm_scatter.cuh with every rank's out as a destination: the
//                owner of a tile stores its partial into every rank's out, the other ranks add
//                theirs into every rank's out (ownership by row shard, or by tile index at small M).
//
// Params: WeftTpParams (weft.h) is the argument pack the C ABI passes by pointer; ffi/src/tp turns
// it into ScatterLaunch (fused.h) with all_reduce = 1; out must be symmetric.
#include "fused/gemm_scatter.cuh"
#include "fused/gemm_exchange.cuh"
#include "fused/gemm_scatter_ce.cuh"
#include "fused/launch.cuh"

namespace weft::fused {

namespace {

template <int TileN, bool BNMajor>
using Config = ScatterConfig<TileN, BNMajor, WEFT_TP_GEMM_ALL_REDUCE>;

template <int TileN, bool BNMajor>
cudaError_t launch(const ScatterLaunch& l) {
  using C = Config<TileN, BNMajor>;
  // 256-wide exchange tiles come in one wave only, one tile per CTA (ExchangeHooks::kAtOnce; the
  // planner's rule): exchange_at_once stages in the ring, which a further tile's loads would fill.
  // (gemm_ctas == 0 is the plan's preload, which launches nothing.)
  if constexpr (TileN == 256) {
    if (l.state.exchange && l.gemm_ctas > 0 && int64_t(l.state.tiles_m) * l.state.tiles_n > l.gemm_ctas) return cudaErrorInvalidValue;
  }
  if (l.state.exchange) {
    // (the register exchange: m <= 32 and tiles narrower than 256, the planner's rule)
    if constexpr (TileN != 256) {
      if (l.state.register_rows > 0) return launch_scatter_kernel<C, RegisterExchangeHooks>(l);
    }
    return launch_scatter_kernel<C, ExchangeHooks>(l);
  }
  return l.state.copy_engine ? launch_scatter_kernel<C, CeScatterHooks>(l) : launch_scatter_kernel<C, ScatterHooks>(l);
}

}  // namespace

bool gemm_all_reduce_supported(int tile_n) { return tile_n == 64 || tile_n == 128 || tile_n == 256; }

cudaError_t launch_gemm_all_reduce(const ScatterLaunch& l) {
  if (!l.state.all_reduce || (l.state.copy_engine && l.state.shard_tiles <= 0)) return cudaErrorInvalidValue;
  return launch_tile_shape<256, 128, 64>(l, [&]<int TileN, bool BNMajor>() { return launch<TileN, BNMajor>(l); });
}

}  // namespace weft::fused
