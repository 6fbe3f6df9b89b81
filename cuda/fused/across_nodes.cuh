// across_nodes.cuh — device code the two fused kernels across nodes share
// (all_gather_gemm_across_nodes.cu, gemm_reduce_scatter_across_nodes.cu): the walk over the global
// ranks' shards that both tile orders start from, and how a mover reports a failure.
#pragma once

#include <cstdint>

#include "collectives/between_nodes.cuh"
#include "fused/across_nodes.h"
#include "gemm/scheduler.cuh"
#include "primitives/completion.cuh"

namespace weft::fused {

// What both schedulers read once: this CTA's first unit and stride among the GEMM CTAs (the movers
// are CTAs [0, comm_ctas)), and the grid of every global rank's shard: nodes x local ranks x shard
// tile rows x tile columns, in grouped bands of group_m tile rows. State: InterAgState or InterRsState.
template <class Cfg>
struct ShardWalk {
  template <class State>
  __device__ ShardWalk(const gemm::Problem& p, const State& s)
      : tiles_n((p.n + Cfg::kTileN - 1) / Cfg::kTileN),
        shard_tiles(s.m_shard / Cfg::kTileM),
        group(s.group_m),
        local_rank(s.local_rank),
        local_size(s.local_size),
        node(int32_t(s.inter.node)),
        nodes(int32_t(s.inter.nodes)),
        unit(static_cast<int32_t>(blockIdx.x) - s.comm_ctas),
        stride(static_cast<int32_t>(gridDim.x) - s.comm_ctas) {
    units = nodes * local_size * shard_tiles * tiles_n;
  }

  int32_t tiles_n, shard_tiles, group, local_rank, local_size, node, nodes, unit, stride, units;
};

// A rank the host declared failed (weft_comm_abort; declared = that rank + 1) is reported as a
// collective reports it.
__device__ inline void fail_declared(const Completion& c, uint32_t declared) {
  cta::fail(c, WEFT_E_PEER, WEFT_STAGE_ABORTED | (WEFT_ABORT_HOST << 8) | ((declared - 1) << 16));
}

// fail_declared if the host has declared a rank failed; true then.
__device__ inline bool report_declared(const Completion& c, const coll::InterNode& x) {
  const uint32_t declared = coll::inter::declared(x);
  if (declared != 0) fail_declared(c, declared);
  return declared != 0;
}

// A mover's put or wait for `peer` (a global rank) failed: the reason goes to the completion words
// as a collective's would (the transport's WEFT_E_* status, else timeout or transport, at stage
// WEFT_STAGE_REMOTE with the peer), so the host names the peer.
__device__ inline void fail_remote(const Completion& c, sys::WaitResult r, int64_t status, uint32_t peer) {
  const int32_t code = status != 0 ? int32_t(status) : r == sys::WaitResult::kTimeout ? WEFT_E_TIMEOUT : WEFT_E_TRANSPORT;
  cta::fail(c, code, WEFT_STAGE_REMOTE | (peer << 16));
}

}  // namespace weft::fused
