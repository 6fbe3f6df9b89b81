// fill.h — element-wise device kernels that the tensor layer and the tests use: pattern fills
// (NaN poison), deterministic random data, and fp64 error norms for checking results on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace weft::kernels {

cudaError_t fill_pattern(void* dst, uint64_t count, int elem_bytes, uint64_t pattern,
                         cudaStream_t stream);

// dtype is a WeftDtype (WEFT_BF16, WEFT_F16, WEFT_F32).
cudaError_t fill_random(void* dst, int dtype, uint64_t count, uint64_t seed, float lo, float hi,
                        cudaStream_t stream);

// out[0] += sum((a-b)^2), out[1] += sum(b^2), out[2] += #non-finite a; out must be zeroed first.
cudaError_t diff_norms(const void* a, int a_dtype, const void* b, int b_dtype, uint64_t count,
                       double* out, cudaStream_t stream);

// Loads every kernel of this file and of accumulate.cu now (CUDA loads kernels lazily, at their first
// launch, and such a load waits for the kernels already running on the device). A communicator calls
// it when it connects: several ranks driven from one process launch their fused kernels one after
// another, and a first fill or check launched on rank 0's stream between them would wait for rank 0's
// kernel, which waits for rank 1's, never launched (bench/DECISIONS.md, "Every kernel a rank may launch
// between its peers' launches is loaded when the communicator connects").
cudaError_t preload_tensor_kernels();

}  // namespace weft::kernels
