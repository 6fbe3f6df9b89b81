// sources.cuh — the default A and B sources of the engine (hooks.cuh, "A source", "B source"): one
// tile's k-block of each operand by 2-D TMA from KernelParams::a / ::b, into the stage's swizzled
// buffers. With a cluster of two, each CTA loads half of the shared operand and multicasts it into
// both CTAs, so that operand is read from L2 once per cluster.
//
// A source is built once per tile on the producer thread (40 registers: keep it to a map pointer and
// a coordinate or two) and asked for one k-block at a time:
//   Source(const KernelParams<State>& p, const Tile& t);
//   static uint32_t stage_bytes(const KernelParams<State>& p);   bytes one stage's loads land
//   void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t cluster_rank, int lane) const;
//   static constexpr int kLanes;                                 (A only) 1: lane 0 loads; 32: every
//                                                                lane of the producer's warp 0 does;
//                                                                128: the whole producer warpgroup
// and, optionally (A only, with kLanes = 128; mainloop.cuh reads them, absent means 0 / false):
//   static constexpr uint32_t kFullArrivals;   arrivals the source makes on each stage's `full`
//       barrier besides lane 0's arrive_expect_tx (cp.async.mbarrier.arrive.noinc: one per lane,
//       each fired once that lane's copies have landed); its stage_bytes are then TMA bytes only
//   static constexpr bool kGenericWrites;      the source writes the stage through the generic proxy
//       (cp.async): the consumers then fence the async proxy between those writes and their wgmma
//       reads, and between their reads and the release of the slot (accumulate_tile)
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../primitives/cluster.cuh"
#include "../primitives/tma.cuh"
#include "config.cuh"
#include "hooks.cuh"
#include "params.cuh"

namespace weft::gemm {

// A: rows [row, row + TileM) of `map` (KernelParams::a at the tile's m0 unless a derived source
// picks another map and row), [K-block] columns; box {64, a_box_rows or 128 (64 per CTA of a
// cluster sharing A)}.
template <class Cfg>
struct TmaA {
  static constexpr int kLanes = 1;
  const CUtensorMap* map;
  int32_t row;

  template <class P, class T>
  __device__ __forceinline__ TmaA(const P& p, const T& t) : map(&p.a), row(t.m0) {}

  // A short A (Problem::a_box_rows) lands fewer bytes; with a shared A each CTA loads half a tile
  // and receives the other half from its peer: a whole tile either way.
  template <class P>
  static __device__ __forceinline__ uint32_t stage_bytes(const P& p) {
    return Cfg::kShareA || p.problem.a_box_rows <= 0 ? uint32_t(Cfg::kABytes)
                                                      : uint32_t(p.problem.a_box_rows * Cfg::kTileK * 2);
  }

  __device__ __forceinline__ void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t rank, int) const {
    if constexpr (Cfg::kShareA) {
      const int32_t half = Cfg::kTileM / 2;
      cluster::load_2d_multicast(dst + rank * (Cfg::kABytes / 2), map, full, k0, row + int32_t(rank) * half, 0x3);
    } else {
      cta::load_2d(dst, map, full, k0, row);
    }
  }
};

// B: columns [n0, n0 + TileN) of KernelParams::b, k-major ([N, K], box {64, TileN or TileN / 2}) or
// n-major ([K, N], TileN / 64 boxes of {64 N, 64 K}).
template <class Cfg>
struct TmaB {
  const CUtensorMap* map;
  int32_t n0;

  template <class P, class T>
  __device__ __forceinline__ TmaB(const P& p, const T& t) : map(&p.b), n0(t.n0) {}

  template <class P>
  static __device__ __forceinline__ uint32_t stage_bytes(const P&) { return uint32_t(Cfg::kBBytes); }

  __device__ __forceinline__ void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t rank, int) const {
    if constexpr (!Cfg::kBNMajor) {
      if constexpr (Cfg::kShareB) {
        const int32_t half = Cfg::kTileN / 2;
        cluster::load_2d_multicast(dst + rank * (Cfg::kBBytes / 2), map, full, k0, n0 + int32_t(rank) * half, 0x3);
      } else {
        cta::load_2d(dst, map, full, k0, n0);
      }
    } else {
      constexpr int kBoxes = Cfg::kTileN / 64;
      constexpr int kMine = Cfg::kShareB ? kBoxes / 2 : kBoxes;
#pragma unroll
      for (int j = 0; j < kMine; ++j) {
        const int box = (Cfg::kShareB ? int(rank) * kMine : 0) + j;
        if constexpr (Cfg::kShareB) {
          cluster::load_2d_multicast(dst + box * Cfg::kBBoxBytes, map, full, n0 + box * 64, k0, 0x3);
        } else {
          cta::load_2d(dst + box * Cfg::kBBoxBytes, map, full, n0 + box * 64, k0);
        }
      }
    }
  }
};

}  // namespace weft::gemm
