// cost_model.hpp — the machine numbers behind every candidate's cost, and the helpers they share.
// The numbers are named data, measured on the 2 x H200 host; bench/DECISIONS.md has the entries
// they come from, named below by title. Each candidate's file (all_gather.cpp, scatter.cpp,
// copy_engine.cpp, exchange.cpp, sequential.cpp) turns them into its own estimate.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "gemm/gemm.h"
#include "status.hpp"
#include "tp/choice.hpp"

namespace weft::tp {

struct Machine {
  // The engine's sustained rate: ~690 TFLOP/s over 132 SMs at the card's power cap.
  double tflops_per_sm = 5.2;
  // HBM3e as our memory-bound kernels see it (the datasheet says 4.8 TB/s).
  double hbm_gbs = 3000;
  // NVLink per direction as our SM-driven collectives reach it (327-357 GB/s busbw, 2 x H200).
  double nvlink_gbs = 330;
  // One copy engine stream per peer (assumed; bench/tp.ts measures it).
  double copy_engine_gbs = 300;
  // One CTA storing 16-byte vectors into a peer (~25 GB/s: "Direct collectives push or pull
  // 16-byte vectors").
  double cta_push_gbs = 25;
  // A collective's fixed cost: launch, entry handshake, completion (8 KiB all-reduce ~9 us).
  double collective_us = 9;
  // One more kernel or copy in a sequence on the same stream.
  double step_us = 2.5;
  // The fused kernels' signalling: flag round trips after the last tile (owner scheme: store,
  // flag, add, done flag). Predicted 8 us; measured 13 us (decode all-reduce at M = 16: fused
  // 49.2 us against our GEMM alone at 35.9 us).
  double all_gather_sync_us = 4;
  // The exchange mover after the math, besides the traffic: the tile's store into the peer, its
  // flag, the peer's flag, one local load, the add and the kernel's completion (predicted 4 us;
  // measured 9 us, then 6.5 us since one system fence per flag and per grid: decode all-reduce at
  // M = 128, 38.4 us against our GEMM's 25.5 and 6.4 us of traffic; "The exchange's fixed cost in
  // the cost model is 6.5 µs").
  double exchange_sync_us = 6.5;
  int64_t exchange_max_tile_rows = 4;
  double scatter_sync_us = 13;
  // Copy-engine reduce-scatter / all-reduce: bytes per chunk (one 2-D copy, one flag), the most
  // chunks per owner (graph nodes, or ~3 driver calls each without the graph), and the GEMM's
  // slowdown from the staging stores and the own rows' extra reads (predicted).
  // 16 MiB, not 4: the side streams' graph costs the host ~2 us per node at launch, ~250 us per
  // launch pair at (4096, 14336, 4096) with 4 MiB, which made all-reduce there host-bound (600 us
  // against 481 with 16 MiB); the GPU time elsewhere moved within +-1% ("Copy-engine chunks are
  // 16 MiB").
  double ce_chunk_bytes = 16 << 20;
  int64_t ce_max_chunks = 32;
  double ce_gemm_factor = 1.03;
  // Where "auto" takes the copy-engine mover: at least this many rows per rank (reduce-scatter:
  // faster than the CTA mover at all five M >= 4096 shapes, 1.06-1.30x of our GEMM against
  // 1.12-1.36x, "The reduce-scatter takes the copy engines from 2048 rows per rank"; all-reduce: at
  // all six, 1.03-1.33x against 1.11-1.47x, "The all-reduce takes the copy engines wherever the
  // rows allow"). All-reduce used to need its traffic to be at least a quarter of the GEMM, for
  // (8192, 8192, 28672), where the CTA mover had measured 1.00x against 1.09x; with both harnesses
  // at equal rest (full clocks) the copy engines win there too, 1.033x against 1.112x.
  int64_t ce_min_shard_rows = 2048;
};

inline const Machine kMachine{};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline uint64_t align256(uint64_t x) { return (x + 255) / 256 * 256; }

// Bytes / (GB/s) in microseconds.
inline double transfer_us(double bytes, double gbs) { return bytes / (gbs * 1e3); }

inline double gemm_us(int64_t m, int64_t n, int64_t k, int tile_n, int ctas) {
  const int64_t tiles = ceil_div(m, gemm::kTileM) * ceil_div(n, tile_n);
  const double waves = std::ceil(double(tiles) / std::max(ctas, 1));
  const double tile_us = double(gemm::kTileM) * tile_n * double(k) * 2 / (kMachine.tflops_per_sm * 1e6);
  const double bytes = 2.0 * (double(m) * k + double(n) * k + double(m) * n);
  return std::max(waves * tile_us, transfer_us(bytes, kMachine.hbm_gbs)) + 2;
}

// The GEMM engine's own heuristic (ffi/src/gemm/gemm_params.cpp), over `ctas` CTAs.
inline int gemm_tile(int64_t m, int64_t n, int ctas, bool allow64) {
  const int64_t tiles_m = ceil_div(m, gemm::kTileM);
  if (tiles_m * ceil_div(n, 256) >= ctas) return 256;
  if (tiles_m * ceil_div(n, 128) >= ctas || !allow64) return 128;
  return 64;
}

// The largest divisor d of n with n / d >= want (so at least `want` pieces), or 1.
inline int64_t divisor_for(int64_t n, int64_t want) {
  for (int64_t d = n; d >= 1; --d)
    if (n % d == 0 && n / d >= want) return d;
  return 1;
}

// Tile-order band height for a walk in whole bands over `rows` tile rows: the requested one (which
// must divide rows), else the largest power of two at or below `most` that divides rows.
inline int band_for(int64_t rows, int requested, int most) {
  if (requested > 0) {
    WEFT_REQUIRE(rows % requested == 0, "group_m (%d) must divide the tile rows of one shard (%lld)", requested,
                 static_cast<long long>(rows));
    return requested;
  }
  for (int g = most; g > 1; g /= 2)
    if (rows % g == 0) return g;
  return 1;
}

// Appends a region of `bytes` (256-byte aligned) to the layout.
inline void add(Layout& l, Region& r, uint64_t bytes) {
  r.offset = l.total;
  r.bytes = bytes;
  l.total += align256(bytes);
}

// The last region of every one-node fused plan: its abort word (cuda/fused/fused.h, AbortWords), which
// peers raise when they give up on a launch.
inline void add_abort_word(Layout& l) { add(l, l.abort, 8); }

// Why no single-node fused kernel can take this problem, or "" when one can.
std::string fused_obstacle(const Problem& p);

}  // namespace weft::tp
