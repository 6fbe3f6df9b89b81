// The fused ring-attention kernels (ring.cuh), one per head dim, and their dispatch.
#include "attention.h"
#include "launch.cuh"
#include "ring.cuh"

namespace weft::attn {

namespace {
template <class Cfg>
cudaError_t launch_ring_config(const RingLaunch& l) {
  Params<RingState> p{};
  p.q = l.q;
  p.o = l.o;
  p.k[0] = l.k;
  p.v[0] = l.v;
  p.k[1] = l.k_recv;
  p.v[1] = l.v_recv;
  p.problem = l.problem;
  p.completion = Completion{l.completion.done, l.completion.seq, l.completion.arrivals};
  p.state = l.state;
  return launch<Cfg, RingPolicy>(p, l.ctas, l.stream);
}
}  // namespace

TileShape ring_tile_shape(int32_t head_dim) { return head_dim == 64 ? shape_of<RingConfigD64>() : shape_of<ConfigD128>(); }

cudaError_t launch_ring(const RingLaunch& l) {
  switch (l.head_dim) {
    case 64: return launch_ring_config<RingConfigD64>(l);
    case 128: return launch_ring_config<ConfigD128>(l);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t resident_ring_ctas(int32_t head_dim, int* ctas) {
  switch (head_dim) {
    case 64: return resident<RingConfigD64, RingPolicy>(ctas);
    case 128: return resident<ConfigD128, RingPolicy>(ctas);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace weft::attn
