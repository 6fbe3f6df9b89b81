// Plain GEMM instantiations with 128-column tiles.
#include "plain.cuh"

namespace weft::gemm {

cudaError_t launch_plain_n128(const PlainLaunch& l, int* ctas) { return launch_plain_width<128>(l, ctas); }

}  // namespace weft::gemm
