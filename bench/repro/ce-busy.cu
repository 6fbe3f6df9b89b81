// Does a 2-D peer copy on a side stream run at full speed while a persistent kernel holds every SM?
// (Yes, 16 us for 3.9 MiB either way: bench/DECISIONS.md, "The first wave of a two-wave exchange
// goes by copy engine".)
//   nvcc -arch=sm_90a -O2 -o /tmp/ce-busy bench/repro/ce-busy.cu && /tmp/ce-busy
// GPU 0: a kernel of 132 x 1 CTAs spinning ~200 us; meanwhile on another stream a copy GPU0 -> GPU1
// (2-D: 512 rows x 7936 B of a 16 KiB pitch, and 1-D: the same bytes); events time the copy.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void spin(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > ns) break;
  }
}

int main() {
  const size_t rows = 512, width = 7936, pitch = 16384;
  char *src, *dst;
  cudaSetDevice(1);
  cudaMalloc(&dst, rows * pitch);
  cudaSetDevice(0);
  cudaDeviceEnablePeerAccess(1, 0);
  cudaMalloc(&src, rows * pitch);
  cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  cudaStream_t main_s, side;
  cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  cudaEvent_t a, b, k0, k1;
  cudaEventCreate(&a); cudaEventCreate(&b); cudaEventCreate(&k0); cudaEventCreate(&k1);
  for (int mode = 0; mode < 4; ++mode) {
    const bool busy = mode >= 2, two_d = mode % 2 == 0;
    for (int rep = 0; rep < 3; ++rep) {
      cudaEventRecord(k0, main_s);
      if (busy) spin<<<132, 128, 200 * 1024, main_s>>>(200000);
      cudaEventRecord(k1, main_s);
      cudaEventRecord(a, side);
      if (two_d) cudaMemcpy2DAsync(dst, pitch, src, pitch, width, rows, cudaMemcpyDeviceToDevice, side);
      else cudaMemcpyAsync(dst, src, rows * width, cudaMemcpyDeviceToDevice, side);
      cudaEventRecord(b, side);
      cudaDeviceSynchronize();
      float ms = 0, kms = 0;
      cudaEventElapsedTime(&ms, a, b);
      cudaEventElapsedTime(&kms, k0, k1);
      std::printf("%s copy, %s: %.1f us (kernel %.1f us)\n", two_d ? "2-D" : "1-D", busy ? "SMs busy" : "SMs idle", ms * 1000, kms * 1000);
    }
  }
  std::printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
