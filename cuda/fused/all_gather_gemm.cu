// all_gather_gemm.cu — column-parallel GEMM: out [M, n] = allgather(a) · b as one persistent kernel.
//
// Params: WeftTpParams (weft.h) is the argument pack the C ABI passes by pointer; ffi/src/tp turns
// it into AgLaunch (fused.h) once per plan. Each rank owns m_shard rows of A.
//
// Data movement, chunk by chunk (chunk_rows rows, one epoch flag each):
//   - copy-engine mover (comm_ctas = 0): the host enqueued, on side streams, a peer copy of every
//     chunk of this rank's rows into every peer's landing buffer, each followed by a stream write of
//     flags[dest][chunk] in this rank's memory. No SM is spent on moving. The side streams start
//     once this kernel writes entered = epoch (after grid::wait_previous: every earlier write of `a`
//     on this rank's stream is done, and so is launch e-1), not on an event recorded before the
//     kernel, which would keep consecutive launches from overlapping (programmatic dependent launch).
//   - CTA mover (comm_ctas > 0): CTAs [0, comm_ctas) copy the chunks with 16-byte stores into the
//     peers' landing buffers, then publish the same flags with st.release.sys.
// GEMM CTAs compute this rank's own rows first (A straight from `a`, nothing to wait for), then the
// peers' rows in the order the chunks arrive; before a remote tile's first load the producer waits
// for that chunk's flag in the writer's memory (RowSignalGate) and fences the async proxy.
//
// Landing buffers are double-buffered by epoch parity: rank r writes rank p's slot e % 2 during
// launch e only after r's launch e-1 has finished, and that launch waited for p's chunks of e-1,
// which p sent only after its launch e-2 had finished reading slot e % 2.
#include "collectives/move.cuh"
#include "fused/abort.cuh"
#include "fused/fused.h"
#include "fused/launch.cuh"
#include "fused/row_chunks.cuh"
#include "gemm/kernel.cuh"
#include "gemm/tail_split.cuh"

namespace weft::fused {

namespace {

// Tile order: this rank's tile rows, then the peers' tile rows chunk by chunk (chunk c of every peer
// before chunk c + 1), each in grouped bands that never straddle a chunk. With a tail split
// (AgState::tail), the units from tail.first_unit on (the last, partial wave: part of the last
// chunk) come split along K instead, after each CTA's whole tiles (gemm/tail_split.cuh).
template <class Cfg>
class AgScheduler {
 public:
  // Everything but the position lives in the kernel's parameter space (s): the producer has 40
  // registers, and a scheduler that kept its own copies of these made the kernels spill.
  __device__ AgScheduler(const gemm::Problem& p, const AgState& s, uint32_t)
      : s_(s), tiles_n_((p.n + Cfg::kTileN - 1) / Cfg::kTileN), unit_(static_cast<int32_t>(blockIdx.x) - s.comm_ctas) {}

  __device__ bool next(gemm::TileCoord& t) {
    const int32_t ctas = static_cast<int32_t>(gridDim.x) - s_.comm_ctas;
    // The split was planned for this many GEMM CTAs; anything else runs unsplit.
    const bool split = s_.tail.tiles > 0 && s_.tail.ctas == ctas;
    const int32_t whole = split ? s_.tail.first_unit : s_.world * (s_.m_shard / Cfg::kTileM) * tiles_n_;
    if (unit_ < whole) {
      set_unit(t, unit_);
      unit_ += ctas;
      return true;
    }
    if (!split) return false;
    // Tail units (gemm/tail_split.cuh); this CTA's first is v = cta.
    const int32_t v = unit_ - whole, cta = static_cast<int32_t>(blockIdx.x) - s_.comm_ctas;
    gemm::TailPiece piece;
    if (!gemm::tail_unit(s_.tail, cta, v, piece)) return false;
    set_unit(t, whole + piece.tile);
    t.k_begin = piece.k_begin;
    t.k_blocks = piece.k_blocks;
    t.piece = piece.slot;
    unit_ += gemm::tail_step(s_.tail);
    return true;
  }

 private:
  __device__ void set_unit(gemm::TileCoord& t, int32_t unit) const {
    const int32_t shard_tiles = s_.m_shard / Cfg::kTileM, chunk_tiles = s_.chunk_rows / Cfg::kTileM;
    const gemm::BandTile b = gemm::whole_band_tile(unit, s_.group_m, tiles_n_);
    int32_t v = b.row;  // tile row in this order
    int32_t tile_m;
    if (v < shard_tiles) {
      tile_m = s_.rank * shard_tiles + v;
    } else {
      v -= shard_tiles;
      const int32_t per_chunk = chunk_tiles * (s_.world - 1);
      const int32_t chunk = v / per_chunk;
      const int32_t rest = v - chunk * per_chunk;
      const int32_t src = (s_.rank + 1 + rest / chunk_tiles) % s_.world;
      tile_m = src * shard_tiles + chunk * chunk_tiles + rest % chunk_tiles;
    }
    gemm::set_whole_k_tile<Cfg>(t, tile_m, b.col);
  }

  const AgState& s_;
  int32_t tiles_n_, unit_;
};

// A: this rank's own tiles straight from its rows (AgState::a_local), the peers' from the landing
// buffer (KernelParams::a) at the tile's own row.
template <class Cfg>
struct AgSource : gemm::TmaA<Cfg> {
  template <class P>
  __device__ __forceinline__ AgSource(const P& p, const gemm::TileCoord& t) : gemm::TmaA<Cfg>(p, t) {
    const AgState& s = p.hooks;
    if (t.m0 / s.m_shard != s.rank) return;
    this->map = &s.a_local;
    this->row = t.m0 - s.rank * s.m_shard;
  }
};

struct AgHooks : gemm::DefaultHooks {
  using State = AgState;
  using ProducerState = ChunkSeen;
  template <class Cfg>
  using Scheduler = AgScheduler<Cfg>;
  template <class Cfg>
  using ASource = AgSource<Cfg>;
  // The last wave's tiles may come split along K (AgState::tail).
  template <class Cfg, class H>
  using Epilogue = gemm::SplitTailEpilogue<Cfg, H>;
  static __device__ __forceinline__ const gemm::TailSplit& tail_split(const State& s) { return s.tail; }
  static __device__ __forceinline__ uint64_t tail_epoch(const State& s) { return s.epoch; }

  static __device__ void on_kernel_start(const State& s) {
    if (blockIdx.x == 0 && s.entered) sys::signal_store(s.entered, s.epoch);
  }

  // Chunk c of rank src's rows has landed here once src's flag [my rank][c] says so (in src's memory).
  static __device__ __forceinline__ bool before_tile_loads(const State& s, ProducerState& ps, const gemm::TileCoord& t) {
    return await_row_chunk(ps, t, s.m_shard, s.chunk_rows, s.rank, [&](int32_t src) {
      return gemm::RowSignalGate{s.flags[src] + int64_t(s.rank) * s.chunks, s.epoch, src * s.m_shard, s.chunk_rows,
                                 budget(s.timeout_ns, s.abort, s.rank, s.epoch)};
    });
  }

  static __device__ bool before_finish(const State& s) {
    if (!s.wait_outgoing) return true;
    // Copy-engine mover: this rank's copies read `a`; the launch may complete (and the caller
    // reuse `a`) only once the last chunk to every peer has landed (the stream writes in order).
    const sys::WaitBudget bound = budget(s.timeout_ns, s.abort, s.rank, s.epoch);
    for (int32_t q = 0; q < s.world; ++q) {
      if (q == s.rank) continue;
      const uint64_t* last = s.flags[s.rank] + int64_t(q) * s.chunks + (s.chunks - 1);
      if (sys::wait_at_least(last, s.epoch, bound) != sys::WaitResult::kOk) return false;
    }
    return true;
  }

  static __device__ void on_wait_failed(const State& s, const Completion& c, uint32_t stage) {
    report_wait_failure(s.abort, s.rank, s.world, s.epoch, c, stage);
  }
};

// CTA mover: CTA i of comm_ctas sends items i, i + comm_ctas, ... (item = chunk x peer, chunk-major,
// so every peer gets chunk 0 before anyone's chunk 1), 16-byte vectors, 8 in flight per thread.
__device__ inline void push_rows(const AgState& s, const Completion&) {
  const int32_t peers = s.world - 1;
  const int32_t items = s.chunks * peers;
  const uint64_t chunk_bytes = uint64_t(s.chunk_rows) * uint64_t(s.row_bytes);
  for (int32_t i = blockIdx.x; i < items; i += s.comm_ctas) {
    const int32_t chunk = i / peers;
    const int32_t dest = (s.rank + 1 + i % peers) % s.world;
    const char* src = s.a + uint64_t(chunk) * chunk_bytes;
    char* dst = s.landing[dest] + (uint64_t(s.rank) * uint64_t(s.m_shard) * uint64_t(s.row_bytes)) +
                uint64_t(chunk) * chunk_bytes;
    coll::copy_out(src, [&](uint32_t) { return dst; }, 1, chunk_bytes, coll::cta_workers());
    __syncthreads();
    // st.release.sys is cumulative through the barrier: every thread's stores to the peer are
    // ordered before the flag the peer acquires.
    if (threadIdx.x == 0) sys::signal_store(s.flags[s.rank] + int64_t(dest) * s.chunks + chunk, s.epoch);
  }
}

}  // namespace

bool all_gather_gemm_supported(int tile_n) { return tile_n == 128 || tile_n == 256; }

cudaError_t launch_all_gather_gemm(const AgLaunch& l) {
  return launch_mover_gemm<AgHooks, push_rows, 256, 128>(l, l.landing, l.state.comm_ctas + l.gemm_ctas);
}

}  // namespace weft::fused
