// Plain GEMM instantiations with 64-column tiles.
#include "plain.cuh"

namespace weft::gemm {

cudaError_t launch_plain_n64(const PlainLaunch& l, int* ctas) { return launch_plain_width<64>(l, ctas); }

}  // namespace weft::gemm
