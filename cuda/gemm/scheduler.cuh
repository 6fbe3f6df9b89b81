// scheduler.cuh — the default persistent tile order: grouped ("swizzled") bands for L2 reuse.
//
// Work is handed out in cluster tiles (ClusterM x ClusterN CTA tiles); cluster c of G takes units
// c, c + G, c + 2G, ... Unit u lies in a band of group_m cluster-tile rows and walks that band
// column by column, so the clusters running at one time cover a square-ish patch of C: its A rows
// and B columns are read from HBM once and served from L2 to the rest.
//   Example, 8192 x 8192 with 128 x 256 tiles, clusters of one, group_m 4: a band is
//   512 rows; the 132 CTAs of an H200 cover 512 x 8448 of C at a time, so a wave reads an 8 MiB A
//   panel once and streams all of B past it in 64-column k-slices shared by the band's 4 rows.
//   The default band (gemm::default_band) is taller: bench/DECISIONS.md, "Tile-order bands are
//   √(ctas × tile_n / 128) tile rows high".
#pragma once

#include <cstdint>

#include "hooks.cuh"
#include "params.cuh"

namespace weft::gemm {

// Unit `unit` of a walk in whole bands of `group` tile rows across `tiles_n` tile columns: its tile
// row within the walk and its tile column. The fused ops' orders use it on shards and chunks whose
// row counts their planners made multiples of the band, so no band is ever cut short.
struct BandTile {
  int32_t row, col;
};
__device__ inline BandTile whole_band_tile(int32_t unit, int32_t group, int32_t tiles_n) {
  const int32_t per_band = group * tiles_n;
  const int32_t band = unit / per_band;
  const int32_t local = unit - band * per_band;
  return {band * group + local % group, local / group};
}

// Tile (tile_m, tile_n) of Cfg's CTA tiles, over all of K.
template <class Cfg>
__device__ inline void set_whole_k_tile(TileCoord& t, int32_t tile_m, int32_t tile_n) {
  t.tile_m = tile_m;
  t.tile_n = tile_n;
  t.m0 = tile_m * Cfg::kTileM;
  t.n0 = tile_n * Cfg::kTileN;
  t.k_begin = 0;
  t.k_blocks = -1;
  t.piece = -1;
}

template <class Cfg>
class GroupedScheduler {
 public:
  template <class HookState>
  __device__ GroupedScheduler(const Problem& p, const HookState&, uint32_t cluster_rank)
      : units_m_((p.m + Cfg::kTileM * Cfg::kClusterM - 1) / (Cfg::kTileM * Cfg::kClusterM)),
        units_n_((p.n + Cfg::kTileN * Cfg::kClusterN - 1) / (Cfg::kTileN * Cfg::kClusterN)),
        group_m_(p.group_m > 0 ? p.group_m : 1),
        unit_(static_cast<int32_t>(blockIdx.x) / Cfg::kClusterSize),
        stride_(static_cast<int32_t>(gridDim.x) / Cfg::kClusterSize),
        rank_(static_cast<int32_t>(cluster_rank)) {}

  __device__ bool next(TileCoord& t) {
    if (unit_ >= units_m_ * units_n_) return false;
    const int32_t per_band = group_m_ * units_n_;
    const int32_t band = unit_ / per_band;
    const int32_t first_m = band * group_m_;
    const int32_t rows = min(group_m_, units_m_ - first_m);
    const int32_t local = unit_ - band * per_band;
    const int32_t um = first_m + local % rows;
    const int32_t un = local / rows;
    set_whole_k_tile<Cfg>(t, um * Cfg::kClusterM + (Cfg::kClusterM == 2 ? rank_ : 0),
                          un * Cfg::kClusterN + (Cfg::kClusterN == 2 ? rank_ : 0));
    unit_ += stride_;
    return true;
  }

 private:
  int32_t units_m_, units_n_, group_m_, unit_, stride_, rank_;
};

}  // namespace weft::gemm
