// The single-GPU attention kernel at head dim 128 without a causal mask (with one: local_d128.cu).
#include "local_launch.cuh"

namespace weft::attn {

cudaError_t launch_local_d128_full(const LocalLaunch& l) { return launch_local_config<ConfigD128Full>(l); }
cudaError_t resident_local_d128_full(int* ctas) { return resident<ConfigD128Full, LocalPolicy>(ctas); }

}  // namespace weft::attn
