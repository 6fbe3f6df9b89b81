// Host-side helpers of attention.h and the dispatch from a runtime head dim to an instantiated
// kernel.
#include "config.cuh"
#include "local_launch.cuh"

namespace weft::attn {

bool head_dim_supported(int32_t head_dim) { return head_dim == 64 || head_dim == 128; }

TileShape tile_shape(int32_t head_dim, bool causal) {
  if (head_dim == 64) return shape_of<ConfigD64>();
  return causal ? shape_of<ConfigD128>() : shape_of<ConfigD128Full>();
}

cudaError_t launch_local(const LocalLaunch& l) {
  switch (l.head_dim) {
    case 64: return launch_local_d64(l);
    case 128: return l.problem.causal ? launch_local_d128(l) : launch_local_d128_full(l);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t resident_ctas(int32_t head_dim, bool causal, int* ctas) {
  switch (head_dim) {
    case 64: return resident_local_d64(ctas);
    case 128: return causal ? resident_local_d128(ctas) : resident_local_d128_full(ctas);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace weft::attn
