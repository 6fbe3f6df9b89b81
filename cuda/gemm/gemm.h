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
// benchmark shapes (bench/NOTES-tp.md, session 12).
inline int default_band(int tile_n, int ctas) {
  int band = 1;
  while (int64_t(2 * band) * (2 * band) * kTileM <= int64_t(ctas) * tile_n) band *= 2;
  return band;
}

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
