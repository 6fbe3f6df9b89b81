// Host-side helpers of attention.h and the dispatch from a runtime head dim to an instantiated
// kernel.
#include "config.cuh"
#include "local_launch.cuh"

namespace weft::attn {

bool head_dim_supported(int32_t head_dim) { return head_dim == 64 || head_dim == 128; }

TileShape tile_shape(int32_t head_dim) { return head_dim == 64 ? shape_of<ConfigD64>() : shape_of<ConfigD128>(); }

cudaError_t launch_local(const LocalLaunch& l) {
  switch (l.head_dim) {
    case 64: return launch_local_d64(l);
    case 128: return launch_local_d128(l);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t resident_ctas(int32_t head_dim, int* ctas) {
  switch (head_dim) {
    case 64: return resident_local_d64(ctas);
    case 128: return resident_local_d128(ctas);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace weft::attn
