// all_gather_gemm_across_nodes.cu — column-parallel GEMM across nodes: out [M, n] = allgather(a) · b
// as ONE persistent kernel per rank, the all-gather going over NVLink inside a node and through
// the proxy (host-mapped staging, libfabric) between nodes. State and signals: across_nodes.h;
// topology and staging: collectives/hierarchical.h.
//
// Params: WeftTpParams (weft.h) is what the C ABI passes by pointer; ffi/src/tp/node_plan.cpp turns
// it into InterAgLaunch once per plan. Each rank owns m_shard rows of A.
//
// CTAs [0, comm_ctas) move rows, in items taken round-robin (item i by CTA i % comm_ctas):
//   items [0, chunks)     chunk c of this rank's rows -> every local peer's landing buffer (NVLink,
//                         then that peer's flag) and the send staging, then one put+signal per
//                         other node to the rank of this rail there (proxy device lane);
//   items [chunks, ...)   (chunk c, i-th other node m): wait for m's signal [m][c] in the receive
//                         staging, copy the rows from there into the landing buffer of every local
//                         rank (this one included), raise their flags.
// Sends come first in every CTA's sequence, so no CTA waits for data before its own sends are out.
// The other CTAs run the GEMM: this rank's own rows first (A straight from `a`, no wait), then the
// local peers' rows, then the other nodes' rows, chunk by chunk; before a remote tile's first load
// the producer waits for that chunk's flag in this rank's own memory and fences the async proxy.
//
// Buffer reuse: landing slots, send and receive staging are double-buffered by epoch parity. A
// rank writes slot e % 2 of a peer (landing over NVLink, staging through the proxy) in launch e
// only after its launch e-1 has received that peer's rows of e-1 (the GEMM waited for every
// chunk), which the peer produced only after its launch e-2, the last reader of slot e % 2, ended.
#include "collectives/between_nodes.cuh"
#include "fused/across_nodes.cuh"
#include "fused/launch.cuh"
#include "fused/row_chunks.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

namespace {

// Tile order: this rank's tile rows; then the local peers' rows, chunk-major (chunk c of every
// local peer before chunk c + 1); then the other nodes' rows, chunk-major, rail first (its rows
// arrive straight from the proxy; the other rails' rows come forwarded by the local peers). Grouped
// bands never straddle a chunk.
template <class Cfg>
class InterAgScheduler {
 public:
  __device__ InterAgScheduler(const gemm::Problem& p, const InterAgState& s, uint32_t)
      : w_(p, s), chunk_tiles_(s.chunk_rows / Cfg::kTileM) {}

  __device__ bool next(gemm::TileCoord& t) {
    if (w_.unit >= w_.units) return false;
    const gemm::BandTile b = gemm::whole_band_tile(w_.unit, w_.group, w_.tiles_n);
    const int32_t shard_tiles = w_.shard_tiles, local_rank = w_.local_rank, local_size = w_.local_size;
    const int32_t node = w_.node, nodes = w_.nodes;
    int32_t v = b.row;  // tile row in this order
    int32_t src, row;  // whose rows, and which tile row of that rank's shard
    if (v < shard_tiles) {
      src = node * local_size + local_rank;
      row = v;
    } else {
      v -= shard_tiles;
      const int32_t local_tiles = shard_tiles * (local_size - 1);
      const bool same_node = v < local_tiles;
      if (!same_node) v -= local_tiles;
      const int32_t sources = same_node ? local_size - 1 : (nodes - 1) * local_size;
      const int32_t per_chunk = chunk_tiles_ * sources;
      const int32_t chunk = v / per_chunk;
      const int32_t rest = v - chunk * per_chunk;
      const int32_t i = rest / chunk_tiles_;
      src = same_node ? node * local_size + (local_rank + 1 + i) % local_size
                      : ((node + 1 + i / local_size) % nodes) * local_size + (local_rank + i) % local_size;
      row = chunk * chunk_tiles_ + rest % chunk_tiles_;
    }
    gemm::set_whole_k_tile<Cfg>(t, src * shard_tiles + row, b.col);
    w_.unit += w_.stride;
    return true;
  }

 private:
  ShardWalk<Cfg> w_;
  int32_t chunk_tiles_;
};

// A: this rank's own tiles straight from its rows (a_local), the others' from the landing buffer
// (KernelParams::a) at the tile's own row.
template <class Cfg>
struct InterAgSource : gemm::TmaA<Cfg> {
  template <class P>
  __device__ __forceinline__ InterAgSource(const P& p, const gemm::TileCoord& t) : gemm::TmaA<Cfg>(p, t) {
    const InterAgState& s = p.hooks;
    if (t.m0 / s.m_shard != int32_t(s.inter.rank)) return;
    this->map = &s.a_local;
    this->row = t.m0 - int32_t(s.inter.rank) * s.m_shard;
  }
};

struct InterAgHooks : gemm::DefaultHooks {
  using State = InterAgState;
  using ProducerState = ChunkSeen;
  template <class Cfg>
  using Scheduler = InterAgScheduler<Cfg>;
  template <class Cfg>
  using ASource = InterAgSource<Cfg>;

  // Chunk c of global rank src's rows has landed here once flag [src][c] in this rank's own memory
  // says so (raised by a mover CTA here or on a local peer).
  static __device__ __forceinline__ bool before_tile_loads(const State& s, ProducerState& ps, const gemm::TileCoord& t) {
    return await_row_chunk(ps, t, s.m_shard, s.chunk_rows, int32_t(s.inter.rank), [&](int32_t src) {
      return gemm::RowSignalGate{s.flags[s.local_rank] + int64_t(src) * s.chunks, s.epoch, src * s.m_shard, s.chunk_rows,
                                 sys::WaitBudget{s.timeout_ns, s.inter.host_abort}};
    });
  }

  // (Not report_declared: its double test of `declared` compiles to different branches here.)
  static __device__ void on_wait_failed(const State& s, const Completion& c, uint32_t stage) {
    const uint32_t declared = coll::inter::declared(s.inter);
    if (declared != 0) fail_declared(c, declared);
    else cta::fail(c, gemm::kFailHookWait, stage);
  }
};

// A mover failed (across_nodes.cuh); a rank the host declared failed is reported as such.
__device__ inline void report(const Completion& c, sys::WaitResult r, int64_t status, uint32_t peer, uint32_t declared) {
  if (status == 0 && r == sys::WaitResult::kAborted && declared != 0) {
    fail_declared(c, declared);
    return;
  }
  fail_remote(c, r, status, peer);
}

// Item c < chunks: this rank's chunk c to the local peers (NVLink) and to every other node (proxy).
__device__ inline bool send_chunk(const InterAgState& s, const Completion& completion, int32_t c) {
  const coll::InterNode& x = s.inter;
  const uint32_t parity = uint32_t(s.epoch & 1);
  const uint64_t chunk_bytes = uint64_t(s.chunk_rows) * uint64_t(s.row_bytes);
  const uint64_t at = (uint64_t(x.rank) * uint64_t(s.m_shard)) * uint64_t(s.row_bytes) + uint64_t(c) * chunk_bytes;
  const uint64_t staged = coll::inter::send_offset(x, parity, 0) + uint64_t(c) * chunk_bytes;
  const uint32_t peers = uint32_t(s.local_size - 1);
  coll::copy_out(s.a + uint64_t(c) * chunk_bytes,
                 [&](uint32_t i) { return i < peers ? s.landing[(s.local_rank + 1 + i) % s.local_size] + at : x.send + staged; },
                 peers + 1, chunk_bytes, coll::cta_workers());
  __syncthreads();
  const uint32_t t = threadIdx.x;
  // st.release.sys is cumulative through the barrier: the CTA's stores before the flag.
  if (t < peers) {
    const int32_t q = (s.local_rank + 1 + int32_t(t)) % s.local_size;
    sys::signal_store(s.flags[q] + int64_t(x.rank) * s.chunks + c, s.epoch);
  }
  bool failed = false;
  if (t + 1 < x.nodes) {
    const uint32_t m = coll::inter::other_node(x, t);
    const uint32_t peer = coll::inter::global_rank(x, m, uint32_t(s.local_rank));
    int64_t status = 0;
    const sys::WaitResult r = coll::inter::put_signal(x, peer, staged, coll::inter::recv_offset(x, parity, x.node) +
                                                      uint64_t(c) * chunk_bytes, chunk_bytes, uint32_t(c), s.epoch,
                                                      s.timeout_ns, &status);
    if (r != sys::WaitResult::kOk) {
      report(completion, r, status, peer, coll::inter::declared(s.inter));
      failed = true;
    }
  }
  return !__syncthreads_or(failed);
}

// Item (chunk c, node m): the rail peer on node m's chunk c, from the receive staging into every
// local rank's landing buffer, then their flags.
__device__ inline bool receive_chunk(const InterAgState& s, const Completion& completion, uint32_t m, int32_t c) {
  const coll::InterNode& x = s.inter;
  const uint32_t parity = uint32_t(s.epoch & 1);
  const uint64_t chunk_bytes = uint64_t(s.chunk_rows) * uint64_t(s.row_bytes);
  const uint32_t g = coll::inter::global_rank(x, m, uint32_t(s.local_rank));
  bool failed = false;
  if (threadIdx.x == 0) {
    int64_t status = 0;
    const sys::WaitResult r = coll::inter::await_signal(x, m, uint32_t(c), s.epoch, s.timeout_ns, nullptr, 0, &status);
    if (r != sys::WaitResult::kOk) {
      report(completion, r, status, g, coll::inter::declared(x));
      failed = true;
    }
  }
  if (__syncthreads_or(failed)) return false;
  const uint64_t at = (uint64_t(g) * uint64_t(s.m_shard)) * uint64_t(s.row_bytes) + uint64_t(c) * chunk_bytes;
  coll::inter::copy_in(x.recv + coll::inter::recv_offset(x, parity, m) + uint64_t(c) * chunk_bytes,
                       [&](uint32_t i) { return s.landing[(s.local_rank + int32_t(i)) % s.local_size] + at; },
                       uint32_t(s.local_size), chunk_bytes, coll::cta_workers());
  __syncthreads();
  if (threadIdx.x < uint32_t(s.local_size)) {
    const int32_t q = (s.local_rank + int32_t(threadIdx.x)) % s.local_size;
    sys::signal_store(s.flags[q] + int64_t(g) * s.chunks + c, s.epoch);
  }
  return true;
}

__device__ inline void move_rows(const InterAgState& s, const Completion& completion) {
  const int32_t remote = int32_t(s.inter.nodes) - 1;
  const int32_t items = s.chunks * (1 + remote);
  for (int32_t i = blockIdx.x; i < items; i += s.comm_ctas) {
    if (i < s.chunks) {
      if (!send_chunk(s, completion, i)) return;
    } else {
      const int32_t j = i - s.chunks;
      if (!receive_chunk(s, completion, coll::inter::other_node(s.inter, uint32_t(j % remote)), j / remote)) return;
    }
  }
}

}  // namespace

bool all_gather_gemm_across_nodes_supported(int tile_n) { return tile_n == 128 || tile_n == 256; }

cudaError_t launch_all_gather_gemm_across_nodes(const InterAgLaunch& l) {
  // gemm_ctas == 0: the plan's preload, which launches nothing (launch_persistent).
  const int ctas = l.gemm_ctas == 0 ? 0 : l.state.comm_ctas + l.gemm_ctas;
  return launch_mover_gemm<InterAgHooks, move_rows, 256, 128>(l, l.landing, ctas);
}

}  // namespace weft::fused
