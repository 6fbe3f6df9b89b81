// choice.cpp — the cost model behind weft_tp_choose: predicts the fused kernel and the sequential
// path (our GEMM, then or after our collective) from a few machine numbers, and takes the faster.
// The numbers are named data, measured on the 2 x H200 host; bench/DECISIONS.md has the entries
// they come from, named below by title.
#include "tp/choice.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "comm/tuning.hpp"
#include "fused/fused.h"
#include "gemm/gemm.h"
#include "status.hpp"

namespace weft::tp {

namespace {

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

const Machine kMachine{};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
uint64_t align256(uint64_t x) { return (x + 255) / 256 * 256; }

// Bytes / (GB/s) in microseconds.
double transfer_us(double bytes, double gbs) { return bytes / (gbs * 1e3); }

double gemm_us(int64_t m, int64_t n, int64_t k, int tile_n, int ctas) {
  const int64_t tiles = ceil_div(m, gemm::kTileM) * ceil_div(n, tile_n);
  const double waves = std::ceil(double(tiles) / std::max(ctas, 1));
  const double tile_us = double(gemm::kTileM) * tile_n * double(k) * 2 / (kMachine.tflops_per_sm * 1e6);
  const double bytes = 2.0 * (double(m) * k + double(n) * k + double(m) * n);
  return std::max(waves * tile_us, transfer_us(bytes, kMachine.hbm_gbs)) + 2;
}

// The GEMM engine's own heuristic (ffi/src/gemm/gemm_params.cpp), over `ctas` CTAs.
int gemm_tile(int64_t m, int64_t n, int ctas, bool allow64) {
  const int64_t tiles_m = ceil_div(m, gemm::kTileM);
  if (tiles_m * ceil_div(n, 256) >= ctas) return 256;
  if (tiles_m * ceil_div(n, 128) >= ctas || !allow64) return 128;
  return 64;
}

// The largest divisor d of n with n / d >= want (so at least `want` pieces), or 1.
int64_t divisor_for(int64_t n, int64_t want) {
  for (int64_t d = n; d >= 1; --d)
    if (n % d == 0 && n / d >= want) return d;
  return 1;
}

// Tile-order band height for a walk in whole bands over `rows` tile rows: the requested one (which
// must divide rows), else the largest power of two at or below `most` that divides rows.
int band_for(int64_t rows, int requested, int most) {
  if (requested > 0) {
    WEFT_REQUIRE(rows % requested == 0, "group_m (%d) must divide the tile rows of one shard (%lld)", requested,
                 static_cast<long long>(rows));
    return requested;
  }
  for (int g = most; g > 1; g /= 2)
    if (rows % g == 0) return g;
  return 1;
}

void add(Layout& l, Region& r, uint64_t bytes) {
  r.offset = l.total;
  r.bytes = bytes;
  l.total += align256(bytes);
}

// Why the fused kernel cannot take this problem, or "" when it can.
std::string fused_obstacle(const Problem& p) {
  if (p.world > fused::kMaxRanks) return "the fused kernels take at most 8 ranks";
  if (p.k % 8 != 0) return "k is not a multiple of 8 (rows of a must be 16-byte multiples for TMA)";
  if (p.n % 8 != 0) return "n is not a multiple of 8 (rows of b / out must be 16-byte multiples for TMA)";
  const bool row_sharded = p.op != WEFT_TP_GEMM_ALL_REDUCE;
  if (row_sharded && p.m % (int64_t(gemm::kTileM) * p.world) != 0)
    return "m is not a multiple of 128 x world size (each rank's rows must be whole 128-row tiles)";
  return "";
}

// Rounds (W tiles each, one per owner) between an owner computing a tile and the next rank adding
// into it. The owner publishes its flag when its CTA starts the epilogue of its next tile (one wave
// of tiles later), so the rank that adds should reach the tile about two waves after the owner:
// lag x W ~ 2 x ctas tile positions. Less and adders wait; more and the last `lag` rounds hold only
// adds (traffic after the math).
int scatter_lag(int ctas, int world) {
  return std::max(1, int(ceil_div(2 * int64_t(ctas), world)));
}

double sequential_us(const Problem& p, int sms, const Choice& c) {
  double us = 0;
  const int copies = int(c.pad_a) + int(c.pad_b) + int(c.pad_out);
  us += copies * kMachine.step_us;
  const int W = p.world;
  const int64_t m_gemm = p.m;
  us += gemm_us(m_gemm, p.n, p.k, gemm_tile(m_gemm, p.n, sms, true), sms);
  double coll_bytes = 0;
  switch (p.op) {
    case WEFT_TP_ALL_GATHER_GEMM:
      coll_bytes = double(W - 1) * p.m_shard * c.kp * 2;
      us += kMachine.collective_us + transfer_us(coll_bytes, kMachine.nvlink_gbs) + kMachine.step_us;  // + publish
      break;
    case WEFT_TP_GEMM_REDUCE_SCATTER:
      coll_bytes = double(W - 1) * p.m_shard * c.np * 2;
      us += kMachine.collective_us + transfer_us(coll_bytes, kMachine.nvlink_gbs);
      break;
    default: {
      const double bytes = double(p.m) * c.np * 2;
      const bool staged = bytes <= double(comm::tuning().staged_auto_bytes);  // as weft_collective picks it
      us += kMachine.collective_us + transfer_us(staged ? (W - 1) * bytes : 2.0 * (W - 1) / W * bytes, kMachine.nvlink_gbs);
    }
  }
  return us + kMachine.step_us;
}

}  // namespace

Problem problem_of(const WeftComm& c, const WeftTpParams& p) {
  Problem pr{};
  pr.op = p.op;
  pr.world = int(c.world);
  pr.rank = int(c.rank);
  pr.m = p.m;
  pr.n = p.n;
  pr.k = p.k;
  pr.m_shard = ceil_div(p.m, c.world);
  pr.b_nk = (p.flags & WEFT_GEMM_B_NK) != 0;
  return pr;
}

Choice choose(const WeftComm& comm, const WeftTpParams& params) {
  const Problem p = problem_of(comm, params);
  const int sms = comm.sm_count;
  const int W = p.world;
  Choice c{};
  WEFT_REQUIRE(params.path >= WEFT_TP_PATH_AUTO && params.path <= WEFT_TP_PATH_SEQUENTIAL,
               "path must be WEFT_TP_PATH_AUTO, _FUSED or _SEQUENTIAL (got %d)", params.path);
  WEFT_REQUIRE((params.mover >= WEFT_TP_MOVER_AUTO && params.mover <= WEFT_TP_MOVER_COPY_ENGINE) ||
                   params.mover == WEFT_TP_MOVER_EXCHANGE,
               "mover must be WEFT_TP_MOVER_AUTO, _CTAS, _COPY_ENGINE or _EXCHANGE (got %d)", params.mover);
  WEFT_REQUIRE(params.mover != WEFT_TP_MOVER_EXCHANGE || p.op == WEFT_TP_GEMM_ALL_REDUCE,
               "mover 'exchange' applies to gemmAllReduce only");
  WEFT_REQUIRE(params.mover != WEFT_TP_MOVER_EXCHANGE || params.tile_n != 256 ||
                   ceil_div(p.m, gemm::kTileM) * ceil_div(p.n, 256) <= sms,
               "mover 'exchange' takes tile_n 256 only when its tiles fit one wave: %lld tiles of 128 x 256 on %d SMs",
               static_cast<long long>(ceil_div(p.m, gemm::kTileM) * ceil_div(p.n, 256)), sms);
  WEFT_REQUIRE(params.comm_ctas >= 0 && params.comm_ctas < sms, "comm_ctas must be in [0, %d) (got %d)", sms,
               params.comm_ctas);
  WEFT_REQUIRE(params.comm_ctas == 0 || (p.op == WEFT_TP_ALL_GATHER_GEMM && params.mover != WEFT_TP_MOVER_COPY_ENGINE),
               "comm_ctas applies to the all-gather's CTA mover only");
  WEFT_REQUIRE(params.tile_n == 0 || params.tile_n == 64 || params.tile_n == 128 || params.tile_n == 256,
               "tile_n must be 0 (auto), 64, 128 or 256 (got %d)", params.tile_n);
  WEFT_REQUIRE(params.group_m >= 0, "group_m must be >= 0 (got %d)", params.group_m);

  // Sequential path: the shapes our GEMM and collectives need.
  c.kp = (p.k + 7) / 8 * 8;
  c.np = (p.n + 7) / 8 * 8;
  c.pad_a = c.kp != p.k;
  c.pad_b = p.b_nk ? c.kp != p.k : c.np != p.n;
  c.pad_out = c.np != p.n;
  c.sequential_us = sequential_us(p, sms, c);

  c.reason = fused_obstacle(p);
  c.fused_available = c.reason.empty();
  WEFT_REQUIRE(params.path != WEFT_TP_PATH_FUSED || c.fused_available, "path 'fused' is not available here: %s",
               c.reason.c_str());
  c.mover = WEFT_TP_MOVER_NONE;
  if (c.fused_available) {
    const int64_t tiles_m = ceil_div(p.m, gemm::kTileM);
    if (p.op == WEFT_TP_ALL_GATHER_GEMM) {
      // The CTA mover needs a comm CTA and a GEMM CTA (a communicator's smBudget can leave fewer SMs).
      WEFT_REQUIRE(params.mover != WEFT_TP_MOVER_CTAS || sms >= 2,
                   "mover 'ctas' needs at least 2 SMs (a comm CTA beside the GEMM's); this communicator has %d", sms);
      c.mover = params.mover == WEFT_TP_MOVER_CTAS || (params.mover == WEFT_TP_MOVER_AUTO && params.comm_ctas > 0)
                    ? WEFT_TP_MOVER_CTAS
                    : WEFT_TP_MOVER_COPY_ENGINE;
      c.tile_n = params.tile_n ? params.tile_n : gemm_tile(p.m, p.n, sms, false);
      WEFT_REQUIRE(fused::all_gather_gemm_supported(c.tile_n), "tile_n %d is not built for all-gather + GEMM (128, 256)",
                   c.tile_n);
      // Chunks of at least one band (a band never straddles a chunk), else at least 8 per shard.
      // At M = 8192 that is 2 chunks of 16 tile rows per shard: the peer's arrive long before this
      // rank's own shard is computed (0.17 against 0.35 ms), so coarser arrival costs nothing there.
      const int64_t shard_tiles = p.m_shard / gemm::kTileM;
      c.group_m = band_for(shard_tiles, params.group_m, gemm::default_band(c.tile_n, sms));
      const int64_t chunk_tiles = std::lcm<int64_t>(divisor_for(shard_tiles, std::min<int64_t>(shard_tiles, 8)), c.group_m);
      c.chunk_rows = int(chunk_tiles * gemm::kTileM);
      const double shard_bytes = double(p.m_shard) * p.k * 2;
      const double out_bytes = double(W - 1) * shard_bytes;
      double mover_gbs = std::min(kMachine.nvlink_gbs, kMachine.copy_engine_gbs * std::max(W - 1, 1));
      if (c.mover == WEFT_TP_MOVER_CTAS) {
        // Enough CTAs to land the peers' rows while this rank's own rows are computed.
        const double local_us = gemm_us(p.m_shard, p.n, p.k, c.tile_n, sms);
        const double need_gbs = out_bytes / std::max(local_us, 1.0) / 1e3;
        c.comm_ctas = params.comm_ctas ? params.comm_ctas
                                       : int(std::clamp<double>(std::ceil(need_gbs / kMachine.cta_push_gbs), 1,
                                                                std::min(32, sms - 1)));
        mover_gbs = std::min(kMachine.nvlink_gbs, c.comm_ctas * kMachine.cta_push_gbs);
      }
      // The grid and the split tail (gemm.h). Where the planner splits the last wave, every SM gets
      // a CTA: equal pieces on 132 CTAs beat the balanced grid unsplit at 8192 x 14336 x 8192 by
      // 0.8-0.9% on one rank ("The last wave splits into equal K pieces in one round, or not at
      // all"). Elsewhere the balanced grid: 0.6-1.3% faster at 8192 x 4096 x 8192, and level with or
      // 0.4-0.7% ahead of the head-and-rest split that 16384 x 4096 x 8192 and 8192 x 4096 x 28672
      // used to get.
      const int64_t tiles = tiles_m * ceil_div(p.n, c.tile_n);
      c.gemm_ctas = int(std::min<int64_t>(tiles, sms - c.comm_ctas));
      c.tail = gemm::plan_tail_split(tiles, ceil_div(p.k, gemm::kTileK), c.gemm_ctas);
      if (c.tail.tiles == 0) c.gemm_ctas = gemm::balanced_ctas(tiles, sms - c.comm_ctas);
      const double gemm = gemm_us(p.m, p.n, p.k, c.tile_n, c.gemm_ctas);
      const double arrive = W > 1 ? transfer_us(out_bytes, mover_gbs) : 0;
      const double last_chunk = gemm * double(c.chunk_rows) / double(p.m);
      c.fused_us = std::max(gemm, arrive + last_chunk) + kMachine.all_gather_sync_us;
    } else {
      const bool all_reduce = p.op == WEFT_TP_GEMM_ALL_REDUCE;
      c.tile_n = params.tile_n ? params.tile_n : gemm_tile(p.m, p.n, sms, all_reduce);
      WEFT_REQUIRE(all_reduce ? fused::gemm_all_reduce_supported(c.tile_n) : fused::gemm_reduce_scatter_supported(c.tile_n),
                   "tile_n %d is not built for this op (reduce-scatter: 128, 256; all-reduce: 64, 128, 256)", c.tile_n);
      const bool rows = p.m % (int64_t(gemm::kTileM) * W) == 0;
      c.shard_tiles = rows ? int(p.m_shard / gemm::kTileM) : 0;
      // The engine's band (16 at 256-wide tiles) for the reduce-scatter: 1.3-2.9% faster than bands
      // of 4 at M >= 4096. Not for the all-reduce, whose final rows go out band by band after the
      // math: there bands of 16 were 2.4-5.7% slower than 4 ("The all-reduce's bands stay 4 tile
      // rows").
      c.group_m = rows ? band_for(c.shard_tiles, params.group_m, all_reduce ? 4 : gemm::default_band(c.tile_n, sms)) : 1;
      c.gemm_ctas = gemm::balanced_ctas(tiles_m * ceil_div(p.n, c.tile_n), sms);
      c.lag = scatter_lag(c.gemm_ctas, W);
      const double gemm = gemm_us(p.m, p.n, p.k, c.tile_n, c.gemm_ctas);
      // CTA mover. Bytes each rank sends: reduce-scatter adds its (W-1)/W share into the owners;
      // all-reduce stores its own 1/W into W-1 peers and adds the other (W-1)/W into W-1 peers.
      const double out = double(p.m) * p.n * 2;
      const double sent = all_reduce ? (W - 1) * out : out * (W - 1) / W;
      const double window = all_reduce ? gemm : gemm * (W - 1) / W;
      // The last wave's traffic follows the math: with one wave of tiles (decode-sized M) nothing
      // overlaps (all-reduce at (128, 8192, 8192): fused 49.0 us against our sequence's 44.5), with
      // many the window is nearly all of it ("The CTA mover's cost model overlaps (waves − 1) / waves
      // of its traffic").
      const int64_t waves = ceil_div(tiles_m * ceil_div(p.n, c.tile_n), c.gemm_ctas);
      const double overlap = window * double(waves - 1) / double(waves);
      const double ctas_us = std::max(gemm, gemm - overlap + transfer_us(sent, kMachine.nvlink_gbs)) + kMachine.scatter_sync_us;
      // Copy-engine mover (row ownership only): the GEMM in its plain order, partials of the peers'
      // rows staged locally and copied by the copy engines while the own rows are computed; the own
      // rows' epilogue reads W-1 received partials; all-reduce then copies the last chunk of final
      // rows after the math (the tail).
      const bool ce_ok = rows;
      WEFT_REQUIRE(params.mover != WEFT_TP_MOVER_COPY_ENGINE || ce_ok,
                   "mover 'copyEngine' needs m to be a multiple of 128 x world size (row ownership); got m = %lld",
                   static_cast<long long>(p.m));
      double ce_us = 0, ce_late_us = 0;
      if (ce_ok) {
        // Chunks of ~ce_chunk_bytes (a 2-D copy each), at most 32 per owner (nodes of the side streams' graph).
        const int64_t tiles_n = ceil_div(p.n, c.tile_n);
        const int64_t bands = c.shard_tiles / c.group_m;
        const double slab_bytes = double(c.group_m) * gemm::kTileM * c.tile_n * 2;
        int64_t slab = std::clamp<int64_t>(int64_t(std::llround(kMachine.ce_chunk_bytes / slab_bytes)), 1, tiles_n);
        while (bands * ceil_div(tiles_n, slab) > kMachine.ce_max_chunks && slab < tiles_n) ++slab;
        c.slab_tiles = int(slab);
        c.slabs = int(ceil_div(tiles_n, slab));
        c.chunks = int(bands * c.slabs);
        const double sent_ce = out * (W - 1) / W;  // per phase (reduce-scatter; all-reduce twice)
        const double own_us = gemm / W;
        // The peers' partials must land during the own rows' math; the broadcast's last chunk lands after.
        ce_late_us = std::max(0.0, transfer_us(sent_ce, kMachine.copy_engine_gbs) - (gemm - own_us));
        const double tail = all_reduce ? transfer_us(slab_bytes * slab, kMachine.copy_engine_gbs) : 0;
        ce_us = gemm * kMachine.ce_gemm_factor + ce_late_us + tail + kMachine.all_gather_sync_us;
      }
      const bool ce_measured = p.m_shard >= kMachine.ce_min_shard_rows;
      c.mover = params.mover == WEFT_TP_MOVER_COPY_ENGINE ? WEFT_TP_MOVER_COPY_ENGINE
                : params.mover == WEFT_TP_MOVER_CTAS || !ce_ok || !ce_measured ? WEFT_TP_MOVER_CTAS
                                                                              : WEFT_TP_MOVER_COPY_ENGINE;
      c.fused_us = c.mover == WEFT_TP_MOVER_COPY_ENGINE ? ce_us : ctas_us;
      // Exchange mover (all-reduce): the GEMM in its plain order, then each tile's partial stored
      // into the peers and theirs added, tile by tile. "auto" takes it at decode sizes (at most
      // exchange_max_tile_rows tile rows, one or two waves), where the owner scheme's four steps
      // after the math cost 21 of 47.5 us at M = 128 and 37 of 93 at M = 512 ("The decode all-reduce
      // exchanges partial tiles, with no owner") and the CTA mover's estimate above does not see them; the tile width is the one that minimises
      // this estimate. All of the traffic counts, not only the last wave's: with two waves the
      // first wave's exchange, deferred behind the second wave's math, still measured as if it
      // followed the math (M = 512: 89.7 us against our GEMM's 55.0).
      if (all_reduce) {
        double best_us = 0;
        int best_tile = 0, best_ctas = 0;
        for (int tile : {256, 128, 64}) {
          if (params.tile_n && tile != params.tile_n) continue;
          const int64_t tiles = tiles_m * ceil_div(p.n, tile);
          // 256 wide: one wave only (ExchangeHooks::kAtOnce). "auto" takes it whenever that wave fills
          // at least 7/8 of the SMs (M = 512: 128 tiles on 132), where it measured 77.5-80.0 us against
          // 84.9 for two waves of 128-wide tiles ("One wave of 256-wide exchange tiles when it fills
          // 7/8 of the SMs"), which this estimate does not see.
          if (tile == 256 && (tiles > sms || (params.tile_n != 256 && tiles * 8 < int64_t(sms) * 7))) continue;
          const int ctas = int(std::min<int64_t>(tiles, sms));
          const int64_t tile_waves = ceil_div(tiles, ctas);
          if (params.mover != WEFT_TP_MOVER_EXCHANGE && tile_waves > 2) continue;  // auto: decode shapes only
          const double us = gemm_us(p.m, p.n, p.k, tile, ctas) +
                            transfer_us(double(W - 1) * out, kMachine.nvlink_gbs) + kMachine.exchange_sync_us;
          if (best_tile == 0 || us < best_us || tile == 256) {
            best_us = us;
            best_tile = tile;
            best_ctas = ctas;
          }
          if (tile == 256) break;
        }
        const bool take = params.mover == WEFT_TP_MOVER_EXCHANGE ||
                          (params.mover == WEFT_TP_MOVER_AUTO && best_tile != 0 && tiles_m <= kMachine.exchange_max_tile_rows);
        if (take) {
          c.mover = WEFT_TP_MOVER_EXCHANGE;
          c.tile_n = best_tile;
          c.gemm_ctas = best_ctas;
          c.group_m = params.group_m ? params.group_m : 4;
          c.fused_us = best_us;
        }
      }
    }
  }
  c.path = params.path == WEFT_TP_PATH_FUSED ? WEFT_TP_PATH_FUSED
           : params.path == WEFT_TP_PATH_SEQUENTIAL || !c.fused_available ? WEFT_TP_PATH_SEQUENTIAL
           : c.fused_us <= c.sequential_us ? WEFT_TP_PATH_FUSED
                                           : WEFT_TP_PATH_SEQUENTIAL;
  if (c.path == WEFT_TP_PATH_SEQUENTIAL) {
    c.mover = WEFT_TP_MOVER_NONE;
    c.comm_ctas = 0;
    c.gemm_ctas = sms;
    c.tile_n = params.tile_n ? params.tile_n : 0;  // 0: the GEMM's own heuristic
    c.group_m = params.group_m;
  }

  // Workspace layout.
  Layout& l = c.layout;
  if (c.path == WEFT_TP_PATH_FUSED) {
    if (p.op == WEFT_TP_ALL_GATHER_GEMM) {
      const int64_t chunks = p.m_shard / c.chunk_rows;
      add(l, l.flags, uint64_t(W) * chunks * 8);
      add(l, l.landing, 2ull * W * p.m_shard * p.k * 2);
      add(l, l.entered, uint64_t(W) * 8);  // entered[rank]: this rank's kernel has started launch (value)
      add(l, l.tail_counts, gemm::tail_counts_bytes(c.tail));
      add(l, l.tail_partials, gemm::tail_partials_bytes(c.tail, c.tile_n));
    } else if (c.mover == WEFT_TP_MOVER_EXCHANGE) {
      const int64_t tiles_m = ceil_div(p.m, gemm::kTileM);
      add(l, l.stored, uint64_t(W) * tiles_m * 2 * ceil_div(p.n, c.tile_n) * 8);  // exchanged[W][half-tiles]
      add(l, l.recv, 2ull * W * tiles_m * gemm::kTileM * p.n * 2);                // [2][W][slot_rows][n]
      add(l, l.counts, 2 * 8);                                                    // first-wave count [2]
      add(l, l.ready, 8);                                                         // first wave stored
      add(l, l.progress, uint64_t(W) * 8);                                        // first wave sent [W]
    } else if (c.mover == WEFT_TP_MOVER_COPY_ENGINE) {
      add(l, l.counts, 2ull * W * c.chunks * 8);  // [parity][W][chunks]
      add(l, l.progress, 4ull * W * 8);
      add(l, l.staging_ce, uint64_t(p.m) * p.n * 2);
      add(l, l.recv, 2ull * W * p.m_shard * p.n * 2);
      if (p.op == WEFT_TP_GEMM_ALL_REDUCE) add(l, l.done, uint64_t(W) * c.gemm_ctas * 8);  // direct chunks' flags
      add(l, l.entered, uint64_t(W) * 8);  // entered[q]: rank q's kernel has started launch (value)
    } else {
      const int64_t tiles_m = ceil_div(p.m, gemm::kTileM);
      add(l, l.stored, uint64_t(tiles_m) * 2 * ceil_div(p.n, c.tile_n) * 8);
      add(l, l.done, uint64_t(W) * c.gemm_ctas * 8);
      add(l, l.entered, uint64_t(W) * 8);
    }
  } else {
    const int64_t a_rows = p.op == WEFT_TP_ALL_GATHER_GEMM ? p.m_shard : p.m;
    switch (p.op) {
      case WEFT_TP_ALL_GATHER_GEMM: add(l, l.staging, uint64_t(W) * p.m_shard * c.kp * 2); break;   // gathered A
      case WEFT_TP_GEMM_REDUCE_SCATTER: add(l, l.staging, uint64_t(W) * p.m_shard * c.np * 2); break;  // partial
      default:
        if (c.pad_out) add(l, l.staging, uint64_t(p.m) * c.np * 2);  // the padded all-reduce buffer
    }
    if (c.pad_a) add(l, l.a_pad, uint64_t(a_rows) * c.kp * 2);
    if (c.pad_b) add(l, l.b_pad, p.b_nk ? uint64_t(p.n) * c.kp * 2 : uint64_t(p.k) * c.np * 2);
    if (c.pad_out && p.op != WEFT_TP_GEMM_ALL_REDUCE) {
      const int64_t rows = p.op == WEFT_TP_ALL_GATHER_GEMM ? p.m : p.m_shard;
      add(l, l.out_pad, uint64_t(rows) * c.np * 2);
    }
  }
  if (l.total == 0) l.total = 256;
  return c;
}

}  // namespace weft::tp
