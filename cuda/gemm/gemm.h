// gemm.h — the host-side face of the GEMM engine, included by ffi/src (plain C++, no device code).
//
// The engine computes C = A · op(B) in bf16 with fp32 accumulation:
//   A  [M, K] row-major bf16, row stride lda (elements)
//   B  [N, K] row-major (b_n_major = false, y = x·Wᵀ) or [K, N] row-major (b_n_major = true)
//   C  [M, N] row-major bf16 or fp32, row stride ldc
// Operands travel as CUtensorMaps that the caller encodes with the box sizes box_dims() returns, so
// a fused op can point them at padded buffers or at peer memory.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace weft::gemm {

// Fixed by the kernel: 128 rows per CTA tile (two consumer warpgroups x 64), 64 K per stage.
constexpr int kTileM = 128;
constexpr int kTileK = 64;

// One instantiated kernel shape. Valid combinations are listed by tile_config_supported().
struct TileConfig {
  int tile_n;     // 64, 128 or 256 columns of C per CTA tile
  int cluster_m;  // 2: two CTAs on neighbouring M tiles share (multicast) the B tile
  int cluster_n;  // 2: two CTAs on neighbouring N tiles share (multicast) the A tile
};

bool tile_config_supported(const TileConfig& t);

// TMA box sizes {inner, outer} in elements for each operand's tensor map.
struct Boxes {
  uint32_t a[2];
  uint32_t b[2];
  uint32_t c[2];
};
// a_rows: A's row count. A shorter than one tile is loaded in boxes of exactly its rows (see
// Problem::a_box_rows in params.cuh); the launch passes a_box_rows(t, a_rows) with such a map.
Boxes box_dims(const TileConfig& t, bool b_n_major, bool out_f32, int64_t a_rows = kTileM);
inline int32_t a_box_rows(const TileConfig& t, int64_t a_rows) {
  if (t.cluster_n == 2) return kTileM / 2;
  return a_rows > 0 && a_rows < kTileM ? int32_t(a_rows) : kTileM;
}

// The default tile-order band height, in tile rows (scheduler.cuh). The CTAs running at one time
// cover a patch of C about `band` tile rows high and ctas / band tile columns wide, and read from HBM
// the A rows and B columns of that patch, band * kTileM + (ctas / band) * tile_n lines of K. That sum
// is least at band * kTileM = (ctas / band) * tile_n: band = sqrt(ctas * tile_n / kTileM), here the
// power of two at or below it (16 for 128 x 256 tiles on 132 SMs; 8 for 128 x 128). Measured against
// the bands of 4 used before: 0.5-3% faster GEMMs and 2-4% faster fused reduce-scatters at the
// benchmark shapes (bench/DECISIONS.md, "Tile-order bands are √(ctas × tile_n / 128) tile rows high").
inline int default_band(int tile_n, int ctas) {
  int band = 1;
  while (int64_t(2 * band) * (2 * band) * kTileM <= int64_t(ctas) * tile_n) band *= 2;
  return band;
}

// The persistent grid for `units` units of work (tiles, or cluster tiles of `cluster` CTAs) on at
// most `most` CTAs: the fewest CTAs that still take the fewest rounds, ceil(units / rounds), in whole
// clusters. With the same number of rounds, fewer tiles in flight at once run faster: 128 CTAs
// instead of 132 took 0.5-2.4% off our GEMM at every benchmark shape whose tile count is a multiple
// of 128 (1024-3584 tiles), and at 8192 x 4096 x 8192 ncu counted 537 MB read from HBM against 646
// (the waves of 132 straddle the tile-order bands of 16 rows; bench/DECISIONS.md, "The grid is the
// fewest CTAs that keep the fewest rounds"). (A/B: the plain GEMM's config.maxCtas.)
inline int balanced_ctas(int64_t units, int most, int cluster = 1) {
  const int64_t slots = most / cluster;
  if (units <= 0 || slots <= 0) return most;
  const int64_t rounds = (units + slots - 1) / slots;
  return int((units + rounds - 1) / rounds * cluster);
}

// A split tail (cuda/gemm/tail_split.cuh): the tiles of the last, partial wave split along K into
// equal pieces, so that the kernel ends a fraction of a tile after the full waves, not a whole tile.
// Plain data; a scheduler that supports it reads it from its hooks' state.
struct TailSplit {
  float* partials;     // [pieces * tiles slots][2 consumers][tile_n / 8][128 threads] float4: fp32 partials
  uint64_t* counts;    // [tiles][2 consumers]: launch epoch << 16 | pieces of the tile stored so far
  int32_t first_unit;  // units [first_unit, first_unit + tiles) of the scheduler's order are split
  int32_t tiles;       // 0: nothing is split
  int32_t pieces;      // per tile, each a k_blocks / pieces share of K
  int32_t k_blocks;    // k-blocks of a whole tile
  int32_t ctas;        // GEMM CTAs the split was planned for
};

// The split worth making for `tiles` tiles of `k_blocks` k-blocks on `ctas` CTAs (tiles = 0: none).
// Costs in k-blocks (0.52 us each at 128 x 256): the last wave's rem tiles whole cost k_blocks plus
// an epilogue (~3); a piece costs its k-blocks plus ~8 (its partial's write, fence and count, the
// restart of the pipeline, the reducing piece's reads): that figure fits the measured gains and
// losses below (bench/DECISIONS.md, "The last wave splits into equal K pieces in one round, or not
// at all"). A split is made when it saves at least 20, in one round of equal pieces (rem x pieces
// <= ctas, at most 16, each >= 4 k-blocks): AG (8192, 28672, 8192), 20 tiles in 6 pieces, 2.3%
// faster than unsplit on every SM and 0.8-0.9% faster than the balanced grid; a 272-tile test
// shape, 8 in 16 pieces, 6%.
//   Not made:
//   - a last wave more than half full (fewer than two pieces per tile would fit the idle CTAs): a
//     head per tile on its own CTA and the rests on the idle CTAs was 0.9-1.5% faster than unsplit
//     on every SM, but level with the balanced grid at 8192 x 4096 x 28672 and 0.4-0.7% behind it at
//     16384 x 4096 x 8192: removed;
//   - equal pieces over several rounds: AG (8192, 8192, 8192), 100 tiles in 5 pieces over 4 rounds,
//     3.6% slower.
inline TailSplit plan_tail_split(int64_t tiles, int64_t k_blocks, int ctas) {
  constexpr int64_t kEpilogue = 3, kPiece = 8, kMinPiece = 4, kMinSaving = 20;
  TailSplit t{};
  const int64_t rem = ctas > 0 ? tiles % ctas : 0;
  if (ctas <= 0 || tiles < ctas || rem == 0) return t;
  int64_t pieces = ctas / rem < 16 ? ctas / rem : 16;
  while (pieces > 1 && k_blocks / pieces < kMinPiece) --pieces;
  if (pieces < 2 || k_blocks + kEpilogue - ((k_blocks + pieces - 1) / pieces + kPiece) < kMinSaving) return t;
  t.first_unit = int32_t(tiles - rem);
  t.tiles = int32_t(rem);
  t.pieces = int32_t(pieces);
  t.k_blocks = int32_t(k_blocks);
  t.ctas = ctas;
  return t;
}
// Workspace of a tail split for tiles tile_n wide: the partial slots and the counts, in bytes.
inline uint64_t tail_partials_bytes(const TailSplit& t, int tile_n) {
  return uint64_t(t.tiles) * t.pieces * kTileM * tile_n * 4;
}
inline uint64_t tail_counts_bytes(const TailSplit& t) { return uint64_t(t.tiles) * 2 * 8; }

// Pipeline depth the kernel uses for this shape (a function of shared memory per stage).
int pipeline_stages(const TileConfig& t, bool out_f32);

// The host-mapped completion words of cuda/primitives/completion.cuh, as plain data.
struct CompletionWords {
  uint64_t* done;
  uint64_t seq;
  uint32_t* arrivals;
};

struct PlainLaunch {
  CUtensorMap a, b, c;  // c covers columns [0, c_tma_cols) only (see OutputTail in params.cuh)
  void* c_ptr;
  int64_t ldc;
  int32_t c_tma_cols;
  int32_t m, n, k;
  int32_t group_m;  // tile-order band height in cluster tiles (> 0)
  int32_t a_box_rows;  // a_box_rows(tile, m): the height of a's box
  bool b_n_major;
  bool out_f32;
  TileConfig tile;
  int32_t max_ctas;  // > 0
  CompletionWords completion;
  cudaStream_t stream;
};

// Launches the engine with the default hooks on the current device.
cudaError_t launch_plain(const PlainLaunch& l);
// The number of CTAs launch_plain would start (persistent grid: co-resident clusters, tile count and
// max_ctas permitting).
cudaError_t plain_grid(const PlainLaunch& l, int* ctas);

// Simple fp32-accumulating reference on CUDA cores (no tensor cores, no TMA): C (fp32, ldc) =
// A · op(B). For tests only.
cudaError_t reference_gemm(const void* a, const void* b, float* c, int64_t m, int64_t n, int64_t k, int64_t lda,
                           int64_t ldb, int64_t ldc, bool b_n_major, cudaStream_t stream);

}  // namespace weft::gemm
