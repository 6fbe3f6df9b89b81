#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "accumulate.h"
#include "weft.h"

namespace weft::kernels {

namespace {

template <typename T>
__global__ void accumulate_kernel(float* acc, const T* src, uint64_t count) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    acc[i] += float(src[i]);
}

}  // namespace

// Loads the three instantiations (fill.h's preload_tensor_kernels() says why).
cudaError_t accumulate_preload() {
  cudaFuncAttributes attr{};
  const void* kernels[] = {reinterpret_cast<const void*>(accumulate_kernel<__nv_bfloat16>),
                           reinterpret_cast<const void*>(accumulate_kernel<__half>),
                           reinterpret_cast<const void*>(accumulate_kernel<float>)};
  for (const void* k : kernels) {
    const cudaError_t e = cudaFuncGetAttributes(&attr, k);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t accumulate(float* acc, const void* src, int src_dtype, uint64_t count, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const uint64_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
  switch (src_dtype) {
    case WEFT_BF16: accumulate_kernel<<<grid, kThreads, 0, stream>>>(acc, static_cast<const __nv_bfloat16*>(src), count); break;
    case WEFT_F16: accumulate_kernel<<<grid, kThreads, 0, stream>>>(acc, static_cast<const __half*>(src), count); break;
    default: accumulate_kernel<<<grid, kThreads, 0, stream>>>(acc, static_cast<const float*>(src), count); break;
  }
  return cudaGetLastError();
}

}  // namespace weft::kernels
