// epilogue.cuh — accumulators -> shared memory -> TMA store (or add) into C, per consumer warpgroup.
//
// Each consumer owns 64 rows x TileN columns. It converts them box by box (64 rows x 128 bytes: 64
// bf16 or 32 fp32 columns) into a 128-byte-swizzled staging buffer, then one thread issues the TMA
// store of that box. Two buffers alternate, so filling one overlaps the store of the other; a buffer
// is refilled only after bulk_wait_read<1> says the store issued two boxes ago has read it. Boxes
// that lie entirely outside C are skipped; partial ones are clipped by TMA. TMA writes whole 16-byte
// chunks, so the last partial chunk of each row (n not a multiple of 8 bf16 / 4 fp32) is written
// from registers with plain stores instead (OutputTail).
//
// Fragment -> staging address: thread (warp w, lane l) holds rows r = 16w + l/4 (+8) and column
// pairs 8*n8 + 2*(l%4). In a 128-byte-swizzled box the 16-byte chunk c of row r sits at chunk
// c ^ (r % 8), which also spreads a warp's eight rows over all 32 banks.
#pragma once

#include <cuda_bf16.h>

#include "../primitives/tma.cuh"
#include "../primitives/warpgroup.cuh"
#include "config.cuh"
#include "hooks.cuh"
#include "params.cuh"

namespace weft::gemm {

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <class Cfg>
__device__ __forceinline__ void stage_box(const float (&acc)[Cfg::kTileN / 2], uint8_t* buf, int box) {
  const int t = wg::thread();
  const int r = (t / 32) * 16 + (t % 32) / 4;  // and r + 8
  const int pair = t % 4;                       // column pair within an 8-column group
  const int swz = r % 8;                        // (r + 8) % 8 is the same
  if constexpr (!Cfg::kOutF32) {
    // 64 bf16 columns = 8 groups of 8 = 8 chunks of 16 bytes.
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int n8 = box * 8 + j;
      const int offset = ((j ^ swz) * 16) + pair * 4;
      *reinterpret_cast<uint32_t*>(buf + r * 128 + offset) = pack_bf16x2(acc[4 * n8 + 0], acc[4 * n8 + 1]);
      *reinterpret_cast<uint32_t*>(buf + (r + 8) * 128 + offset) = pack_bf16x2(acc[4 * n8 + 2], acc[4 * n8 + 3]);
    }
  } else {
    // 32 fp32 columns = 4 groups of 8 = 8 chunks of 4 floats; a column pair is half a chunk.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n8 = box * 4 + j;
      const int chunk = 2 * j + pair / 2;
      const int offset = ((chunk ^ swz) * 16) + (pair % 2) * 8;
      *reinterpret_cast<float2*>(buf + r * 128 + offset) = make_float2(acc[4 * n8 + 0], acc[4 * n8 + 1]);
      *reinterpret_cast<float2*>(buf + (r + 8) * 128 + offset) = make_float2(acc[4 * n8 + 2], acc[4 * n8 + 3]);
    }
  }
}

// Adds a staged bf16 box (stage_box's layout: the TMA load of a 128-byte-swizzled 64 x 64 box) to
// the accumulators of its columns. Each thread reads exactly the words it later overwrites in
// stage_box, so no barrier is needed between the two.
template <class Cfg>
__device__ __forceinline__ void add_box(float (&acc)[Cfg::kTileN / 2], const uint8_t* buf, int box) {
  static_assert(!Cfg::kOutF32, "received partials are bf16 boxes of the bf16 output's shape");
  const int t = wg::thread();
  const int r = (t / 32) * 16 + (t % 32) / 4;
  const int pair = t % 4;
  const int swz = r % 8;
  uint32_t v[16];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int offset = ((j ^ swz) * 16) + pair * 4;
    v[2 * j] = *reinterpret_cast<const uint32_t*>(buf + r * 128 + offset);
    v[2 * j + 1] = *reinterpret_cast<const uint32_t*>(buf + (r + 8) * 128 + offset);
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int n8 = box * 8 + j;
    acc[4 * n8 + 0] += __uint_as_float(v[2 * j] << 16);
    acc[4 * n8 + 1] += __uint_as_float(v[2 * j] & 0xffff0000u);
    acc[4 * n8 + 2] += __uint_as_float(v[2 * j + 1] << 16);
    acc[4 * n8 + 3] += __uint_as_float(v[2 * j + 1] & 0xffff0000u);
  }
}

// Received boxes (Hooks::received_sources > 0): each consumer's two staging buffers double as the
// landing place of the partials other ranks contributed. Box b of a tile lands in the buffer b is
// staged in: boxes 0 and 1 while the tile's first k-block computes (prefetch_received), box b + 1
// (b >= 1) as soon as the store of box b - 1 has read the other buffer, so each load overlaps one
// box's add and staging. A further source of the same box reloads the buffer after the add. One
// mbarrier per buffer; every thread of the warpgroup tracks their phases identically.
struct ReceivedPhases {
  uint32_t bits = 0;  // bit u: the parity the next wait on buffer u's barrier expects
};

// The leader issues box `box`, source `source`, of tile t into staging buffer `buffer`.
template <class Cfg, class Hooks>
__device__ __forceinline__ void load_received(const KernelParams<typename Hooks::State>& p, const SharedStorage<Cfg>& s,
                                              const TileCoord& t, int consumer, int box, uint32_t buffer, int source) {
  int32_t row = 0;
  const CUtensorMap* map = Hooks::received_box(p.hooks, t, consumer, source, row);
  uint64_t* bar = s.received(consumer, buffer);
  cta::mbarrier_arrive_expect_tx(bar, uint32_t(Hooks::received_box_rows(p.hooks)) * 128u);
  cta::load_2d(s.out_box(consumer, buffer), map, bar, t.n0 + box * Cfg::kOutBoxCols, row);
}

// Called by the leader while the tile's first k-block computes (the data is acquired: see
// accumulate_tile): boxes 0 and 1, source 0, into the buffers they will be staged in.
template <class Cfg, class Hooks>
__device__ __forceinline__ void prefetch_received(const KernelParams<typename Hooks::State>& p,
                                                  const SharedStorage<Cfg>& s, const TileCoord& t, int consumer,
                                                  uint32_t staged) {
  if (t.m0 + consumer * Cfg::kConsumerRows >= p.problem.m) return;  // store_tile skips this half too
  cta::bulk_wait_read<0>();  // the previous tile's stores have read both buffers
  cta::fence_proxy_async_global();  // other agents' writes, acquired through the ring, before TMA reads them
#pragma unroll
  for (int box = 0; box < 2 && box < Cfg::kOutBoxes; ++box) {
    if (t.n0 + box * Cfg::kOutBoxCols >= p.tail.tma_cols) break;
    load_received<Cfg, Hooks>(p, s, t, consumer, box, (staged + box) & 1u, 0);
  }
}

// Stages box `box` of the accumulators into `buf` for the leader's TMA store: first waits, unless
// the caller knows the buffer is free, until the store issued two boxes ago has read it.
template <class Cfg>
__device__ __forceinline__ void stage_for_store(const float (&acc)[Cfg::kTileN / 2], uint8_t* buf, int box,
                                                uint32_t barrier_id, bool buffer_free) {
  if (!buffer_free) {
    if (wg::thread() == 0) cta::bulk_wait_read<1>();
    wg::sync(barrier_id);
  }
  stage_box<Cfg>(acc, buf, box);
  cta::fence_proxy_async_shared();
  wg::sync(barrier_id);
}

// Hooks::kExchanges. A CTA's half-tiles go out in one of two steps (ExchangeStep), each published as
// a pending signal (settle_pending: complete, fenced, then after_tile_stored), so the stores drain
// behind whatever the consumer does next:
//   kDefer    every tile but the CTA's last: sent with the own partial kept in this rank's own slot;
//             after the last tile's sends it is finished from the slots alone (Hooks::finish_deferred).
//   kSend     the CTA's last tile: sent to the peers only, the own partial staying in the accumulators,
//             then, after the deferred tiles, kReceive: its signal settled, the peers' partials
//             waited for, loaded and added (receive_tile), the sum stored.
// So one wave's exchange overlaps the next wave's math, and the deferred tiles' finishing overlaps
// the last wave's traffic; only that traffic, a flag and one local load follow.
enum class ExchangeStep { kStore, kDefer, kSend, kReceive };

// One staged box of a half-tile to every rank in `dests` (Hooks::send_map: the peers' receive slots,
// and the own slot for a deferred tile). The leader only; the caller commits the bulk group.
template <class Hooks>
__device__ __forceinline__ void send_box(const typename Hooks::State& state, uint32_t dests, const TileCoord& t,
                                         int consumer, const uint8_t* buf, int32_t col0) {
  for (uint32_t d = dests; d != 0; d &= d - 1) {
    int32_t row = 0;
    const CUtensorMap* map = Hooks::send_map(state, __ffs(d) - 1, t, consumer, row);
    cta::store_2d(map, buf, col0, row);
  }
}

// One staged box to every destination of a run-time route (Hooks::kRouted), stored or added: one
// bulk group covers them all, so one wait_read frees the box. The leader only; the caller commits.
template <class Hooks>
__device__ __forceinline__ void store_routed_box(const typename Hooks::State& state, const Route& route,
                                                 const uint8_t* buf, int32_t col0, int32_t row) {
  for (uint32_t d = route.dests; d != 0; d &= d - 1) {
    const CUtensorMap* map = Hooks::out_map(state, __ffs(d) - 1);
    if (route.reduce) cta::reduce_add_2d(map, buf, col0, row);
    else cta::store_2d(map, buf, col0, row);
  }
}

// This consumer's half-tile, rounded, goes to every send destination box by box (the two staging
// buffers alternating as in store_tile); kDefer adds the own slot as a destination. The caller
// records the pending signal.
template <class Cfg, class Hooks>
__device__ __forceinline__ void send_tile(const float (&acc)[Cfg::kTileN / 2], const KernelParams<typename Hooks::State>& p,
                                          const SharedStorage<Cfg>& s, const TileCoord& t, int consumer, uint32_t& staged,
                                          uint32_t barrier_id, ExchangeStep step) {
  const uint32_t dests = Hooks::send_dests(p.hooks, t, step == ExchangeStep::kDefer);
#pragma unroll
  for (int box = 0; box < Cfg::kOutBoxes; ++box) {
    const int32_t col0 = t.n0 + box * Cfg::kOutBoxCols;
    if (col0 >= p.tail.tma_cols) break;
    uint8_t* buf = s.out_box(consumer, staged & 1u);
    stage_for_store<Cfg>(acc, buf, box, barrier_id, false);
    if (wg::thread() == 0) {
      send_box<Hooks>(p.hooks, dests, t, consumer, buf, col0);
      cta::bulk_commit();
    }
    ++staged;
  }
}

// The leader waits (bounded) until every other rank's partial of the half-tile has landed here
// (wait_exchanged), then loads boxes 0 and 1 of source 0 exactly as prefetch_received does for a
// tile whose partials came earlier. `staged` is where the tile's first box will be staged.
template <class Cfg, class Hooks>
__device__ __forceinline__ bool receive_tile(const KernelParams<typename Hooks::State>& p, const SharedStorage<Cfg>& s,
                                             const TileCoord& t, int consumer, uint32_t staged) {
  const bool ok = Hooks::wait_exchanged(p.hooks, t, consumer);
  prefetch_received<Cfg, Hooks>(p, s, t, consumer, staged);
  return ok;
}

// Columns [tail.tma_cols, n) of this consumer's 64 rows, straight from registers (only the last
// tile column of C has any).
template <class Cfg, class Hooks>
__device__ __forceinline__ void store_tail_columns(const float (&acc)[Cfg::kTileN / 2],
                                                   const KernelParams<typename Hooks::State>& p, const TileCoord& t,
                                                   int consumer) {
  const int th = wg::thread();
  const int32_t row_lo = t.m0 + consumer * Cfg::kConsumerRows + (th / 32) * 16 + (th % 32) / 4;
  const int32_t col_base = t.n0 + 2 * (th % 4);
  const int64_t ldc = p.tail.ldc;
#pragma unroll
  for (int n8 = 0; n8 < Cfg::kTileN / 8; ++n8) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int32_t col = col_base + 8 * n8 + j;
      if (col < p.tail.tma_cols || col >= p.problem.n) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int32_t row = row_lo + 8 * h;
        if (row >= p.problem.m) continue;
        const float v = acc[4 * n8 + 2 * h + j];
        const int64_t at = int64_t(row) * ldc + col;
        if constexpr (Cfg::kOutF32) {
          float* c = static_cast<float*>(p.tail.c) + at;
          if constexpr (Hooks::kEpilogue == EpilogueOp::kReduceAdd) atomicAdd(c, v); else *c = v;
        } else {
          __nv_bfloat16* c = static_cast<__nv_bfloat16*>(p.tail.c) + at;
          if constexpr (Hooks::kEpilogue == EpilogueOp::kReduceAdd) atomicAdd(c, __float2bfloat16_rn(v));
          else *c = __float2bfloat16_rn(v);
        }
      }
    }
  }
}

// A signal owed for the last half-tile this consumer stored: its stores were issued but may still
// be in flight. Every thread of the warpgroup tracks it identically; the leader publishes it.
struct PendingSignal {
  TileCoord tile;
  bool valid = false;
};

// Publishes a pending signal: waits until the leader's earlier stores are complete, fences them for
// system scope, or device scope with Hooks::kDeviceScopeSignals (the named barrier orders the other
// threads' plain tail stores, which they fenced themselves), then calls after_tile_stored. Called
// by the whole consumer warpgroup.
template <class Hooks>
__device__ __forceinline__ void settle_pending(const typename Hooks::State& state, PendingSignal& pending,
                                               int consumer, uint32_t barrier_id) {
  if constexpr (Hooks::kSignalsAfterStore) {
    if (!pending.valid) return;
    wg::sync(barrier_id);
    if (wg::thread() == 0) {
      cta::bulk_wait<0>();
      cta::fence_proxy_async_global();
      if constexpr (Hooks::kDeviceScopeSignals) __threadfence();
      else __threadfence_system();
      Hooks::after_tile_stored(state, pending.tile, consumer);
    }
    pending.valid = false;
  }
}

// `staged` counts boxes this consumer has staged so far (it picks the buffer), across tiles. `hook_ok`
// turns false when before_tile_stores reports a wait that ran out.
// `sources` is Hooks::received_sources for t (0 without kAddsReceived); prefetch_received has run
// for the tile when it is > 0.
// `step` matters with Hooks::kExchanges only (kStore otherwise).
// `Phase`: with Hooks::kPhases > 1, the phase t is in (its route and map are compile-time, but in a
// phase with Hooks::kPhaseRouted).
template <class Cfg, class Hooks, int Phase = 0>
__device__ __forceinline__ void store_tile(float (&acc)[Cfg::kTileN / 2], const KernelParams<typename Hooks::State>& p,
                                           const SharedStorage<Cfg>& s, const TileCoord& t, int consumer, uint32_t& staged,
                                           typename Hooks::ConsumerState& hook_state, PendingSignal& pending,
                                           bool& hook_ok, int sources, ReceivedPhases& phases,
                                           ExchangeStep step = ExchangeStep::kStore) {
  const int32_t row0 = t.m0 + consumer * Cfg::kConsumerRows;
  if (row0 >= p.problem.m) return;  // uniform over the warpgroup
  const uint32_t barrier_id = 1 + consumer;
  const bool leader = wg::thread() == 0;
  settle_pending<Hooks>(p.hooks, pending, consumer, barrier_id);
  if constexpr (Hooks::kExchanges) {
    static_assert(Hooks::kSignalsAfterStore, "every exchanged tile is published as a pending signal");
    if (step != ExchangeStep::kReceive) {
      send_tile<Cfg, Hooks>(acc, p, s, t, consumer, staged, barrier_id, step);
      pending.tile = t;  // published by settle_pending (after_tile_stored): Hooks::settle_block, or later
      pending.valid = true;
      return;
    } else {
      // settle_pending above has published this tile's own sends.
      if (leader) hook_ok = receive_tile<Cfg, Hooks>(p, s, t, consumer, staged) && hook_ok;
    }
  }
  const Route route = [&] {
    if constexpr (Hooks::kPhases > 1 && !Hooks::template kPhaseRouted<Phase>) return Hooks::template phase_route<Phase>(p.hooks, t);
    else return Hooks::route(p.hooks, t);
  }();
  // Only the leader issues stores, so only it needs to have waited; the others stage the first box
  // meanwhile and meet it at the first named barrier.
  if (leader) hook_ok = hook_ok && Hooks::before_tile_stores(p.hooks, hook_state, t, route, consumer);
  if constexpr (Hooks::kAddsReceived) {
    wg::sync(barrier_id);  // after the leader's wait
    if (sources == 0) hook_ok = Hooks::template add_received<Cfg>(p.hooks, t, consumer, acc) && hook_ok;
  }
#pragma unroll
  for (int box = 0; box < Cfg::kOutBoxes; ++box) {
    const int32_t col0 = t.n0 + box * Cfg::kOutBoxCols;
    if (col0 >= p.tail.tma_cols) break;
    const uint32_t buffer = staged & 1u;
    uint8_t* buf = s.out_box(consumer, buffer);
    bool received = false;
    if constexpr (Hooks::kAddsReceived) {
      if (sources > 0) {
        received = true;
        if (leader && box >= 1 && box + 1 < Cfg::kOutBoxes && col0 + Cfg::kOutBoxCols < p.tail.tma_cols) {
          cta::bulk_wait_read<0>();  // box - 1's store has read the other buffer
          load_received<Cfg, Hooks>(p, s, t, consumer, box + 1, buffer ^ 1u, 0);
        }
        for (int source = 0; source < sources; ++source) {
          if (source > 0) {
            // Every thread's reads of the previous source are done before TMA overwrites the buffer.
            cta::fence_proxy_async_shared();
            wg::sync(barrier_id);
            if (leader) load_received<Cfg, Hooks>(p, s, t, consumer, box, buffer, source);
          }
          hook_ok = cta::mbarrier_wait(s.received(consumer, buffer), (phases.bits >> buffer) & 1u) && hook_ok;
          phases.bits ^= 1u << buffer;
          add_box<Cfg>(acc, buf, box);
        }
        // The buffer was loaded only after the store that last used it had read it (above, or
        // prefetch_received), so staging may overwrite it at once.
      }
    }
    stage_for_store<Cfg>(acc, buf, box, barrier_id, received);
    if (leader) {
      if constexpr (Hooks::kRouted && Hooks::kPhases > 1 && !Hooks::template kPhaseRouted<Phase>) {
        const CUtensorMap* map = Hooks::template phase_map<Phase>(p.hooks);
        if constexpr (Hooks::template kPhaseAdds<Phase>) cta::reduce_add_2d(map, buf, col0, row0 - route.row_offset);
        else cta::store_2d(map, buf, col0, row0 - route.row_offset);
      } else if constexpr (Hooks::kRouted) {
        store_routed_box<Hooks>(p.hooks, route, buf, col0, row0 - route.row_offset);
      } else if constexpr (Hooks::kEpilogue == EpilogueOp::kReduceAdd) {
        cta::reduce_add_2d(&p.c, buf, col0, row0);
      } else {
        cta::store_2d(&p.c, buf, col0, row0);
      }
      cta::bulk_commit();
    }
    ++staged;
  }
  if constexpr (!Hooks::kRouted) {
    if (t.n0 + Cfg::kTileN > p.tail.tma_cols && t.n0 < p.problem.n) {
      store_tail_columns<Cfg, Hooks>(acc, p, t, consumer);
      if constexpr (Hooks::kSignalsAfterStore) __threadfence_system();  // before settle_pending's barrier
    }
  }
  if constexpr (Hooks::kSignalsAfterStore) {
    if (!Hooks::kRouted || route.signal) {
      pending.tile = t;
      pending.valid = true;
    }
  }
}

// Hooks::kExchanges with every tile at once (Hooks::kAtOnce: 256-wide tiles, one wave), for the CTA's
// last tile, called by each consumer after both have finished its math (the caller's barrier): the
// producer has nothing left to load, so the ring is free, and each consumer stages its whole
// half-tile for the peers at once (ring boxes 0 .. kOutBoxes - 1 of its share) and lands every box of
// a peer's partial at once (the next kOutBoxes). Through the two staging buffers, box b + 2 of the
// receive waited for box b's store to read its buffer and then for its own load: two more TMA load
// latencies in the tail (decode M = 512: 5.9 us of structure at two ranks; NOTES-tp, session 14).
// Otherwise the steps of send_tile, settle_pending and the kReceive store_tile, in that order.
template <class Cfg, class Hooks>
__device__ __forceinline__ void exchange_at_once(float (&acc)[Cfg::kTileN / 2], const KernelParams<typename Hooks::State>& p,
                                                 const SharedStorage<Cfg>& s, const TileCoord& t, int consumer,
                                                 typename Hooks::ConsumerState& hook_state, PendingSignal& pending,
                                                 bool& hook_ok, ReceivedPhases& phases) {
  static_assert(Hooks::kExchanges && Hooks::kSignalsAfterStore && Hooks::kAddsReceived, "the exchange's steps");
  const int32_t row0 = t.m0 + consumer * Cfg::kConsumerRows;
  if (row0 >= p.problem.m) return;  // uniform over the warpgroup
  const uint32_t barrier_id = 1 + consumer;
  const bool leader = wg::thread() == 0;
  const auto in_c = [&](int box) { return t.n0 + box * Cfg::kOutBoxCols < p.tail.tma_cols; };
  settle_pending<Hooks>(p.hooks, pending, consumer, barrier_id);  // (nothing pending: one tile per CTA)

  // Send: every box staged, then stored to every destination; published by settle_pending.
#pragma unroll
  for (int box = 0; box < Cfg::kOutBoxes; ++box)
    if (in_c(box)) stage_box<Cfg>(acc, s.ring_box(consumer, box), box);
  cta::fence_proxy_async_shared();
  wg::sync(barrier_id);
  if (leader) {
    const uint32_t dests = Hooks::send_dests(p.hooks, t, false);
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box)
      if (in_c(box)) send_box<Hooks>(p.hooks, dests, t, consumer, s.ring_box(consumer, box), t.n0 + box * Cfg::kOutBoxCols);
    cta::bulk_commit();
  }
  pending.tile = t;
  pending.valid = true;
  settle_pending<Hooks>(p.hooks, pending, consumer, barrier_id);

  // Receive: each source's boxes land together in the second half of the share, then are added.
  bool ok = !leader || Hooks::wait_exchanged(p.hooks, t, consumer);
  if (leader) cta::fence_proxy_async_global();  // other agents' writes, acquired, before TMA reads them
  uint64_t* bar = s.received(consumer, 0);
  const int sources = Hooks::received_sources(p.hooks, t);
  int boxes = 0;
#pragma unroll
  for (int box = 0; box < Cfg::kOutBoxes; ++box) boxes += in_c(box) ? 1 : 0;
  for (int source = 0; source < sources; ++source) {
    if (source > 0) {
      // Every thread's reads of the previous source are done before TMA overwrites the boxes.
      cta::fence_proxy_async_shared();
      wg::sync(barrier_id);
    }
    if (leader) {
      cta::mbarrier_arrive_expect_tx(bar, uint32_t(boxes * Hooks::received_box_rows(p.hooks)) * 128u);
#pragma unroll
      for (int box = 0; box < Cfg::kOutBoxes; ++box) {
        if (!in_c(box)) break;
        int32_t row = 0;
        const CUtensorMap* map = Hooks::received_box(p.hooks, t, consumer, source, row);
        cta::load_2d(s.ring_box(consumer, Cfg::kOutBoxes + box), map, bar, t.n0 + box * Cfg::kOutBoxCols, row);
      }
    }
    ok = cta::mbarrier_wait(bar, phases.bits & 1u) && ok;
    phases.bits ^= 1u;
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box)
      if (in_c(box)) add_box<Cfg>(acc, s.ring_box(consumer, Cfg::kOutBoxes + box), box);
  }

  // The sum, staged in place (each thread overwrites exactly the words it read), into this rank's out.
  const Route route = Hooks::route(p.hooks, t);
  if (leader) ok = Hooks::before_tile_stores(p.hooks, hook_state, t, route, consumer) && ok;
#pragma unroll
  for (int box = 0; box < Cfg::kOutBoxes; ++box)
    if (in_c(box)) stage_box<Cfg>(acc, s.ring_box(consumer, Cfg::kOutBoxes + box), box);
  cta::fence_proxy_async_shared();
  wg::sync(barrier_id);
  if (leader) {
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box)
      if (in_c(box))
        store_routed_box<Hooks>(p.hooks, route, s.ring_box(consumer, Cfg::kOutBoxes + box), t.n0 + box * Cfg::kOutBoxCols,
                                row0 - route.row_offset);
    cta::bulk_commit();
  }
  hook_ok = ok && hook_ok;
}

}  // namespace weft::gemm
