// gathered_rows.cuh — the PULL mover's A source for the fused dispatch + up-projection
// (dispatch_gemm.cu): the producer warpgroup gathers each tile's 128 rows by row index with cp.async,
// so the owner's own rows are read straight from x and never copied (at world 1 no row is copied at
// all); the rows other ranks pushed are read from the receive buffer the same way.
//
// Contract (the engine's A source, cuda/gemm/sources.cuh, with kLanes = 128):
//   - Built once per tile by all 128 producer threads after the tile's hook, whose acquire of the
//     block's arrival counter (lane 0) the producer's named barrier extends to every lane: row r of
//     the tile is token row_source[r].y of x when r lies before the tile's own-rows end (every row of
//     the group at world 1, GroupTile::local_end otherwise), row r of the receive buffer when it lies
//     before the group's end, and zeros past it (padding, the next group's rows: their results are
//     never stored). A token outside [0, last_token] (a failed layout) is clamped.
//   - Per k-block, thread t copies 16-byte chunks t % 4 and t % 4 + 4 of rows t / 4 + 32 j (j < 4):
//     4 threads per row, so one warp instruction reads 64 contiguous bytes (two whole 32-byte
//     sectors) of each of 8 rows. Chunk c of row i lands at i x 128 + (c ^ i % 8) x 16 of the
//     1024-byte-aligned stage: the 128-byte swizzle TMA's SWIZZLE_128B leaves and the consumers'
//     descriptors read (i % 8 = (t / 4) % 8 for every j, so a thread's two offsets are fixed).
//     Chunks past `hidden` (a multiple of 8) are zero-filled, like TMA's out-of-range box part.
//   - Each thread's cp.async.mbarrier.arrive.noinc lands on the stage's `full` barrier once its own
//     copies have (kFullArrivals = 128 besides lane 0's expect_tx of B's bytes); the copies write
//     through the generic proxy (kGenericWrites), so the consumers fence before their wgmma reads.
// Registers: the producer has 40; the source keeps its 4 rows' addresses, chosen once per tile, and
// `hidden`, so a k-block is an add and two copies per row (bench/DECISIONS.md, "The gathering
// producer forms its row addresses once per tile"). 8 threads per row (whole 128-byte lines per warp
// instruction) needs 8 addresses and spills 74 bytes at 40 registers; without the spill (32-bit
// offsets into x, world 1 only) it was no faster, and 10% slower at 2I columns (same entry).
#pragma once

#include <cstdint>

#include "moe/grouped.cuh"
#include "primitives/mbarrier.cuh"
#include "primitives/warpgroup.cuh"

namespace weft::moe {

// What GatheredRows reads: plain data in the hooks' State (State::gather).
struct RowGather {
  const uint16_t* x;       // [tokens, hidden] bf16
  const uint16_t* recv;    // [capacity, hidden] bf16, the receive buffer
  const int4* row_source;  // [capacity]: source rank, token, k slot (moe.h)
  int32_t hidden;          // row length in elements, a multiple of 8
  int32_t last_token;      // tokens - 1, or 0
  int32_t all_own;         // 1 at world 1: every row of a group is this rank's own
};

namespace cp_async {
// A 16-byte global -> shared copy through L2 (cg), zero-filling what src_bytes (0 or 16) leaves.
__device__ __forceinline__ void copy16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// An arrive-on on `bar` once every cp.async this thread issued so far has landed; noinc: the arrival
// counts against the barrier's initial count (it is one of kFullArrivals).
__device__ __forceinline__ void arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(cta::smem_address(bar)) : "memory");
}
}  // namespace cp_async

template <class Cfg>
struct GatheredRows {
  static constexpr int kLanes = wg::kThreads;
  static constexpr uint32_t kFullArrivals = wg::kThreads;
  static constexpr bool kGenericWrites = true;
  static constexpr int kRows = Cfg::kTileM / 32;  // per thread
  static_assert(Cfg::kTileM == 128 && Cfg::kTileK == 64, "4 threads per 128-byte row, 32 rows per pass");
  static_assert(!Cfg::kShareA, "a gathered A is not multicast");

  // Row j of this thread, at the thread's first chunk (k-block 0): a token row of x or a row of the
  // receive buffer, chosen once per tile, so a k-block costs an add and two copies per row. A row
  // past the group's end is the receive buffer's row 0 with bit 0 set: its copies read nothing
  // (src-size 0, zeros). Reading it instead would be harmless (its results are never stored) but
  // costly: at decode most of a tile's rows lie past its group, and every CTA would read the same
  // line (dispatch + up 0.27 -> 0.65 ms at T 128).
  const uint16_t* src[kRows];
  int32_t hidden;

  template <class P>
  __device__ __forceinline__ GatheredRows(const P& p, const GroupTile& t) : hidden(p.hooks.gather.hidden) {
    const RowGather& g = p.hooks.gather;
    const int group = wg::thread() / 4, chunk = wg::thread() % 4;
    const int32_t own_end = g.all_own ? t.row_end : t.local_end;
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int32_t r = t.m0 + group + 32 * j;
      if (r < own_end) {
        // Written in this launch by this rank's CTAs, released with the block's arrival (see above).
        const int32_t token = mem_cg::load(reinterpret_cast<const int32_t*>(g.row_source + r) + 1);
        src[j] = g.x + int64_t(min(max(token, 0), g.last_token)) * hidden + chunk * 8;
      } else if (r < t.row_end) {
        src[j] = g.recv + int64_t(r) * hidden + chunk * 8;
      } else {
        src[j] = reinterpret_cast<const uint16_t*>(reinterpret_cast<uintptr_t>(g.recv) | 1u);
      }
    }
  }

  // Only B arrives by TMA: the rows' bytes are counted by the copies' own arrivals.
  template <class P>
  static __device__ __forceinline__ uint32_t stage_bytes(const P&) {
    return 0;
  }

  __device__ __forceinline__ void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t, int lane) const {
    const int chunk = lane % 4, group = lane / 4;
    const uint32_t to = cta::smem_address(dst) + uint32_t(group * 128);
    const uint32_t lo = uint32_t((chunk ^ (group % 8)) * 16), hi = uint32_t(((chunk + 4) ^ (group % 8)) * 16);
    const int32_t col = k0 + chunk * 8;
    const uint32_t lo_bytes = col < hidden ? 16u : 0u, hi_bytes = col + 32 < hidden ? 16u : 0u;
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      // A chunk past `hidden`, or a row past the group (bit 0), reads nothing (src-size 0): zeros.
      const uintptr_t at = reinterpret_cast<uintptr_t>(src[j]);
      const bool past = (at & 1u) != 0;
      const uint16_t* row = reinterpret_cast<const uint16_t*>(at & ~uintptr_t(1)) + k0;
      cp_async::copy16(to + uint32_t(j * 32 * 128) + lo, row, past ? 0u : lo_bytes);
      cp_async::copy16(to + uint32_t(j * 32 * 128) + hi, row + 32, past ? 0u : hi_bytes);
    }
    cp_async::arrive_noinc(full);
  }
};

}  // namespace weft::moe
