// Plain GEMM instantiations with 256-column tiles.
#include "plain.cuh"

namespace weft::gemm {

cudaError_t launch_plain_n256(const PlainLaunch& l, int* ctas) { return launch_plain_width<256>(l, ctas); }

}  // namespace weft::gemm
