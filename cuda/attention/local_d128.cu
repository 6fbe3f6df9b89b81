// The single-GPU attention kernel at head dim 128.
#include "local_launch.cuh"

namespace weft::attn {

cudaError_t launch_local_d128(const LocalLaunch& l) { return launch_local_config<ConfigD128>(l); }
cudaError_t resident_local_d128(int* ctas) { return resident<ConfigD128, LocalPolicy>(ctas); }

}  // namespace weft::attn
