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

}  // namespace weft::kernels
