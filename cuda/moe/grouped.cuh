// grouped.cuh — the grouped GEMM as hooks of the GEMM engine (cuda/gemm/hooks.cuh): for every group
// g, out[rows of g] = a[rows of g] · b[g] (torch._grouped_mm with row offsets), the groups' row
// ranges read from device memory while the kernel runs, so nothing about them reaches the host.
// groupedGemm is these hooks with the engine's TMA A source (grouped_gemm.cu); the MoE ops
// (dispatch_gemm.cu, gemm_combine.cu) reuse the scheduler, the B source and the bounded stores
// with an A source and an epilogue of their own.
//
// Contract
//   Groups (in the hooks' State): group g is rows [starts[g], ends[g]) of A and of the output, or
//   [starts[g], starts[g] + limits[g]) with limits_are_counts; clamped to [0, rows) with the end at
//   or after the start, so bad bounds give an empty group, never a stray store (groupedGemm also
//   reports them: GroupedHooks::on_kernel_start). An empty group has no tiles. Optional local[g]:
//   the first local[g] rows of group g are the owner's own (MoE, cuda/moe/moe.h); the tiles whose
//   rows are all own run first, while the other sources' rows are still on their way. Optional
//   status: a MoE layout's status word (moe.h); a failed layout has no tiles at all.
//   Tiles: GroupTile, the engine's TileCoord with the group, row_end (the group's end) and
//   local_end (where its own rows end). m0 = starts[g] + 128 i: a tile may run past its group's end
//   into the next group's rows (or past A, zero-filled by TMA); those rows are computed and never
//   stored. n0 is the tile's first OUTPUT column, tile_cols wide: with paired gate/up weights
//   (SwiGLU) the math tile is twice as wide as what it stores.
//   Order: segment by segment (without `local`: one segment per group, in group order; with it:
//   first every group's all-own tile rows, then every group's other rows), each segment in bands of
//   `band` tile rows walked column by column, CTA c taking units c, c + C, c + 2C, ... (C CTAs): the
//   CTAs running at one time cover one or two groups' tiles, so a group's B columns and its A rows
//   are read from HBM about once and served from L2 to the rest of the band. Every role of a CTA
//   walks the same sequence from the same device words; each step of the walk reads one group's
//   bounds (ld.global.cg: the MoE kernels write them in the same launch).
//   B: one 3-D tensor map over [G, N, K] (k-major: box {64, TileN, 1}, or {64, TileN / 2, 1} for
//   each half of a paired tile) or [G, K, N] (n-major: boxes {64, 64, 1}), the group as the outer
//   coordinate, so a box never reads another group's weights (its out-of-range part is zero).
//   Paired (SwiGLU, w [G, ·, 2I] as gate | up): KernelParams::b maps the gate half, GroupedBase::b_up
//   the up half (both [G, ·, I] views of the same weights); a math tile's first TileN / 2 columns
//   are gate columns [n0, n0 + TileN / 2), its last TileN / 2 the up columns of the same indices,
//   so the epilogue has both factors of every output in the same thread's registers.
//   Stores (BoundedEpilogue): a consumer's 64 rows are stored by TMA when they all lie inside the
//   group, by plain bounded stores (gemm::store_rows) when the group ends among them, not at all
//   when they lie past it; so rows of the next group, and rows in no group, are never written.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "gemm/epilogue.cuh"
#include "gemm/hooks.cuh"
#include "gemm/kernel.cuh"
#include "gemm/sources.cuh"
#include "moe/moe.h"
#include "primitives/completion.cuh"

namespace weft::moe {

namespace mem_cg {
__device__ __forceinline__ int32_t load(const int32_t* p) {
  int32_t v;
  asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint64_t load(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p));
  return v;
}
}  // namespace mem_cg

// A MoE layout's status word (moe.h: epoch << 8 | failure code) says the layout is valid.
__device__ __forceinline__ bool layout_valid(uint64_t status) { return (status >> 8) != 0 && (status & 0xff) == 0; }

// What every grouped State starts with. The up half's map is used by paired B sources only.
struct GroupedBase {
  CUtensorMap b_up;
  Groups groups;
  Completion completion;  // the launch's completion words, for the hooks' own failure reports
};

struct GroupTile : gemm::TileCoord {
  int32_t group;
  int32_t row_end;    // the group's rows end here
  int32_t local_end;  // its own rows (Groups::local) end here
};

// The walk over (segment, unit): see the contract above. Built in every role, the producer's
// included (40 registers): only what next() must carry from one call to the next is kept.
template <class Cfg>
class GroupScheduler {
 public:
  using Tile = GroupTile;

  template <class State>
  __device__ GroupScheduler(const gemm::Problem&, const State& s, uint32_t) : g_(s.groups), unit_(int32_t(blockIdx.x)) {
    const bool valid = g_.status == nullptr || layout_valid(mem_cg::load(g_.status));
    // A failed layout walks no segment: start past the last one.
    segment_ = valid ? -1 : g_.count * (g_.local ? 2 : 1);
  }

  __device__ bool next(GroupTile& t) {
    const int32_t segments = g_.count * (g_.local ? 2 : 1);
    while (unit_ >= first_unit_ + units_) {
      first_unit_ += units_;
      units_ = 0;
      if (segment_ + 1 >= segments) return false;
      enter(++segment_);
    }
    const int32_t local = unit_ - first_unit_;
    // Bands of `band` tile rows, each walked column by column (gemm::GroupedScheduler's order).
    const int32_t per_band = g_.band * g_.tiles_n;
    const int32_t band = local / per_band;
    const int32_t first = band * g_.band;
    const int32_t high = min(g_.band, rows_ - first);
    const int32_t in_band = local - band * per_band;
    const int32_t tm = row_lo_ + first + in_band % high;
    const int32_t tn = in_band / high;
    t.tile_m = tm;
    t.tile_n = tn;
    t.m0 = start_ + tm * Cfg::kTileM;
    t.n0 = tn * g_.tile_cols;
    t.k_begin = 0;
    t.k_blocks = -1;
    t.piece = -1;
    t.group = segment_ >= g_.count ? segment_ - g_.count : segment_;
    t.row_end = end_;
    t.local_end = local_end_;
    unit_ += int32_t(gridDim.x);
    return true;
  }

 private:
  // Segment s: group s % G; its tile rows [0, own) in the first pass, [own, all) in the second (one
  // pass of all rows without `local`). own counts the tile rows whose 128 rows are all own rows.
  __device__ void enter(int32_t s) {
    const bool first_pass = g_.local && s < g_.count;
    const int32_t group = s >= g_.count ? s - g_.count : s;
    const int32_t first = min(max(mem_cg::load(g_.starts + group), 0), g_.rows);
    const int32_t limit = mem_cg::load(g_.limits + group);
    const int32_t last = g_.limits_are_counts ? first + max(limit, 0) : limit;
    start_ = first;
    end_ = min(max(last, first), g_.rows);
    const int32_t tiles = (end_ - start_ + Cfg::kTileM - 1) / Cfg::kTileM;
    int32_t own_rows = 0;
    if (g_.local) own_rows = min(max(mem_cg::load(g_.local + group), 0), end_ - start_);
    local_end_ = start_ + own_rows;
    const int32_t own_tiles = own_rows / Cfg::kTileM;
    row_lo_ = first_pass || !g_.local ? 0 : own_tiles;
    rows_ = (first_pass ? own_tiles : tiles) - row_lo_;
    units_ = rows_ * g_.tiles_n;
  }

  const Groups& g_;
  int32_t unit_, segment_;
  int32_t first_unit_ = 0, units_ = 0, start_ = 0, end_ = 0, local_end_ = 0, row_lo_ = 0, rows_ = 0;
};

// B of group t.group: see the contract above (Paired: gate from KernelParams::b, up from b_up). One
// pointer to the kernel parameters rather than one per map: the producer has 40 registers.
template <class Cfg, bool Paired, class State>
struct GroupB {
  const gemm::KernelParams<State>* p;
  int32_t n0, group;

  __device__ __forceinline__ GroupB(const gemm::KernelParams<State>& params, const GroupTile& t)
      : p(&params), n0(t.n0), group(t.group) {}

  template <class P>
  static __device__ __forceinline__ uint32_t stage_bytes(const P&) {
    return uint32_t(Cfg::kBBytes);
  }

  __device__ __forceinline__ void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t, int) const {
    static_assert(Cfg::kClusterSize == 1, "grouped tiles are not paired across a cluster");
    const CUtensorMap* gate = &p->b;
    const CUtensorMap* up = &p->hooks.b_up;
    if constexpr (!Cfg::kBNMajor) {
      if constexpr (Paired) {
        // Two boxes of TileN / 2 rows of 128 bytes: the second lands 1024-byte aligned, so the
        // swizzle pattern continues as one TileN-row box would leave it.
        cta::load_3d(dst, gate, full, k0, n0, group);
        cta::load_3d(dst + (Cfg::kTileN / 2) * 128, up, full, k0, n0, group);
      } else {
        cta::load_3d(dst, gate, full, k0, n0, group);
      }
    } else {
      constexpr int kBoxes = Cfg::kTileN / 64;
      constexpr int kHalf = Paired ? kBoxes / 2 : kBoxes;
#pragma unroll
      for (int j = 0; j < kBoxes; ++j) {
        const CUtensorMap* map = Paired && j >= kHalf ? up : gate;
        cta::load_3d(dst + j * Cfg::kBBoxBytes, map, full, n0 + (j % kHalf) * 64, k0, group);
      }
    }
  }
};

// out = silu(gate) x up over a paired tile, in place: the gate of output column c (c < TileN / 2)
// and its up factor (column c + TileN / 2) are acc[i] and acc[i + TileN / 4] of the same thread
// (the fragment's column groups of 8 are in order), so the first TileN / 4 accumulators become the
// output of the tile's TileN / 2 columns, in the layout stage_box and store_rows read. fp32, one
// rounding at the store. silu(g) = g sigmoid(g) = g (1 + tanh(g / 2)) / 2: one MUFU operation per
// output (tanh.approx, relative error ~5e-4, under the bf16 rounding of the store) instead of two
// (ex2 and rcp), while both consumers' tensor cores wait for the epilogue.
template <class Cfg>
__device__ __forceinline__ void swiglu_in_place(float (&acc)[Cfg::kTileN / 2]) {
  constexpr int kHalf = Cfg::kTileN / 4;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float half_g = 0.5f * acc[i];
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(half_g));
    acc[i] = fmaf(half_g, t, half_g) * acc[i + kHalf];
  }
}

// The bounded store of a group's tiles into KernelParams::c (its map is [rows, n] with 64 x 64 boxes,
// tail.c / tail.ldc the same memory, tail.tma_cols = n, a multiple of 8). Swiglu: paired tiles, the
// output half-width (Hooks::kSwiglu).
template <class Cfg, class Hooks>
class BoundedEpilogue : public gemm::OneKindEpilogue<Cfg, typename Hooks::State, GroupTile> {
  using Base = gemm::OneKindEpilogue<Cfg, typename Hooks::State, GroupTile>;
  using Base::consumer_, Base::p_, Base::s_, Base::staged_;

 public:
  using Base::Base;
  static constexpr int kCols = Hooks::kSwiglu ? Cfg::kTileN / 2 : Cfg::kTileN;

  template <int Kind, class Scheduler>
  __device__ __forceinline__ void store(float (&acc)[Cfg::kTileN / 2], const GroupTile& t, const Scheduler&) {
    const int32_t row0 = t.m0 + consumer_ * Cfg::kConsumerRows;
    const int32_t rows = min(t.row_end - row0, int32_t(Cfg::kConsumerRows));
    if (rows <= 0) return;  // the next group's rows (uniform over the warpgroup)
    if constexpr (Hooks::kSwiglu) swiglu_in_place<Cfg>(acc);
    const int32_t n = p_.tail.tma_cols;
    if (rows < Cfg::kConsumerRows) {
      gemm::store_rows<Cfg>(acc, static_cast<__nv_bfloat16*>(p_.tail.c) + int64_t(row0) * p_.tail.ldc + t.n0,
                            p_.tail.ldc, rows, min(kCols, n - t.n0));
      return;
    }
    const uint32_t barrier_id = 1 + consumer_;
#pragma unroll
    for (int box = 0; box < kCols / 64; ++box) {
      const int32_t col0 = t.n0 + box * 64;
      if (col0 >= n) break;
      uint8_t* buf = s_.out_box(consumer_, staged_ & 1u);
      gemm::stage_for_store<Cfg>(acc, buf, box, barrier_id, false);
      if (wg::thread() == 0) {
        cta::store_2d(&p_.c, buf, col0, row0);
        cta::bulk_commit();
      }
      ++staged_;
    }
  }

  __device__ __forceinline__ void finish(float (&)[Cfg::kTileN / 2]) {}
  __device__ __forceinline__ bool ok() const { return true; }
};

// Reasons the grouped kernels report through cta::fail beside the engine's (gemm/params.cuh): the
// stage field holds the index of a bad offset.
constexpr int32_t kFailGroupOffsets = 3;

// What the hooks of every grouped kernel (groupedGemm, dispatch_gemm.cu, gemm_combine.cu) share:
// the group scheduler and grouped B over State (paired gate | up with Swiglu), and the kernel's
// epilogue policy.
template <class S, bool Swiglu, template <class, class> class EpiloguePolicy>
struct GroupHooks : gemm::DefaultHooks {
  using State = S;
  static constexpr bool kSwiglu = Swiglu;
  template <class Cfg>
  using Scheduler = GroupScheduler<Cfg>;
  template <class Cfg>
  using BSource = GroupB<Cfg, Swiglu, S>;
  template <class Cfg, class H>
  using Epilogue = EpiloguePolicy<Cfg, H>;
};

// groupedGemm's hooks: the engine's A source over a [rows, K] map, grouped B, bounded stores.
struct GroupedState : GroupedBase {};

template <bool Swiglu>
struct GroupedHooks : GroupHooks<GroupedState, Swiglu, BoundedEpilogue> {

  // Thread 0 of every CTA checks a share of the offsets the host could not see (non-decreasing,
  // inside [0, rows]; at most 4097 words, so a few loads each). The first bad one found is
  // reported; the scheduler clamps them either way, so nothing is stored out of bounds.
  static __device__ void on_kernel_start(const GroupedState& s) {
    const Groups& g = s.groups;
    for (int32_t i = int32_t(blockIdx.x); i <= g.count; i += int32_t(gridDim.x)) {
      const int32_t v = g.starts[i];
      const int32_t previous = i > 0 ? g.starts[i - 1] : 0;
      if (v < previous || v > g.rows) {
        cta::fail(s.completion, kFailGroupOffsets, uint32_t(i));
        return;
      }
    }
  }
};

// Host side: the engine's arguments every grouped kernel's launch shares (maps, problem, output
// tail, completion, groups); the caller adds what its own State holds.
template <class State>
gemm::KernelParams<State> grouped_params(const CUtensorMap& a, const CUtensorMap& b, const CUtensorMap& c,
                                         const gemm::Problem& problem, const gemm::OutputTail& tail,
                                         const CompletionWords& completion, const Groups& groups) {
  gemm::KernelParams<State> p{};
  p.a = a;
  p.b = b;
  p.c = c;
  p.problem = problem;
  p.tail = tail;
  p.completion = Completion{completion.done, completion.seq, completion.arrivals};
  p.hooks.groups = groups;
  p.hooks.completion = p.completion;
  return p;
}

// Host side: calls launch(std::type_identity<Cfg>{}) with the engine config a grouped kernel is
// built for: tile width tile_n (128 or 256, else cudaErrorInvalidConfiguration), B [G, K, N] with
// b_n_major, else [G, N, K]. The one place that maps the pair to a config: the launches
// (with_grouped_config) and the preloads (for_each_grouped_config) both go through it.
template <class Fn>
cudaError_t with_grouped_config(int tile_n, bool b_n_major, Fn&& launch) {
  switch (tile_n) {
    case 256:
      if (b_n_major) return launch(std::type_identity<gemm::Config<256, 1, 1, true, false>>{});
      return launch(std::type_identity<gemm::Config<256, 1, 1, false, false>>{});
    case 128:
      if (b_n_major) return launch(std::type_identity<gemm::Config<128, 1, 1, true, false>>{});
      return launch(std::type_identity<gemm::Config<128, 1, 1, false, false>>{});
    default: return cudaErrorInvalidConfiguration;
  }
}

// The config of launch `l` (its tile_n and b_n_major).
template <class Launch, class Fn>
cudaError_t with_grouped_config(const Launch& l, Fn&& launch) {
  return with_grouped_config(l.tile_n, l.b_n_major, launch);
}

// Host side: calls fn(std::type_identity<Cfg>{}) for every config with_grouped_config can choose,
// until one returns an error (the preloads: moe.h, preload_kernels).
template <class Fn>
cudaError_t for_each_grouped_config(Fn&& fn) {
  for (const int tile_n : {256, 128})
    for (const bool b_n_major : {true, false}) {
      const cudaError_t e = with_grouped_config(tile_n, b_n_major, fn);
      if (e != cudaSuccess) return e;
    }
  return cudaSuccess;
}

}  // namespace weft::moe
