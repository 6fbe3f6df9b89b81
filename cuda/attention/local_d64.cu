// The single-GPU attention kernel at head dim 64.
#include "local_launch.cuh"

namespace weft::attn {

cudaError_t launch_local_d64(const LocalLaunch& l) { return launch_local_config<ConfigD64>(l); }
cudaError_t resident_local_d64(int* ctas) { return resident<ConfigD64, LocalPolicy>(ctas); }

}  // namespace weft::attn
