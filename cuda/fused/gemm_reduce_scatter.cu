// gemm_reduce_scatter.cu — row-parallel GEMM: out [m_shard, n] on rank r = rows r·m_shard.. of the
// sum over ranks of a_q · b_q, as one persistent kernel (the owner scheme of gemm_scatter.cuh: each
// rank first stores the tiles of its own rows into its out, then adds its partial of every other
// rank's rows into that rank's out with cp.reduce.async.bulk, once the owner's flag says stored).
//
// Params: WeftTpParams (weft.h) is the argument pack the C ABI passes by pointer; ffi/src/tp turns
// it into ScatterLaunch (fused.h) with all_reduce = 0 and ownership by row shard (m_shard a
// multiple of 128, so no tile straddles two owners).
#include "fused/gemm_scatter.cuh"
#include "fused/gemm_scatter_ce.cuh"
#include "fused/launch.cuh"

namespace weft::fused {

namespace {

template <int TileN, bool BNMajor>
using Config = ScatterConfig<TileN, BNMajor, WEFT_TP_GEMM_REDUCE_SCATTER>;

template <int TileN, bool BNMajor>
cudaError_t launch(const ScatterLaunch& l) {
  using C = Config<TileN, BNMajor>;
  if (!l.state.copy_engine) return launch_scatter_kernel<C, ScatterHooks>(l);
  return l.state.direct_from >= 0 ? launch_scatter_kernel<C, CeIntoOutHooks>(l) : launch_scatter_kernel<C, CeScatterHooks>(l);
}

}  // namespace

bool gemm_reduce_scatter_supported(int tile_n) { return tile_n == 128 || tile_n == 256; }

cudaError_t launch_gemm_reduce_scatter(const ScatterLaunch& l) {
  if (l.state.all_reduce || l.state.shard_tiles <= 0) return cudaErrorInvalidValue;
  return launch_tile_shape<256, 128>(l, [&]<int TileN, bool BNMajor>() { return launch<TileN, BNMajor>(l); });
}

}  // namespace weft::fused
