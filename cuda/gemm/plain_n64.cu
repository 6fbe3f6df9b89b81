// Plain GEMM instantiations with 64-column tiles.
#include "plain.cuh"

namespace weft::gemm {

cudaError_t launch_plain_n64(const PlainLaunch& l, int* ctas) {
  if (l.tile.cluster_m == 1 && l.tile.cluster_n == 1) return launch_plain_shape<64, 1, 1>(l, ctas);
  if (l.tile.cluster_m == 1 && l.tile.cluster_n == 2) return launch_plain_shape<64, 1, 2>(l, ctas);
  return cudaErrorInvalidConfiguration;
}

}  // namespace weft::gemm
