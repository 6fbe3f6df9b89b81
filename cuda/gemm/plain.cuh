// plain.cuh — the plain GEMM: the engine with DefaultHooks, one instantiation per tile shape,
// B layout and output type. Each plain_n*.cu instantiates one tile width (they compile in parallel).
#pragma once

#include "gemm.h"
#include "launch.cuh"

namespace weft::gemm {

// grid_only: report the grid size in *ctas instead of launching.
template <class Cfg>
cudaError_t launch_plain_config(const PlainLaunch& l, int* ctas) {
  KernelParams<DefaultHooks::State> p{};
  p.a = l.a;
  p.b = l.b;
  p.c = l.c;
  p.problem = Problem{l.m, l.n, l.k, l.group_m, l.a_box_rows};
  p.tail = OutputTail{l.c_ptr, l.ldc, l.c_tma_cols};
  p.completion = Completion{l.completion.done, l.completion.seq, l.completion.arrivals};
  if (ctas) return grid_ctas<Cfg, DefaultHooks>(p.problem, l.max_ctas, ctas);
  return launch<Cfg, DefaultHooks>(p, l.max_ctas, l.stream);
}

template <int TileN, int ClusterM, int ClusterN>
cudaError_t launch_plain_shape(const PlainLaunch& l, int* ctas) {
  if (l.b_n_major) {
    if (l.out_f32) return launch_plain_config<Config<TileN, ClusterM, ClusterN, true, true>>(l, ctas);
    return launch_plain_config<Config<TileN, ClusterM, ClusterN, true, false>>(l, ctas);
  }
  if (l.out_f32) return launch_plain_config<Config<TileN, ClusterM, ClusterN, false, true>>(l, ctas);
  return launch_plain_config<Config<TileN, ClusterM, ClusterN, false, false>>(l, ctas);
}

// One tile width's instantiations: the single CTA, and the one two-CTA cluster that width supports
// (tile_config_supported in plain.cu): split along M for 128 and 256 columns, along N for 64.
template <int TileN>
cudaError_t launch_plain_width(const PlainLaunch& l, int* ctas) {
  constexpr int kPairM = TileN == 64 ? 1 : 2;
  constexpr int kPairN = TileN == 64 ? 2 : 1;
  if (l.tile.cluster_m == 1 && l.tile.cluster_n == 1) return launch_plain_shape<TileN, 1, 1>(l, ctas);
  if (l.tile.cluster_m == kPairM && l.tile.cluster_n == kPairN) return launch_plain_shape<TileN, kPairM, kPairN>(l, ctas);
  return cudaErrorInvalidConfiguration;
}

// ctas == nullptr: launch; otherwise report the grid size.
cudaError_t launch_plain_n256(const PlainLaunch& l, int* ctas);
cudaError_t launch_plain_n128(const PlainLaunch& l, int* ctas);
cudaError_t launch_plain_n64(const PlainLaunch& l, int* ctas);

}  // namespace weft::gemm
