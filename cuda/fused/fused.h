// fused.h — the host-side face of the fused tensor-parallel kernels (cuda/fused/*.cu), included by
// ffi/src/tp (plain C++, no device code). Each op's hook State below is the plain data its kernel
// reads; ffi/src/tp builds it once per plan from WeftTpParams (weft.h) and patches the epoch per
// launch. Addresses of other ranks are as this process maps them (peer arenas, see lib/comm.ts).
//
// Signals (all epoch-tagged u64, written with st.release.sys or a stream memory write, read with
// ld.acquire.sys; values only grow, nothing is ever reset):
//   all-gather  flags[dest][chunk] in the WRITER's memory: "chunk `chunk` of my rows has landed in
//               rank dest's landing buffer". The reader polls the writer's word over NVLink, so the
//               copy engine can write it with cuStreamWriteValue64 to local memory.
//   reduce-scatter / all-reduce (the "owner" scheme, gemm_scatter.cuh)
//               stored[half-tile] in every non-owner's memory: "the owner has stored this 64-row
//               half-tile into every destination";
//               done[rank][cta] in every rank's memory: "CTA cta of rank has finished adding";
//               entered[rank] (all-reduce): "rank has started this launch".
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemm/gemm.h"
#include "primitives/abort_words.h"
#include "weft.h"

namespace weft::fused {

// The fused kernels keep one tensor map or pointer per rank in kernel parameters.
constexpr int kMaxRanks = 8;

// What every fused kernel's waits give up on: the communicator's host abort word and the plan's
// abort word on every rank (primitives/abort_words.h; the waits: fused/abort.cuh).
static_assert(kMaxRanks <= kAbortMaxRanks, "AbortWords names every rank of a fused plan");

// What every fused launch struct carries besides its tensor maps and hook state: the GEMM's shape
// and tile, its grid (the GEMM CTAs; a kernel's mover CTAs, state.comm_ctas, come on top), where the
// launch reports and the stream it runs on. ffi/src/tp fills it with set_gemm_shape (plan.hpp).
struct GemmLaunchShape {
  int32_t m, n, k;
  int32_t tile_n;
  bool b_n_major;
  int32_t gemm_ctas;
  gemm::CompletionWords completion;
  cudaStream_t stream;
};

// ---- all-gather + GEMM (all_gather_gemm.cu) ------------------------------------------------------

struct AgState {
  CUtensorMap a_local;             // this rank's rows [m_shard, k]: local tiles read A straight from here
  uint64_t* flags[kMaxRanks];      // flags[q]: rank q's [world][chunks] arrival flags, as mapped here
  char* landing[kMaxRanks];        // landing[q]: rank q's landing slot of this launch's parity, [world * m_shard, k]
  const char* a;                   // this rank's rows (source of the CTA mover)
  uint64_t epoch;
  uint64_t timeout_ns;
  int32_t rank, world;
  int32_t m_shard;      // rows per rank, a multiple of 128
  int32_t chunk_rows;   // rows per arrival flag, a multiple of 128 dividing m_shard
  int32_t chunks;       // m_shard / chunk_rows
  int32_t comm_ctas;    // CTAs [0, comm_ctas) move data; 0: the copy engines do
  int32_t group_m;      // band height in tile rows, dividing chunk_rows / 128
  int32_t row_bytes;    // k * 2
  int32_t wait_outgoing;  // copy-engine mover: finish only after this rank's own copies have landed
  // Copy-engine mover: this rank's entered word (local), = epoch once its kernel of the launch is past
  // grid::wait_previous; the side streams start on it. nullptr with the CTA mover.
  uint64_t* entered;
  // The last wave's tiles split along K over the GEMM CTAs (gemm/tail_split.cuh); tiles = 0: none.
  gemm::TailSplit tail;
  AbortWords abort;
};

struct AgLaunch : GemmLaunchShape {
  CUtensorMap landing;  // KernelParams::a: this rank's landing slot (remote tiles)
  CUtensorMap b, c;
  AgState state;
};

cudaError_t launch_all_gather_gemm(const AgLaunch& l);
bool all_gather_gemm_supported(int tile_n);

// ---- GEMM + reduce-scatter / all-reduce (gemm_reduce_scatter.cu, gemm_all_reduce.cu) --------------

// The register exchange's layout in one source's slot of a receive region: per 16-row group of a
// tile (a warp's rows of the wgmma fragment), TileN / 8 16-byte flagged words per lane, word j of
// the warp's 32 lanes 512 contiguous bytes. Applies at m <= kRegisterExchangeRows when it fits the
// slot the TMA exchange would use.
constexpr int kRegisterExchangeRows = 32;
inline constexpr uint64_t register_exchange_bytes(int64_t m, int64_t tiles_n, int tile_n) {
  return uint64_t((m + 15) / 16) * uint64_t(tiles_n) * uint64_t(tile_n / 8) * 512u;
}

struct ScatterState {
  CUtensorMap out[kMaxRanks];    // out[q]: rank q's output as mapped here
  uint64_t* stored[kMaxRanks];   // stored[q]: rank q's half-tile flags [tiles_m * 2][tiles_n]
  uint64_t* done[kMaxRanks];     // done[q]: rank q's [world][ctas] finish flags
  uint64_t* entered[kMaxRanks];  // entered[q]: rank q's [world] entry flags (all-reduce)
  uint64_t epoch;
  uint64_t timeout_ns;
  int32_t rank, world;
  int32_t all_reduce;   // 0: each tile goes to its owner's out only (rows offset by owner * m_shard)
  int32_t shard_tiles;  // tile rows per owner (ownership by row shard); 0: tile (linear index) mod world
  int32_t tiles_m, tiles_n;
  int32_t group_m;      // band height in tile rows (row ownership), dividing shard_tiles
  int32_t m_shard;      // rows per rank (reduce-scatter)
  int32_t lag;          // rounds between an owner's tile and the same tile at the next rank (OwnerScheduler)
  // Copy-engine mover (gemm_scatter_ce.cuh; copy_engine = 1, row ownership only). Chunk c of an
  // owner's shard = tile-row band c / slabs (group_m tile rows) x tile-column slab c % slabs
  // (slab_tiles tile columns): the unit each copy moves and each flag covers.
  int32_t copy_engine;
  int32_t chunks;       // per owner: bands x slabs
  int32_t slabs;        // column slabs per band
  int32_t slab_tiles;   // tile columns per slab
  CUtensorMap staging;  // this rank's partials of the peers' rows [m, n], by global row (local memory)
  CUtensorMap own_out_map;  // out[rank] again, at a fixed offset (CeIntoOutHooks' compile-time route)
  CUtensorMap recv_map; // both parity slots [2 * world * m_shard, n] (L2 prefetch of received partials)
  const uint16_t* recv; // this launch's slot [world][m_shard, n]: recv[q] = rank q's partial of my rows
                        // (exchange: [world][slot_rows, n], this launch's parity half)
  int32_t recv_row0;    // the slot's first row in recv_map (parity x world x m_shard)
  int32_t tile_n;       // columns per tile
  int32_t ld;           // n: row stride of out, staging and recv, in elements
  // Reduce-scatter with two ranks: the peer, whose copy engines copy its partials of this rank's rows
  // straight into this rank's out; the own tiles then add into out by TMA (cp.reduce.async.bulk)
  // instead of loading that partial into the epilogue. -1: every peer's partials land in the receive
  // slot (all-reduce, whose own tiles' sums go on to the peers; more than two ranks, where one out
  // cannot take two peers' copies).
  int32_t direct_from;
  // All-reduce: this rank's own tiles from tile row direct_tile_m on (the bands that hold a tile of
  // the kernel's final round; their last direct_chunks chunks) are stored into every peer's out by
  // the SMs from the epilogue instead of being broadcast by the copy engines after the math; each
  // CTA then raises done[q][rank * ctas + cta].
  int32_t direct_tile_m;
  int32_t direct_chunks;
  // [2][world][chunks] local, by epoch parity: half-tiles stored per chunk of owner q's rows
  // (red.add); a side stream copies chunk c once its count reaches chunk_halves(c). Launch e's kernel
  // zeroes parity (e + 1)'s counts at its start: launch e - 1's side streams were done with them
  // before its kernel finished, and launch e + 1's start behind launch e's kernel.
  uint64_t* counts;
  // Progress words, written by the copy-engine streams (cuStreamWriteValue64) in the SENDER's memory:
  // progress[q] = rank q's [2 parities][2 kinds][world dest] words, kind 0: q's partials of dest's
  // rows, kind 1: q's final rows in dest's out (all-reduce); value progress_tag(epoch) <<
  // kProgressShift | chunks landed so far (a stream copies its chunks in index order).
  const uint64_t* progress[kMaxRanks];
  // Exchange mover (gemm_exchange.cuh; exchange = 1, all-reduce only): send[q] is rank q's receive
  // region as mapped here, [2 * world * slot_rows, n]; recv_map and recv_row0 are this rank's; the
  // flags are stored[q], [world][tiles_m * 2][tiles_n]. Boxes of send and recv_map are box_rows
  // high: 64, or m when m < 64, so that a decode tile sends only its rows.
  int32_t exchange;
  int32_t slot_rows;
  int32_t box_rows;
  CUtensorMap send[kMaxRanks];
  uint16_t* own_out;    // this rank's out (finish_deferred's plain stores), ld elements per row
  // The register exchange (m <= kRegisterExchangeRows; 0: off): every tile's partial goes from the
  // accumulators into region[q] (rank q's receive region as mapped here, both parity halves) as
  // flagged words (primitives/flagged.cuh), with no staging, fence or flag round trip.
  int32_t register_rows;
  uint8_t* region[kMaxRanks];
  // With exactly two waves of tiles, the first wave's deferred tiles (tile columns [0, ce_tile_cols)
  // of the single band) go to the peers by one 2-D copy per peer on a side stream instead of the
  // SMs' TMA stores, which slowed the second wave's math on the sending GPU by ~8 us at M = 512
  // (bench/DECISIONS.md, "SM-issued NVLink stores slow the sending GPU's math"). Two ranks only. The SMs store those tiles into the own out only and count them
  // (ce_count[epoch & 1]); the one that completes ce_expected sets ce_ready = epoch, which the side
  // streams wait for; each copy is followed by ce_sent[rank][q] = epoch in the sender's memory.
  // 0 columns: the SMs send everything.
  int32_t ce_tile_cols;
  int32_t ce_expected;
  uint64_t* ce_count;   // [2]: by epoch parity
  uint64_t* ce_ready;
  const uint64_t* ce_sent[kMaxRanks];  // ce_sent[r]: rank r's [world] words as mapped here
  AbortWords abort;
};

// The side streams' work is a CUDA graph per launch class (epoch mod 4), so every value they wait for
// or write is one of a few constants, never the epoch itself:
//   chunk counts  one set per parity, zeroed between its uses (ScatterState::counts); a side stream
//                 waits for count >= the chunk's half-tiles (chunk_halves).
//   progress word one per parity, its tag alternating 1, 2 between its successive uses (epochs e
//                 and e + 2), so a reader of launch e never takes e - 2's value for its own; launch
//                 e + 2 cannot write it before the reader's launch e has finished (e + 2's copies
//                 follow the writer's kernel e + 1, which waited for the reader's partials of e + 1).
constexpr int kProgressShift = 20;
// Half-tiles in chunk c of any owner (copy-engine mover): group_m tile rows x the slab's tile columns x 2.
__host__ __device__ constexpr uint64_t chunk_halves(int32_t c, int32_t group_m, int32_t slabs, int32_t slab_tiles,
                                                    int32_t tiles_n) {
  const int32_t left = tiles_n - (c % slabs) * slab_tiles;  // tile columns from the slab's first on
  return uint64_t(group_m) * 2 * uint64_t(slab_tiles < left ? slab_tiles : left);
}
__host__ __device__ constexpr uint64_t progress_tag(uint64_t epoch) { return 1 + ((epoch >> 1) & 1); }
__host__ __device__ constexpr int64_t progress_index(uint64_t epoch, int kind, int world, int dest) {
  return (int64_t(epoch & 1) * 2 + kind) * world + dest;
}

// Every CTA of these kernels runs the GEMM (gemm_ctas is the whole grid).
struct ScatterLaunch : GemmLaunchShape {
  CUtensorMap a, b;  // a: [m, k], its box gemm::a_box_rows(tile, m) high
  ScatterState state;
  int32_t a_box_rows;
};

cudaError_t launch_gemm_reduce_scatter(const ScatterLaunch& l);
cudaError_t launch_gemm_all_reduce(const ScatterLaunch& l);
bool gemm_reduce_scatter_supported(int tile_n);
bool gemm_all_reduce_supported(int tile_n);

// ---- completion of a launch sequence (publish.cu) -------------------------------------------------

// Publishes `completion` once the stream reaches it, carrying over the outcome of an earlier kernel
// of the same launch that reported into `scratch` (2 host-mapped words, device alias): failed if it
// failed, or if it never published `scratch_seq` (reason WEFT_TP_FAIL_STAGE_MISSING).
cudaError_t launch_publish(const uint64_t* scratch, uint64_t scratch_seq, const gemm::CompletionWords& completion,
                           cudaStream_t stream);
// Loads the publisher's module now (see build_and_preload() in ffi/src/tp/abi.cpp).
cudaError_t preload_publish();

// The launch functions above with zero CTAs (AgLaunch::gemm_ctas and state.comm_ctas, or
// ScatterLaunch::gemm_ctas) only load and configure the kernel, launching nothing.

}  // namespace weft::fused
