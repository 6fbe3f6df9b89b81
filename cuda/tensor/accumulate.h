// accumulate.h — acc[i] += float(src[i]): the deliberately simple fp32 reference that tests sum
// collective results against (one rank's input at a time, in rank order).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace weft::kernels {

// src_dtype is a WeftDtype (bf16, f16, f32).
cudaError_t accumulate(float* acc, const void* src, int src_dtype, uint64_t count, cudaStream_t stream);

// Loads its kernels now (fill.h's preload_tensor_kernels() calls it and says why).
cudaError_t accumulate_preload();

}  // namespace weft::kernels
