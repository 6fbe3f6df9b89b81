// maps.hpp — the tensor maps of the grouped GEMMs (cuda/moe/grouped.cuh): grouped weights as one
// 3-D map, the group as the outer coordinate, and the boxes the engine's tiles load.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace weft::moe {

// Weights w [groups, K, N] (n_major) or [groups, N, K], bf16, contiguous, read as `cols` columns
// starting at column `first` of each group's N (a paired tile's gate or up half; the whole N
// otherwise), for a math tile `tile_n` wide: k-major boxes {64 K, tile_n (tile_n / 2 when paired)
// N, 1}, n-major boxes {64 N, 64 K, 1}.
void encode_weights(CUtensorMap* map, const void* w, int64_t groups, int64_t n, int64_t k, bool n_major, int64_t first,
                    int64_t cols, int tile_n, bool paired, const char* name);

}  // namespace weft::moe
