// gemm_all_reduce.cu — out [m, n] on every rank = the sum over ranks of a_q · b_q, as one persistent
// kernel (the owner scheme of gemm_scatter.cuh with every rank's out as a destination: the owner of
// a tile stores its partial into every rank's out, the other ranks add theirs into every rank's
// out). At large M that is the reduce-scatter scheme plus a broadcast of each owned tile, folded into
// the same stores; at decode sizes (m = 16 .. 512) ownership goes by tile index, every rank computes
// every tile once, and the reduction costs one store, one flag and one add per tile after the math.
//
// Params: WeftTpParams (weft.h) is the argument pack the C ABI passes by pointer; ffi/src/tp turns
// it into ScatterLaunch (fused.h) with all_reduce = 1; out must be symmetric.
#include "fused/gemm_scatter.cuh"
#include "fused/gemm_scatter_ce.cuh"
#include "fused/launch.cuh"

namespace weft::fused {

namespace {

template <int TileN, bool BNMajor>
using Config = ScatterConfig<TileN, BNMajor, WEFT_TP_GEMM_ALL_REDUCE>;

template <int TileN, bool BNMajor>
cudaError_t launch(const ScatterLaunch& l) {
  return l.state.copy_engine ? launch_scatter_ce_config<Config<TileN, BNMajor>>(l)
                             : launch_scatter_config<Config<TileN, BNMajor>>(l);
}

}  // namespace

bool gemm_all_reduce_supported(int tile_n) { return tile_n == 64 || tile_n == 128 || tile_n == 256; }

cudaError_t launch_gemm_all_reduce(const ScatterLaunch& l) {
  if (!l.state.all_reduce || (l.state.copy_engine && l.state.shard_tiles <= 0)) return cudaErrorInvalidValue;
  return launch_tile_shape<256, 128, 64>(l, [&]<int TileN, bool BNMajor>() { return launch<TileN, BNMajor>(l); });
}

}  // namespace weft::fused
