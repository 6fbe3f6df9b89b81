// gemm_reduce_scatter_across_nodes.cu — row-parallel GEMM across nodes: out [m_shard, N] = this
// rank's rows of Σ over ranks a · b, as ONE persistent kernel per rank. State and signals:
// across_nodes.h; topology and staging: collectives/hierarchical.h.
//
// Params: WeftTpParams (weft.h), turned into InterRsLaunch once per plan by ffi/src/tp/node_plan.cpp.
//
// GEMM CTAs compute the whole partial C of this rank into its partial slot, in owner order: the
// rows of owners on other nodes first (they have the longest way to go), this node's last, and
// publish every stored half-tile. Mover CTAs [0, comm_ctas) take items round-robin:
//   items [0, (nodes-1) * chunks)   (i-th other node m, chunk c): wait until every local rank has
//       stored chunk c of owner (m, l)'s rows, sum those partials (NVLink loads) into the send
//       staging, put+signal it to (m, l);
//   items [.., + chunks)            chunk c of this rank's rows: wait for the local partials and for
//       every other node's sum of that chunk, add them in node order into out.
// Sends come first in every CTA's sequence; a send waits only for GEMM tiles, never for a peer,
// so the movers cannot deadlock.
//
// Buffer reuse (epoch parity, as in all_gather_gemm_across_nodes.cu): partial slot e % 2 of a rank is
// read by its local peers during launch e; it is written again in launch e + 2, after launch e + 1
// read every local peer's slot (e+1) % 2 behind that peer's flags of e + 1, which the peer raised
// only after its launch e ended. Staging slots: see hierarchical.h.
#include "collectives/between_nodes.cuh"
#include "fused/across_nodes.cuh"
#include "fused/launch.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

namespace {

// Tile order: owners by node, starting with the node after this one (this node last); inside a
// node, this rail's owner first; each owner's shard in grouped bands.
template <class Cfg>
class InterRsScheduler {
 public:
  __device__ InterRsScheduler(const gemm::Problem& p, const InterRsState& s, uint32_t) : w_(p, s) {}

  __device__ bool next(gemm::TileCoord& t) {
    if (w_.unit >= w_.units) return false;
    const gemm::BandTile b = gemm::whole_band_tile(w_.unit, w_.group, w_.tiles_n);
    const int32_t owner_index = b.row / w_.shard_tiles;  // i-th owner in the order above
    const int32_t node = (w_.node + 1 + owner_index / w_.local_size) % w_.nodes;
    const int32_t owner = node * w_.local_size + (w_.local_rank + owner_index) % w_.local_size;
    gemm::set_whole_k_tile<Cfg>(t, owner * w_.shard_tiles + b.row % w_.shard_tiles, b.col);
    w_.unit += w_.stride;
    return true;
  }

 private:
  ShardWalk<Cfg> w_;
};

struct InterRsHooks : gemm::DefaultHooks {
  using State = InterRsState;
  template <class Cfg>
  using Scheduler = InterRsScheduler<Cfg>;
  // Every half-tile's stores are published (after_tile_stored) once complete.
  template <class Cfg, class H>
  using Epilogue = gemm::StoreEpilogue<Cfg, H, gemm::EpilogueOp::kStore, gemm::SignalScope::kSystem>;

  static __device__ void after_tile_stored(const State& s, const gemm::TileCoord& t, int consumer) {
    gemm::HalfTileFlagPublisher{s.stored[s.local_rank], s.epoch, s.tiles_n}.publish(t, consumer);
  }
};

// A mover failed (across_nodes.cuh); a rank the host declared failed is reported as such.
__device__ inline void report(const Completion& c, sys::WaitResult r, int64_t status, uint32_t peer, const coll::InterNode& x) {
  if (status == 0 && r == sys::WaitResult::kAborted && report_declared(c, x)) return;
  fail_remote(c, r, status, peer);
}

// Every thread: waits (its share of the flags, bounded) until every local rank has stored rows
// [row0, row0 + rows) of its partial C. True for the whole CTA once all have.
__device__ inline bool await_stored(const InterRsState& s, const Completion& completion, int32_t row0, int32_t rows) {
  const int32_t halves = rows / 64;
  const int32_t per_rank = halves * s.tiles_n;
  bool failed = false;
  for (int32_t i = threadIdx.x; i < per_rank * s.local_size && !failed; i += blockDim.x) {
    const int32_t q = i / per_rank;
    const int32_t j = i - q * per_rank;
    const uint64_t* flag = s.stored[q] + (int64_t(row0 / 64 + j / s.tiles_n)) * s.tiles_n + j % s.tiles_n;
    if (sys::wait_at_least(flag, s.epoch, sys::WaitBudget{s.timeout_ns, s.inter.host_abort}) != sys::WaitResult::kOk) {
      if (!report_declared(completion, s.inter)) cta::fail(completion, gemm::kFailHookWait, gemm::kStageFinish);
      failed = true;
    }
  }
  return !__syncthreads_or(failed);
}

// Item (node m, chunk c): this node's sum of owner (m, l)'s chunk c -> that owner, through the proxy.
__device__ inline bool send_chunk(const InterRsState& s, const Completion& completion, uint32_t m, int32_t c) {
  const coll::InterNode& x = s.inter;
  const uint32_t parity = uint32_t(s.epoch & 1);
  const uint32_t owner = coll::inter::global_rank(x, m, uint32_t(s.local_rank));
  const uint64_t row_bytes = uint64_t(s.n) * 2;
  const uint64_t chunk_bytes = uint64_t(s.chunk_rows) * row_bytes;
  const int32_t row0 = int32_t(owner) * s.m_shard + c * s.chunk_rows;
  if (!await_stored(s, completion, row0, s.chunk_rows)) return false;
  const uint64_t staged = coll::inter::send_offset(x, parity, m) + uint64_t(c) * chunk_bytes;
  coll::sum_out<__nv_bfloat16>([&](uint32_t q) { return s.partial[q] + uint64_t(row0) * row_bytes; }, uint32_t(s.local_size),
                               [&](uint32_t) { return x.send + staged; }, 1, uint64_t(s.chunk_rows) * s.n, coll::cta_workers());
  __syncthreads();
  bool failed = false;
  if (threadIdx.x == 0) {
    int64_t status = 0;
    const sys::WaitResult r = coll::inter::put_signal(x, owner, staged, coll::inter::recv_offset(x, parity, x.node) +
                                                      uint64_t(c) * chunk_bytes, chunk_bytes, uint32_t(c), s.epoch,
                                                      s.timeout_ns, &status);
    if (r != sys::WaitResult::kOk) {
      report(completion, r, status, owner, s.inter);
      failed = true;
    }
  }
  return !__syncthreads_or(failed);
}

// Item chunk c of this rank's own rows: local partials + every other node's sums, in node order.
__device__ inline bool reduce_own_chunk(const InterRsState& s, const Completion& completion, int32_t c) {
  const coll::InterNode& x = s.inter;
  const uint32_t parity = uint32_t(s.epoch & 1);
  const uint64_t row_bytes = uint64_t(s.n) * 2;
  const uint64_t chunk_bytes = uint64_t(s.chunk_rows) * row_bytes;
  const int32_t row0 = int32_t(x.rank) * s.m_shard + c * s.chunk_rows;
  if (!await_stored(s, completion, row0, s.chunk_rows)) return false;
  bool failed = false;
  if (threadIdx.x + 1 < x.nodes) {
    const uint32_t m = coll::inter::other_node(x, threadIdx.x);
    int64_t status = 0;
    const sys::WaitResult r = coll::inter::await_signal(x, m, uint32_t(c), s.epoch, s.timeout_ns, nullptr, 0, &status);
    if (r != sys::WaitResult::kOk) {
      report(completion, r, status, coll::inter::global_rank(x, m, uint32_t(s.local_rank)), x);
      failed = true;
    }
  }
  if (__syncthreads_or(failed)) return false;
  const uint32_t L = uint32_t(s.local_size);
  coll::inter::sum_in<__nv_bfloat16>(
      [&](uint32_t q) -> const char* {
        if (q < L) return s.partial[q] + uint64_t(row0) * row_bytes;
        const uint32_t r = q - L;
        const uint32_t m = r < x.node ? r : r + 1;
        return x.recv + coll::inter::recv_offset(x, parity, m) + uint64_t(c) * chunk_bytes;
      },
      L + x.nodes - 1, [&](uint32_t) { return s.out + uint64_t(c) * chunk_bytes; }, 1, uint64_t(s.chunk_rows) * s.n,
      coll::cta_workers());
  return true;
}

__device__ inline void move_sums(const InterRsState& s, const Completion& completion) {
  const int32_t remote = int32_t(s.inter.nodes) - 1;
  const int32_t sends = remote * s.chunks;
  for (int32_t i = blockIdx.x; i < sends + s.chunks; i += s.comm_ctas) {
    if (i < sends) {
      if (!send_chunk(s, completion, coll::inter::other_node(s.inter, uint32_t(i % remote)), i / remote)) return;
    } else {
      if (!reduce_own_chunk(s, completion, i - sends)) return;
    }
  }
}

}  // namespace

cudaError_t launch_gemm_reduce_scatter_across_nodes(const InterRsLaunch& l) {
  // gemm_ctas == 0: the plan's preload, which launches nothing (launch_persistent).
  const int ctas = l.gemm_ctas == 0 ? 0 : l.state.comm_ctas + l.gemm_ctas;
  return launch_mover_gemm<InterRsHooks, move_sums, 256, 128>(l, l.a, ctas);
}

}  // namespace weft::fused
