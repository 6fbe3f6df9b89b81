// dispatch_gemm.cu — MoE dispatch + up-projection as one persistent kernel per rank and launch: every
// CTA runs the dispatch's steps (dispatch.cuh: routing, counts, their exchange, the layout, the
// pushes of the rows this rank sends), then the GEMM engine over this rank's receive layout
// (grouped.cuh: a group per local expert), each tile's loads waiting for its 128-row block's arrival
// counter. The CTAs are one per SM and all resident (the grid barriers of the dispatch need it), so
// a CTA that has pushed its rows computes tiles while other CTAs and other ranks are still pushing.
//
// Tile order (GroupScheduler): with peers (world > 1), first every expert's blocks whose rows are
// all this rank's own (they land first: this rank's own CTAs store them, or nobody does when they
// are pulled), then every expert's other blocks in expert order, which the sources fill in the
// order o - 1, o - 2, ... (moe.h). At world 1 every row is own: one pass, expert by expert, so an
// expert's tiles run together and its weights are read from HBM about once.
//
// Movers (ArrivedRows below; DispatchArgs::pull_local):
//   PUSH  every row, own ones included, is copied into the receive buffer by its sender's CTAs; a
//         tile loads its 128 rows as one TMA box.
//   PULL  the owner's own rows are not copied: a tile with own rows has the producer's whole warp
//         load them by row index from x (one 1-row TMA box per row and k-block into the swizzled
//         stage; TMA applies the swizzle by destination address, so the stage is exactly what one
//         128-row box would have left), the other rows of the tile from the receive buffer the same
//         way; tiles without own rows load one box. At world 1 no row is copied at all.
//   The copy engine (a third mover for large contiguous runs) is measured in
//   bench/ladder/01-moe-movers.cu; it is not built here.
//
// Epochs and ordering: the dispatch's (moe.h). The GEMM's CTAs start once CTA 0 has published this
// launch's layout (its status word, released after the layout: every CTA waits for it, bounded);
// a tile's producer acquires arrivals[block] >= 128 x epoch, then fences the async proxy before TMA
// reads rows that st.global wrote. SwiGLU: paired gate | up tiles (grouped.cuh), out = silu(gate) x
// up in fp32, rounded once.
#include "fused/launch.cuh"
#include "moe/dispatch.cuh"
#include "moe/grouped.cuh"
#include "moe/moe.h"

namespace weft::moe {

namespace {

struct DispatchGemmState : GroupedBase {
  CUtensorMap recv_tile;  // recv [capacity, H], box {64, 128}: a tile's rows in one box
  CUtensorMap recv_rows;  // the same, box {64, 1}
  CUtensorMap x_rows;     // x [tokens, H], box {64, 1} (recv again when tokens = 0)
  DispatchArgs dispatch;
  const int4* row_source;
  const uint64_t* arrivals;
  const uint64_t* abort_word;
  int32_t pull;           // own rows from x
  int32_t last_token;     // tokens - 1 (clamps the row indices of a failed layout)
};

// A tile's A: see "Movers" above. Built by every lane of the producer's warp 0 (kLanes = 32) once
// per tile: each lane's 4 rows, as a coordinate in x (own rows, bit j of from_x) or in the receive
// buffer.
template <class Cfg>
struct ArrivedRows {
  static constexpr int kLanes = 32;
  const DispatchGemmState* s;
  int32_t coord[Cfg::kTileM / 32];  // whole: coord[0] is the tile's first row
  uint32_t from_x;                  // bit j: row j from x; bit 31: the whole tile in one box

  template <class P>
  __device__ __forceinline__ ArrivedRows(const P& p, const GroupTile& t) : s(&p.hooks), from_x(0) {
    // At world 1 the scheduler has no own-rows split (Groups::local is null), yet every row is own.
    const int32_t own_end = p.hooks.dispatch.peer.world == 1 ? t.row_end : t.local_end;
    const bool whole = !p.hooks.pull || t.m0 >= own_end;
    const int lane = int(threadIdx.x % 32);
#pragma unroll
    for (int j = 0; j < Cfg::kTileM / 32; ++j) {
      const int32_t r = t.m0 + lane + 32 * j;
      coord[j] = whole && j == 0 ? t.m0 : r;
      if (!whole && r < own_end) {
        // Written in this launch by this rank's own CTAs and released with the block's arrival,
        // which lane 0 acquired (before_tile_loads) before the warp's __syncwarp.
        const int32_t token = mem_cg::load(reinterpret_cast<const int32_t*>(p.hooks.row_source + r) + 1);
        coord[j] = min(max(token, 0), p.hooks.last_token);
        from_x |= 1u << j;
      }
    }
    if (whole) from_x = 1u << 31;
    // Every lane issues TMA reads of rows that other agents wrote with st.global (lane 0's fence in
    // before_tile_loads covers lane 0's own loads only).
    else cta::fence_proxy_async_global();
  }

  template <class P>
  static __device__ __forceinline__ uint32_t stage_bytes(const P&) {
    return uint32_t(Cfg::kABytes);
  }

  __device__ __forceinline__ void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t, int lane) const {
    if (from_x >> 31) {
      if (lane == 0) cta::load_2d(dst, &s->recv_tile, full, k0, coord[0]);
      return;
    }
#pragma unroll
    for (int j = 0; j < Cfg::kTileM / 32; ++j)
      cta::load_2d(dst + (lane + 32 * j) * 128, (from_x >> j) & 1u ? &s->x_rows : &s->recv_rows, full, k0, coord[j]);
  }
};

template <bool Swiglu>
struct DispatchGemmHooks : GroupHooks<DispatchGemmState, Swiglu, BoundedEpilogue> {
  struct ProducerState {
    uint64_t epoch = 0;
  };
  template <class Cfg>
  using ASource = ArrivedRows<Cfg>;

  // The tile's block has all 128 of this launch's rows (real rows landed or announced, padding
  // credited): bounded, abortable (the plan's abort word and the host's, peer.cuh); then the
  // async-proxy fence before TMA reads what st.global wrote. A wait that gave up reports here (the
  // engine's on_wait_failed that follows finds the reason taken: the first one wins).
  static __device__ bool before_tile_loads(const DispatchGemmState& s, ProducerState& ps, const GroupTile& t) {
    if (ps.epoch == 0) ps.epoch = mem_cg::load(s.groups.status) >> 8;
    const Waited w = wait_at_least(s.arrivals + t.m0 / kBlockRows, ps.epoch * kBlockRows, s.abort_word, ps.epoch,
                                   s.dispatch.peer);
    if (w != Waited::kOk) {
      const bool timeout = w == Waited::kTimeout;
      const WaitFailure why = failure_of(w, 0xffff, s.dispatch.peer.host_abort);
      cta::fail(s.completion, why.code, reason_bits(why, WEFT_MOE_STAGE_ARRIVALS));
      if (timeout) {
        const PeerArgs& peer = s.dispatch.peer;
        for (int q = 0; q < peer.world; ++q)
          atomicMax_system(reinterpret_cast<unsigned long long*>(peer.peers[q] + peer.ws_offset + s.dispatch.layout.abort),
                           static_cast<unsigned long long>(ps.epoch));
      }
      return false;
    }
    cta::fence_proxy_async_global();
    return true;
  }
};

// Thread 0: waits until CTA 0 has published this launch's layout; true when it is valid. A wait that
// was aborted (a peer gave up, or the host declared a rank failed) is recorded in `fail`; one that
// ran out is not: CTA 0, which never published, reports why.
__device__ inline bool layout_published(const DispatchArgs& a, const char* me, uint64_t epoch, Failures* fail) {
  const uint64_t* status = reinterpret_cast<const uint64_t*>(me + a.layout.status);
  const uint64_t* abort_word = reinterpret_cast<const uint64_t*>(me + a.layout.abort);
  const Waited w = wait_at_least(status, epoch << 8, abort_word, epoch, a.peer);
  if (w == Waited::kAborted || w == Waited::kDeclared) wait_failed(fail, w, WEFT_MOE_STAGE_LAYOUT, 0xffff, a.peer);
  if (w != Waited::kOk) return false;
  return sys::signal_load(status) == epoch << 8;
}

template <class Cfg, class Hooks>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    dispatch_gemm_kernel(const __grid_constant__ gemm::KernelParams<DispatchGemmState> p) {
  grid::wait_previous();
  extern __shared__ __align__(16) unsigned char smem[];
  const DispatchArgs& a = p.hooks.dispatch;
  const steps::Shared s = steps::carve(smem, a.experts, a.peer.world);
  const bool pushed = steps::run_steps(a, s);
  if (threadIdx.x == 0) {
    const bool published = pushed && layout_published(a, s.peers[a.peer.rank], *s.epoch, s.fail);
    report(a.peer, *s.fail);  // the dispatch's failure first (record keeps the first), then the wait's
    // scalars[3] is free in the dispatch's shared memory, which the engine reuses only after the
    // __syncthreads below and its own barrier set-up.
    s.scalars[3] = published;
  }
  __syncthreads();
  if (!s.scalars[3]) {
    grid::allow_next();
    cta::finish(p.completion);
    return;
  }
  gemm::engine_cta<Cfg, Hooks>(p);
}

template <class Cfg, bool Swiglu>
cudaError_t launch_config(const DispatchGemmLaunch& l) {
  using Hooks = DispatchGemmHooks<Swiglu>;
  gemm::KernelParams<DispatchGemmState> p = grouped_params<DispatchGemmState>(
      l.recv_tile, l.b, l.c, gemm::Problem{l.rows, l.n, l.k, 1, 0}, gemm::OutputTail{l.c_ptr, l.ldc, l.n}, l.completion, l.groups);
  DispatchGemmState& h = p.hooks;
  h.b_up = l.b_up;
  h.recv_tile = l.recv_tile;
  h.recv_rows = l.recv_rows;
  h.x_rows = l.x_rows;
  h.dispatch = l.dispatch;
  h.dispatch.peer.completion = l.completion;
  const char* me = reinterpret_cast<const char*>(l.ws);
  h.row_source = reinterpret_cast<const int4*>(me + l.dispatch.layout.row_source);
  h.arrivals = reinterpret_cast<const uint64_t*>(me + l.dispatch.layout.arrivals);
  h.abort_word = reinterpret_cast<const uint64_t*>(me + l.dispatch.layout.abort);
  h.pull = l.dispatch.pull_local;
  h.last_token = int32_t(l.dispatch.tokens > 0 ? l.dispatch.tokens - 1 : 0);
  return fused::launch_persistent<Cfg, dispatch_gemm_kernel<Cfg, Hooks>>(p, l.ctas, l.stream);
}

}  // namespace

cudaError_t launch_dispatch_gemm(const DispatchGemmLaunch& l) {
  // The dispatch's shared memory is the engine's, before the engine uses it.
  if (dispatch_smem_bytes(l.dispatch.experts, l.dispatch.peer.world) > size_t(gemm::Config<128, 1, 1, false, false>::kSmemBytes))
    return cudaErrorInvalidConfiguration;
  const auto launch = [&](auto swiglu) {
    return with_grouped_config(l, [&]<class Cfg>(std::type_identity<Cfg>) { return launch_config<Cfg, swiglu.value>(l); });
  };
  return l.swiglu ? launch(std::true_type{}) : launch(std::false_type{});
}

}  // namespace weft::moe
