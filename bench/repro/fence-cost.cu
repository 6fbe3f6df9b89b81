// The cost of a fence between a data store and its flag, by fence kind and scope (bench/DECISIONS.md,
// "One system fence per flag"). 132 CTAs; thread 0 of each stores 16 bytes (to local or peer memory), fences, stores a
// flag, 2000 times.   nvcc -arch=sm_90a -O3 -o /tmp/fc bench/repro/fence-cost.cu && /tmp/fc
#include <cstdio>
#include <cuda_runtime.h>

template <int Kind>
__device__ __forceinline__ void fence() {
  if constexpr (Kind == 1) asm volatile("fence.sc.sys;" ::: "memory");
  if constexpr (Kind == 2) asm volatile("fence.acq_rel.sys;" ::: "memory");
  if constexpr (Kind == 3) asm volatile("fence.sc.gpu;" ::: "memory");
  if constexpr (Kind == 4) asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

template <int Kind>
__global__ void k(uint4* data, unsigned long long* flags, int iters) {
  if (threadIdx.x != 0) return;
  uint4* d = data + blockIdx.x * 64;
  unsigned long long* f = flags + blockIdx.x * 16;
  for (int i = 0; i < iters; ++i) {
    d[i & 63] = make_uint4(i, i, i, i);
    fence<Kind>();
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(f), "l"((unsigned long long)i) : "memory");
  }
}

template <int Kind>
float run(uint4* data, unsigned long long* flags, int iters) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  k<Kind><<<132, 128>>>(data, flags, iters);
  cudaEventRecord(a);
  k<Kind><<<132, 128>>>(data, flags, iters);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms * 1000.0f / iters;
}

int main() {
  const char* names[] = {"none", "fence.sc.sys", "fence.acq_rel.sys", "fence.sc.gpu", "fence.acq_rel.gpu"};
  for (int peer = 0; peer < 2; ++peer) {
    cudaSetDevice(0);
    uint4* data = nullptr;
    unsigned long long* flags = nullptr;
    if (peer) {
      cudaDeviceEnablePeerAccess(1, 0);
      cudaSetDevice(1);
      cudaMalloc(&data, 132 * 64 * sizeof(uint4));
      cudaMalloc(&flags, 132 * 16 * 8);
      cudaSetDevice(0);
    } else {
      cudaMalloc(&data, 132 * 64 * sizeof(uint4));
      cudaMalloc(&flags, 132 * 16 * 8);
    }
    const int iters = 2000;
    float us[5] = {run<0>(data, flags, iters), run<1>(data, flags, iters), run<2>(data, flags, iters),
                   run<3>(data, flags, iters), run<4>(data, flags, iters)};
    for (int i = 0; i < 5; ++i) std::printf("%s stores, %-18s %.3f us per store+fence+flag\n", peer ? "peer " : "local", names[i], us[i]);
  }
  std::printf("%s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
