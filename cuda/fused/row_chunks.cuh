// row_chunks.cuh — the all-gather GEMMs' wait for remote rows (all_gather_gemm.cu, and
// all_gather_gemm_across_nodes.cu): every source rank's shard of A arrives in chunks of chunk_rows
// rows with one epoch flag each, and the producer waits for a remote tile's chunk before the tile's
// first load.
#pragma once

#include <cstdint>

#include "gemm/hooks.cuh"
#include "gemm/params.cuh"
#include "primitives/tma.cuh"

namespace weft::fused {

// The producer's ProducerState: the last chunk seen complete, so the next tiles of the same chunk
// need no poll.
struct ChunkSeen {
  int32_t src = -1;
  int32_t chunk = -1;
};

// before_tile_loads for a tile of source rank t.m0 / m_shard: nothing to wait for on own rows
// (own_rank's), else gate_of(src).wait(t) on the chunk's flag (a gemm::RowSignalGate over that
// source's flags), then a fence, because the chunk was written by another agent (a copy engine, a
// peer's stores or a mover CTA's) and TMA reads it next through the async proxy.
template <class GateOf>
__device__ __forceinline__ bool await_row_chunk(ChunkSeen& seen, const gemm::TileCoord& t, int32_t m_shard,
                                                int32_t chunk_rows, int32_t own_rank, GateOf&& gate_of) {
  const int32_t src = t.m0 / m_shard;
  if (src == own_rank) return true;
  const int32_t chunk = (t.m0 - src * m_shard) / chunk_rows;
  if (src == seen.src && chunk == seen.chunk) return true;
  const gemm::RowSignalGate gate = gate_of(src);
  const bool ok = gate.wait(t);
  cta::fence_proxy_async_global();
  seen.src = src;
  seen.chunk = chunk;
  return ok;
}

}  // namespace weft::fused
