// choice.hpp — what a tensor-parallel plan runs: the path (fused kernel or our own GEMM and
// collective in sequence), the SM split, the tile shape, and the layout of its symmetric workspace.
// choose() is a pure function of the call and the device, so every rank computes the same choice
// and the same workspace layout without talking to the others.
#pragma once

#include <cstdint>
#include <string>

#include "gemm/gemm.h"

#include "comm/comm.hpp"
#include "weft.h"

namespace weft::tp {

struct Region {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// The symmetric workspace, the same offsets on every rank. Fused all-gather: flags, landing (two
// parity slots of [W * m_shard, k]). Fused reduce-scatter / all-reduce: stored, done, entered.
// Sequential: gathered or partial (the collective's symmetric buffer) and the padded copies of
// operands whose rows are not a multiple of 16 bytes (a_pad, b_pad, out_pad), zeroed once so that
// padding columns add nothing to a dot product.
struct Layout {
  Region flags, landing;
  Region stored, done, entered;
  // Copy-engine reduce-scatter / all-reduce: counts and ready [W][chunks], progress [2][2][W],
  // staging (this rank's partials of the peers' rows, [m, n] by global row), recv (two parity slots
  // of [W][m_shard, n]: the peers' partials of this rank's rows).
  Region counts, ready, progress, staging_ce, recv;
  Region staging, a_pad, b_pad, out_pad;
  // All-gather with a split tail: the pieces' fp32 partials and the tiles' counts.
  Region tail_partials, tail_counts;
  uint64_t total = 0;
};

struct Problem {
  int op;
  int world, rank;
  int64_t m, n, k;
  int64_t m_shard;  // ceil(m / world)
  bool b_nk;
};

struct Choice {
  int path;  // WEFT_TP_PATH_FUSED or WEFT_TP_PATH_SEQUENTIAL
  int mover; // WeftTpMover
  int comm_ctas;
  int gemm_ctas;
  int tile_n;
  int group_m;
  int chunk_rows;   // all-gather: rows per arrival flag
  int shard_tiles;  // scatter ops: tile rows per owner (0: ownership by tile index)
  int lag;          // scatter ops: rounds between an owner's tile and the next rank's (OwnerScheduler)
  int slab_tiles;   // scatter ops, copy-engine mover: tile columns per chunk
  int slabs;        // column slabs per band
  int chunks;       // chunks per owner's shard (bands x slabs)
  gemm::TailSplit tail;  // all-gather: the last wave's tiles split along K (pointers unset here)
  bool fused_available;
  std::string reason;
  double fused_us;
  double sequential_us;
  // Sequential path: padded sizes (a multiple of 8 elements) and which operands go through padding.
  int64_t kp, np;
  bool pad_a, pad_b, pad_out;
  Layout layout;
};

Problem problem_of(const WeftComm& c, const WeftTpParams& p);
// Validates the override fields (throws WEFT_E_INVALID naming the field) and chooses the rest.
Choice choose(const WeftComm& c, const WeftTpParams& p);

}  // namespace weft::tp
