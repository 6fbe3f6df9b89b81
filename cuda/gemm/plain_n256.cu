// Plain GEMM instantiations with 256-column tiles.
#include "plain.cuh"

namespace weft::gemm {

cudaError_t launch_plain_n256(const PlainLaunch& l, int* ctas) {
  if (l.tile.cluster_m == 1 && l.tile.cluster_n == 1) return launch_plain_shape<256, 1, 1>(l, ctas);
  if (l.tile.cluster_m == 2 && l.tile.cluster_n == 1) return launch_plain_shape<256, 2, 1>(l, ctas);
  return cudaErrorInvalidConfiguration;
}

}  // namespace weft::gemm
