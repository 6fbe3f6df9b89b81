// across_nodes.h — the host-side face of the fused tensor-parallel kernels that cross nodes through
// the proxy (cuda/fused/all_gather_gemm_across_nodes.cu), included by ffi/src/tp (plain C++). Topology,
// staging and epochs are the multi-node communicator's (cuda/collectives/hierarchical.h): ranks
// are node-major and rail-aligned, and every launch takes the communicator's next epoch, so the
// staging's parity rule holds across collectives and these ops alike.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "collectives/hierarchical.h"
#include "fused/fused.h"
#include "gemm/gemm.h"
#include "weft.h"

namespace weft::fused {

// The fused kernels keep one pointer per LOCAL rank in kernel parameters.
constexpr int kMaxLocalRanks = 8;

// ---- all-gather + GEMM across nodes ------------------------------------------------------------------
//
// Signals (epoch-tagged u64, st.release.sys / ld.acquire.sys, never reset):
//   flags[g][chunk] in EVERY rank's own memory (workspace): "chunk `chunk` of global rank g's rows is
//   in my landing buffer". Raised over NVLink by the local rank that delivered the rows (rank g
//   itself when it is on this node; else the local rank of g's rail, which received them from the
//   proxy), so the GEMM producer only ever polls local memory.
//   The proxy's arrival signals are the receive staging's words [node][chunk].
struct InterAgState {
  CUtensorMap a_local;                // this rank's rows [m_shard, k]: its own tiles read A from here
  uint64_t* flags[kMaxLocalRanks];    // flags[q]: local rank q's [world][chunks] flags, as mapped here
  char* landing[kMaxLocalRanks];      // landing[q]: local rank q's landing slot of this launch's parity [world * m_shard, k]
  const char* a;                      // this rank's rows (the movers' source)
  coll::InterNode inter;              // staging, proxy lane, topology
  uint64_t epoch;                     // the communicator's epoch of this launch
  uint64_t timeout_ns;
  int32_t local_rank, local_size;
  int32_t m_shard;      // rows per rank, a multiple of 128
  int32_t chunk_rows;   // rows per flag and per proxy command, a multiple of 128 dividing m_shard
  int32_t chunks;       // m_shard / chunk_rows (<= 256: one receive-staging signal word each)
  int32_t comm_ctas;    // CTAs [0, comm_ctas) move rows; the rest run the GEMM
  int32_t group_m;      // band height in tile rows, dividing chunk_rows / 128
  int32_t row_bytes;    // k * 2
};

struct InterAgLaunch : GemmLaunchShape {
  CUtensorMap landing;  // KernelParams::a: this rank's landing slot (every rank's rows but its own)
  CUtensorMap b, c;
  InterAgState state;
};

// gemm_ctas == 0: only loads and configures the kernel.
cudaError_t launch_all_gather_gemm_across_nodes(const InterAgLaunch& l);
bool all_gather_gemm_across_nodes_supported(int tile_n);

// ---- GEMM + reduce-scatter across nodes ----------------------------------------------------------------
//
// Every rank's GEMM stores its partial C [M, N] (bf16) into its own partial slot of this launch's
// parity, tile rows owned by other nodes first, and publishes each stored 64-row half-tile:
//   stored[q][(m0 / 64 + half) * tiles_n + tile_n] in local rank q's own memory (HalfTileFlagPublisher).
// Mover CTAs then reduce row chunks as the hierarchical reduce-scatter does: for the owner on rail
// l of each other node, the sum over this node's ranks of the owner's rows (read over NVLink once
// every local rank has stored them) -> send staging -> put+signal [node][chunk]; for this rank's
// own rows, the local ranks' partials plus every other node's arrived sums, in node order -> out.
struct InterRsState {
  uint64_t* stored[kMaxLocalRanks];       // stored[q]: local rank q's half-tile flags [2 tiles_m][tiles_n], as mapped here
  const char* partial[kMaxLocalRanks];    // partial[q]: local rank q's partial C of this launch's parity [M, N]
  char* out;                              // this rank's rows of the sum [m_shard, N]
  coll::InterNode inter;
  uint64_t epoch;
  uint64_t timeout_ns;
  int32_t local_rank, local_size;
  int32_t m_shard;     // rows per owner, a multiple of 128
  int32_t chunk_rows;  // rows per proxy command and signal, a multiple of 128 dividing m_shard
  int32_t chunks;      // m_shard / chunk_rows (<= 256)
  int32_t comm_ctas;   // CTAs [0, comm_ctas) reduce and move; the rest run the GEMM
  int32_t group_m;     // band height in tile rows, dividing m_shard / 128
  int32_t tiles_n;
  int32_t n;           // columns of C (a multiple of 8)
};

struct InterRsLaunch : GemmLaunchShape {
  CUtensorMap a, b, c;  // c: this rank's partial slot of the launch's parity [M, N]
  InterRsState state;
};

// gemm_ctas == 0: only loads and configures the kernel.
cudaError_t launch_gemm_reduce_scatter_across_nodes(const InterRsLaunch& l);

}  // namespace weft::fused
