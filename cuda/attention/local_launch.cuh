// local_launch.cuh — the single-GPU launch of one instantiated shape (local_d64.cu, local_d128.cu
// each compile one, in parallel).
#pragma once

#include "attention.h"
#include "launch.cuh"
#include "local.cuh"

namespace weft::attn {

template <class Cfg>
cudaError_t launch_local_config(const LocalLaunch& l) {
  Params<LocalPolicy::State> p{};
  p.q = l.q;
  p.o = l.o;
  p.k[0] = l.k;
  p.v[0] = l.v;
  p.k[1] = l.k;  // unused by the local policy; valid maps all the same
  p.v[1] = l.v;
  p.problem = l.problem;
  p.completion = Completion{l.completion.done, l.completion.seq, l.completion.arrivals};
  p.state.tile_counter = l.tile_counter;
  return launch<Cfg, LocalPolicy>(p, l.ctas, l.stream);
}

cudaError_t launch_local_d64(const LocalLaunch& l);
cudaError_t launch_local_d128(const LocalLaunch& l);
cudaError_t resident_local_d64(int* ctas);
cudaError_t resident_local_d128(int* ctas);

}  // namespace weft::attn
