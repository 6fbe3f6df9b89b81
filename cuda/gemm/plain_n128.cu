// Plain GEMM instantiations with 128-column tiles.
#include "plain.cuh"

namespace weft::gemm {

cudaError_t launch_plain_n128(const PlainLaunch& l, int* ctas) {
  if (l.tile.cluster_m == 1 && l.tile.cluster_n == 1) return launch_plain_shape<128, 1, 1>(l, ctas);
  if (l.tile.cluster_m == 2 && l.tile.cluster_n == 1) return launch_plain_shape<128, 2, 1>(l, ctas);
  return cudaErrorInvalidConfiguration;
}

}  // namespace weft::gemm
