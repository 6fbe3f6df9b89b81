// epilogue.cuh — the engine's epilogue building blocks, and its default policy StoreEpilogue:
// accumulators -> shared memory -> TMA store (or add) into C, per consumer warpgroup (the policy
// contract is in hooks.cuh).
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
  static_assert(!Cfg::kOutF32, "boxes added to the accumulators are bf16 boxes of the bf16 output's shape");
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

// Columns [tail.tma_cols, n) of this consumer's 64 rows, straight from registers (only the last
// tile column of C has any).
template <class Cfg, EpilogueOp Op, class P>
__device__ __forceinline__ void store_tail_columns(const float (&acc)[Cfg::kTileN / 2], const P& p, const TileCoord& t,
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
          if constexpr (Op == EpilogueOp::kReduceAdd) atomicAdd(c, v); else *c = v;
        } else {
          __nv_bfloat16* c = static_cast<__nv_bfloat16*>(p.tail.c) + at;
          if constexpr (Op == EpilogueOp::kReduceAdd) atomicAdd(c, __float2bfloat16_rn(v));
          else *c = __float2bfloat16_rn(v);
        }
      }
    }
  }
}

// Rows [0, rows) x columns [0, cols) of this consumer's 64 x TileN accumulators, rounded to bf16,
// into `c` (the half-tile's first element, ldc elements per row) with plain 4-byte stores (column
// pairs: cols even). For a tile whose rows end inside it where TMA would store past the end: a
// grouped GEMM's group ending mid-tile (hooks.cuh). Every thread of the warpgroup.
template <class Cfg>
__device__ __forceinline__ void store_rows(const float (&acc)[Cfg::kTileN / 2], __nv_bfloat16* c, int64_t ldc,
                                           int32_t rows, int32_t cols) {
  static_assert(!Cfg::kOutF32, "bf16 rows");
  const int th = wg::thread();
  const int32_t row_lo = (th / 32) * 16 + (th % 32) / 4;
  const int32_t col_base = 2 * (th % 4);
#pragma unroll
  for (int n8 = 0; n8 < Cfg::kTileN / 8; ++n8) {
    const int32_t col = col_base + 8 * n8;
    if (col >= cols) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int32_t row = row_lo + 8 * h;
      if (row < rows)
        *reinterpret_cast<uint32_t*>(c + int64_t(row) * ldc + col) = pack_bf16x2(acc[4 * n8 + 2 * h], acc[4 * n8 + 2 * h + 1]);
    }
  }
}

// Named barrier ids of the consumers (0 is __syncthreads): 1 + consumer each consumer's own, and
// this one the consumers together.
constexpr uint32_t kConsumersBarrier = 15;

// A signal owed for the last half-tile this consumer stored: its stores were issued but may still
// be in flight. Every thread of the warpgroup tracks it identically; the leader publishes it.
template <class Tile = TileCoord>
struct PendingSignal {
  Tile tile;
  bool valid = false;
};

// Publishes a pending signal: waits until the leader's earlier stores are complete, fences them for
// system scope, or device scope with SignalScope::kDevice (only this GPU reads the signal and the
// data: its SMs, its copy engines' stream waits), then calls Hooks::after_tile_stored. The named
// barrier orders the other threads' plain stores, which they fenced themselves. Called by the
// whole consumer warpgroup; with SignalScope::kNone it does nothing.
template <class Hooks, SignalScope Scope, class Tile>
__device__ __forceinline__ void settle(const typename Hooks::State& state, PendingSignal<Tile>& pending, int consumer,
                                       uint32_t barrier_id) {
  if constexpr (Scope != SignalScope::kNone) {
    if (!pending.valid) return;
    wg::sync(barrier_id);
    if (wg::thread() == 0) {
      cta::bulk_wait<0>();
      cta::fence_proxy_async_global();
      if constexpr (Scope == SignalScope::kDevice) __threadfence();
      else __threadfence_system();
      Hooks::after_tile_stored(state, pending.tile, consumer);
    }
    pending.valid = false;
  }
}

// What every one-kind epilogue policy (StoreEpilogue below; the grouped kernels' BoundedEpilogue
// and RoutedRowsEpilogue, cuda/moe) shares: a single kind of tile, no epilogue barriers of its own,
// nothing to do before the math or per k-block, and the consumer's view of the kernel's arguments
// and of its two staging buffers.
template <class Cfg, class State, class TileT>
class OneKindEpilogue {
 public:
  using Tile = TileT;
  static constexpr int kKinds = 1;
  static constexpr int kBarriers = 0;
  static __device__ __forceinline__ int kind(const State&, const Tile&) { return 0; }

  // The engine's constructor arguments; the last (the rank, gemm/kernel.cuh) only routed policies use.
  __device__ __forceinline__ OneKindEpilogue(const KernelParams<State>& p, const SharedStorage<Cfg>& s, int consumer, uint32_t)
      : p_(p), s_(s), consumer_(consumer) {}

  template <int Kind>
  __device__ __forceinline__ void before_math(const Tile&) {}
  template <int Kind>
  __device__ __forceinline__ void on_kblock(const Tile&, int32_t, int32_t) {}

 protected:
  const KernelParams<State>& p_;
  const SharedStorage<Cfg> s_;
  const int consumer_;
  uint32_t staged_ = 0;  // boxes staged so far, across tiles: picks the staging buffer
};

// The default policy: each consumer's half-tile is staged box by box through its two staging
// buffers and stored into KernelParams::c by TMA (Op kReduceAdd: added, cp.reduce.async.bulk), C
// possibly a peer's; the columns past tail.tma_cols by plain stores. With Signal, each half-tile's
// stores are published (Hooks::after_tile_stored) at the start of the consumer's next epilogue, or
// at its finish, so the wait for them to complete overlaps a whole tile of math. The leader waits in
// Hooks::before_tile_stores before a half-tile's first store.
template <class Cfg, class Hooks, EpilogueOp Op, SignalScope Signal>
class StoreEpilogue
    : public OneKindEpilogue<Cfg, typename Hooks::State, typename TileOf<typename Hooks::template Scheduler<Cfg>>::type> {
  using Base = OneKindEpilogue<Cfg, typename Hooks::State, typename TileOf<typename Hooks::template Scheduler<Cfg>>::type>;

 public:
  using State = typename Hooks::State;
  using typename Base::Tile;
  using Base::Base;

  template <int Kind, class Scheduler>
  __device__ __forceinline__ void store(float (&acc)[Cfg::kTileN / 2], const Tile& t, const Scheduler&) {
    const int32_t row0 = t.m0 + consumer_ * Cfg::kConsumerRows;
    if (row0 >= p_.problem.m) return;  // uniform over the warpgroup
    const uint32_t barrier_id = 1 + consumer_;
    const bool leader = wg::thread() == 0;
    settle<Hooks, Signal>(p_.hooks, pending_, consumer_, barrier_id);
    // Only the leader issues stores, so only it needs to have waited; the others stage the first box
    // meanwhile and meet it at the first named barrier.
    if (leader) ok_ = ok_ && Hooks::before_tile_stores(p_.hooks, hook_state_, t, consumer_);
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box) {
      const int32_t col0 = t.n0 + box * Cfg::kOutBoxCols;
      if (col0 >= p_.tail.tma_cols) break;
      uint8_t* buf = s_.out_box(consumer_, staged_ & 1u);
      stage_for_store<Cfg>(acc, buf, box, barrier_id, false);
      if (leader) {
        if constexpr (Op == EpilogueOp::kReduceAdd) cta::reduce_add_2d(&p_.c, buf, col0, row0);
        else cta::store_2d(&p_.c, buf, col0, row0);
        cta::bulk_commit();
      }
      ++staged_;
    }
    if (t.n0 + Cfg::kTileN > p_.tail.tma_cols && t.n0 < p_.problem.n) {
      store_tail_columns<Cfg, Op>(acc, p_, t, consumer_);
      if constexpr (Signal != SignalScope::kNone) __threadfence_system();  // before settle's barrier
    }
    if constexpr (Signal != SignalScope::kNone) {
      pending_.tile = t;
      pending_.valid = true;
    }
  }

  __device__ __forceinline__ void finish(float (&)[Cfg::kTileN / 2]) {
    settle<Hooks, Signal>(p_.hooks, pending_, consumer_, 1 + consumer_);
  }
  __device__ __forceinline__ bool ok() const { return ok_; }

 protected:
  using Base::consumer_, Base::p_, Base::s_, Base::staged_;
  typename Hooks::ConsumerState hook_state_{};
  PendingSignal<Tile> pending_{};
  bool ok_ = true;
};

}  // namespace weft::gemm
