// dispatch_gemm.cu — MoE dispatch + up-projection as one persistent kernel per rank and launch: every
// CTA runs the dispatch's steps (dispatch.cuh: routing, counts, their exchange, the layout, the
// pushes of the rows this rank sends), then the GEMM engine over this rank's receive layout
// (grouped.cuh: a group per local expert), each tile's loads waiting for its 128-row block's arrival
// counter. The CTAs are one per SM and all resident (the grid barriers of the dispatch need it), so
// with peers a CTA that has pushed its rows computes tiles while other CTAs and other ranks are still
// pushing (at world 1 the CTAs first meet at a second grid barrier: see the kernel).
//
// Tile order (GroupScheduler): with peers (world > 1), first every expert's blocks whose rows are
// all this rank's own (they land first: this rank's own CTAs store them, or nobody does when they
// are pulled), then every expert's other blocks in expert order, which the sources fill in the
// order o - 1, o - 2, ... (moe.h). At world 1 every row is own: one pass, expert by expert, so an
// expert's tiles run together and its weights are read from HBM about once.
//
// Movers (DispatchArgs::pull_local; one kernel per mover):
//   PUSH  every row, own ones included, is copied into the receive buffer by its sender's CTAs; a
//         tile loads its 128 rows as one TMA box (the engine's TmaA over the receive buffer).
//   PULL  the owner's own rows are not copied: the whole producer warpgroup gathers every tile's rows
//         by row index with cp.async (gathered_rows.cuh), own rows from x and the other sources'
//         rows from the receive buffer. At world 1 no row is copied at all.
//   The copy engine (a third mover for large contiguous runs) is measured in
//   bench/ladder/01-moe-movers.cu; it is not built here.
//
// Epochs and ordering: the dispatch's (moe.h). The GEMM's CTAs start once CTA 0 has published this
// launch's layout (its status word, released after the layout: every CTA waits for it, bounded);
// a tile's producer acquires arrivals[block] >= 128 x epoch, then fences the async proxy before TMA
// reads rows that st.global wrote (PUSH; PULL's cp.async reads need only the acquire). SwiGLU: paired gate | up tiles (grouped.cuh), out = silu(gate) x
// up in fp32, rounded once.
#include "fused/launch.cuh"
#include "moe/dispatch.cuh"
#include "moe/gathered_rows.cuh"
#include "moe/grouped.cuh"
#include "moe/moe.h"

namespace weft::moe {

namespace {

struct DispatchGemmState : GroupedBase {
  DispatchArgs dispatch;
  RowGather gather;       // PULL's rows (KernelParams::a is PUSH's: recv [capacity, H], box {64, 128})
  const uint64_t* arrivals;
  const uint64_t* abort_word;
};

template <bool Swiglu, bool Pull>
struct DispatchGemmHooks : GroupHooks<DispatchGemmState, Swiglu, BoundedEpilogue> {
  struct ProducerState {
    uint64_t epoch = 0;
  };
  template <class Cfg>
  using ASource = std::conditional_t<Pull, GatheredRows<Cfg>, gemm::TmaA<Cfg>>;

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
  bool pushed = steps::run_steps(a, s);
  // World 1: a grid barrier after the pushes, before any CTA starts its GEMM. The pushes there are
  // only row_source and positions words and arrival counts (PULL copies no row), yet a CTA that
  // pushed while the others already streamed w1 from HBM saw them land 50-100 us late, and the
  // tiles that waited for its blocks with it: decode's dispatch + up ran 0.99-1.89x the grouped
  // GEMM alone by placement, 1.04-1.08x with this barrier (~1.5 us; bench/DECISIONS.md, "World 1
  // finishes the pushes before the GEMM"). With peers a rank's first tiles wait on other GPUs' rows.
  if (a.peer.world == 1) {
    steps::cta_grid_barrier(a, s, a.layout.pushed, *s.epoch);
    pushed = pushed && s.fail->code == 0;
  }
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

template <class Cfg, bool Swiglu, bool Pull>
cudaError_t launch_config(const DispatchGemmLaunch& l) {
  using Hooks = DispatchGemmHooks<Swiglu, Pull>;
  gemm::KernelParams<DispatchGemmState> p = grouped_params<DispatchGemmState>(
      l.recv_tile, l.b, l.c, gemm::Problem{l.rows, l.n, l.k, 1, 0}, gemm::OutputTail{l.c_ptr, l.ldc, l.n}, l.completion, l.groups);
  DispatchGemmState& h = p.hooks;
  h.b_up = l.b_up;
  h.dispatch = l.dispatch;
  h.dispatch.peer.completion = l.completion;
  const char* me = reinterpret_cast<const char*>(l.ws);
  h.gather.x = l.dispatch.x;
  h.gather.recv = reinterpret_cast<const uint16_t*>(me + l.dispatch.layout.recv);
  h.gather.row_source = reinterpret_cast<const int4*>(me + l.dispatch.layout.row_source);
  h.gather.hidden = l.dispatch.hidden;
  h.gather.last_token = int32_t(l.dispatch.tokens > 0 ? l.dispatch.tokens - 1 : 0);
  h.gather.all_own = l.dispatch.peer.world == 1;
  h.arrivals = reinterpret_cast<const uint64_t*>(me + l.dispatch.layout.arrivals);
  h.abort_word = reinterpret_cast<const uint64_t*>(me + l.dispatch.layout.abort);
  return fused::launch_persistent<Cfg, dispatch_gemm_kernel<Cfg, Hooks>>(p, l.ctas, l.stream);
}

}  // namespace

cudaError_t preload_dispatch_gemm() {
  return for_each_grouped_config([]<class Cfg>(std::type_identity<Cfg>) {
    cudaError_t e = opt_in_shared_memory<dispatch_gemm_kernel<Cfg, DispatchGemmHooks<false, false>>>(Cfg::kSmemBytes);
    if (e == cudaSuccess) e = opt_in_shared_memory<dispatch_gemm_kernel<Cfg, DispatchGemmHooks<false, true>>>(Cfg::kSmemBytes);
    if (e == cudaSuccess) e = opt_in_shared_memory<dispatch_gemm_kernel<Cfg, DispatchGemmHooks<true, false>>>(Cfg::kSmemBytes);
    if (e == cudaSuccess) e = opt_in_shared_memory<dispatch_gemm_kernel<Cfg, DispatchGemmHooks<true, true>>>(Cfg::kSmemBytes);
    return e;
  });
}

cudaError_t launch_dispatch_gemm(const DispatchGemmLaunch& l) {
  // The dispatch's shared memory is the engine's, before the engine uses it.
  if (dispatch_smem_bytes(l.dispatch.experts, l.dispatch.peer.world) > size_t(gemm::Config<128, 1, 1, false, false>::kSmemBytes))
    return cudaErrorInvalidConfiguration;
  const auto launch = [&](auto swiglu, auto pull) {
    return with_grouped_config(
        l, [&]<class Cfg>(std::type_identity<Cfg>) { return launch_config<Cfg, swiglu.value, pull.value>(l); });
  };
  const auto by_mover = [&](auto swiglu) {
    return l.dispatch.pull_local ? launch(swiglu, std::true_type{}) : launch(swiglu, std::false_type{});
  };
  return l.swiglu ? by_mover(std::true_type{}) : by_mover(std::false_type{});
}

}  // namespace weft::moe
