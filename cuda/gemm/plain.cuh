// plain.cuh — the plain GEMM: the engine with DefaultHooks, one instantiation per tile shape,
// B layout and output type. Each plain_n*.cu instantiates one tile width (they compile in parallel).
#pragma once

#include "gemm.h"
#include "launch.cuh"

namespace weft::gemm {

template <int TileN, int ClusterM, int ClusterN>
cudaError_t launch_plain_shape(const PlainLaunch& l) {
  KernelParams<DefaultHooks::State> p{};
  p.a = l.a;
  p.b = l.b;
  p.c = l.c;
  p.problem = Problem{l.m, l.n, l.k, l.group_m};
  p.completion = Completion{l.completion.done, l.completion.seq, l.completion.arrivals};
  if (l.b_n_major) {
    if (l.out_f32) return launch<Config<TileN, ClusterM, ClusterN, true, true>, DefaultHooks>(p, l.max_ctas, l.stream);
    return launch<Config<TileN, ClusterM, ClusterN, true, false>, DefaultHooks>(p, l.max_ctas, l.stream);
  }
  if (l.out_f32) return launch<Config<TileN, ClusterM, ClusterN, false, true>, DefaultHooks>(p, l.max_ctas, l.stream);
  return launch<Config<TileN, ClusterM, ClusterN, false, false>, DefaultHooks>(p, l.max_ctas, l.stream);
}

cudaError_t launch_plain_n256(const PlainLaunch& l);
cudaError_t launch_plain_n128(const PlainLaunch& l);
cudaError_t launch_plain_n64(const PlainLaunch& l);

}  // namespace weft::gemm
