// choice.hpp — what a tensor-parallel plan runs and what it is chosen from: the call as the cost model
// sees it (Call: the params, the problem, the ranks' placement), and the choice (Choice: the
// candidate that runs it, its configuration and the layout of its symmetric workspace). Choosing is a
// pure function of the call and the placement, so every rank computes the same choice and the same
// workspace layout without talking to the others (tp/picker.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "gemm/gemm.h"

#include "weft.h"

namespace weft::tp {

struct Candidate;

struct Region {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// The symmetric workspace, the same offsets on every rank. Which regions a plan has depends on its
// candidate; each candidate's file documents its own (all_gather.cpp, scatter.cpp, ...).
struct Layout {
  Region flags, landing;
  Region stored, done, entered;
  // Copy-engine reduce-scatter / all-reduce and the exchange.
  Region counts, ready, progress, staging_ce, recv;
  // Sequential path (and the inter-node reduce-scatter's partials: staging).
  Region staging, a_pad, b_pad, out_pad;
  // All-gather with a split tail: the pieces' fp32 partials and the tiles' counts.
  Region tail_partials, tail_counts;
  // One-node fused plans: the plan's abort word (cuda/fused/fused.h, AbortWords), last.
  Region abort;
  uint64_t total = 0;
};

// Where the ranks are, as the cost model needs to know it: the communicator's world (the ranks of
// this node), the SMs this rank may use, the nodes, and whether two ranks share a GPU.
struct Placement {
  int world = 1;        // ranks on this node (the communicator's world)
  int rank = 0;
  int sm_count = 0;     // SMs this rank's kernels may use (the device's, or its smBudget)
  int nodes = 1;        // > 1: a multi-node communicator (weft_comm_set_internode)
  int global_world = 1; // nodes x world
  uint64_t slot_bytes = 0;  // multi-node: inter-node staging per (rank, peer node)
  // Some two ranks of the communicator run on the same GPU (Communicator.local({ devices: [0, 0] }),
  // or processes sharing a device). A copy between two buffers of one device then runs on that
  // device's SMs, which the ranks' persistent kernels may all hold (tp/copy_engine.cpp).
  bool shares_device = false;
};

struct Problem {
  int op;
  int world, rank;
  int64_t m, n, k;
  int64_t m_shard;  // ceil(m / world)
  bool b_nk;
};

struct Call {
  const WeftTpParams& params;
  Problem problem;
  Placement place;
};

struct Choice {
  const Candidate* candidate = nullptr;  // what runs the call
  int path = WEFT_TP_PATH_SEQUENTIAL;    // WEFT_TP_PATH_FUSED or WEFT_TP_PATH_SEQUENTIAL
  int mover = WEFT_TP_MOVER_NONE;        // WeftTpMover, as weft_tp_choose reports it
  int comm_ctas = 0;
  int gemm_ctas = 0;
  int tile_n = 0;
  int group_m = 0;
  int chunk_rows = 0;   // all-gather: rows per arrival flag
  int shard_tiles = 0;  // scatter ops: tile rows per owner (0: ownership by tile index)
  int lag = 0;          // scatter ops: rounds between an owner's tile and the next rank's (OwnerScheduler)
  int slab_tiles = 0;   // scatter ops, copy-engine mover: tile columns per chunk
  int slabs = 0;        // column slabs per band
  int chunks = 0;       // chunks per owner's shard (bands x slabs)
  gemm::TailSplit tail{};  // all-gather: the last wave's tiles split along K (pointers unset here)
  // What weft_tp_choose reports beside the choice: whether the shape allows a fused kernel (and why
  // not), the best fused estimate and the sequential one.
  bool fused_available = false;
  std::string reason;
  double fused_us = 0;
  double sequential_us = 0;
  // Sequential path: padded sizes (a multiple of 8 elements) and which operands go through padding.
  int64_t kp = 0, np = 0;
  bool pad_a = false, pad_b = false, pad_out = false;
  Layout layout;
};

Problem problem_of(const WeftTpParams& p, const Placement& place);
// Validates the override fields (throws WEFT_E_INVALID naming the field, or WEFT_E_UNSUPPORTED for
// what the placement cannot run) and chooses the rest (tp/picker.cpp).
Choice choose(const WeftTpParams& params, const Placement& place);

}  // namespace weft::tp
