// grouped_choice.hpp — the tile width, grid and band of a grouped GEMM (groupedGemm and the MoE
// expert GEMMs). The host never sees the group sizes (they are on the device), so the choice works
// from the expected tile count: the rows' full tiles plus half a tile per group boundary.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gemm/gemm.h"

namespace weft::moe {

struct GroupedChoice {
  int tile_n;  // math tile columns: 128 or 256
  int ctas;
  int band;    // tile rows per band of the tile order
};

// tile_rows: the expected 128-row tile rows over all groups; cols: the math tile columns of one tile
// row (2 n when paired); requested: 0 or a tile width; most: the CTAs the op may use.
inline GroupedChoice choose_grouped_tiles(int64_t tile_rows, int64_t cols, int requested, int most) {
  const auto tiles = [&](int w) { return std::max<int64_t>(1, tile_rows) * ((cols + w - 1) / w); };
  const auto rounds = [&](int w) { return double((tiles(w) + most - 1) / most); };
  GroupedChoice c{};
  // As the plain GEMM chooses (ffi/src/gemm/gemm_params.cpp): a 128 x 128 tile takes 0.58 of a
  // 128 x 256 tile's time for half its work (bench/DECISIONS.md, "Tiles are 256 wide unless
  // 128-wide ones take fewer tile-times"), so 256 unless 128 finishes in fewer tile times.
  c.tile_n = requested ? requested : rounds(256) <= 0.58 * rounds(128) ? 256 : 128;
  c.ctas = int(std::clamp<int64_t>(tiles(c.tile_n), 1, most));
  c.band = gemm::default_band(c.tile_n, c.ctas);
  return c;
}

// groupedGemm: rows m in `groups` groups of unknown sizes, n output columns.
inline GroupedChoice choose_grouped(int64_t m, int64_t n, int64_t groups, int requested, int most) {
  return choose_grouped_tiles((m + gemm::kTileM - 1) / gemm::kTileM + (groups + 1) / 2, n, requested, most);
}

}  // namespace weft::moe
