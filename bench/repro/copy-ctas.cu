// Copy CTAs on the SMs our GEMM leaves idle (bench/DECISIONS.md, "No dedicated copy CTAs on the idle
// SMs"): does NVLink traffic that a
// few dedicated CTAs push slow our GEMM on the other SMs, the way the epilogue's own peer stores slow
// the math of the SM that issues them? Both GPUs at once: our GEMM (libweft's weft_gemm, balanced grid:
// 128 CTAs at 4096 x 14336 x 2048, so 4 SMs idle) in a loop on one stream while `ctas` push CTAs,
// launched first on another stream, copy 64 KiB groups with TMA bulk stores, into the peer or (the
// control: same SMs taken, no NVLink) into local memory. Reports our GEMM's us per launch and the
// push rate; first, the push alone at 1-32 CTAs.
//   nvcc -arch=sm_90a -O3 -std=c++17 -I ffi/include -o /tmp/cc bench/repro/copy-ctas.cu -L build -lweft \
//     -Xlinker -rpath -Xlinker $PWD/build && /tmp/cc
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "weft.h"

constexpr int kGroupBytes = 64 * 1024;
constexpr int kCopyBytes = 8 * 1024;

__global__ void push(uint8_t* dst, size_t bytes_per_cta, int inflight) {
  extern __shared__ __align__(128) uint8_t smem[];
  for (int i = threadIdx.x; i < kGroupBytes / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = 0x3c003c00u;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x != 0) return;
  uint8_t* d = dst + size_t(blockIdx.x) * bytes_per_cta;
  for (size_t g = 0; g < bytes_per_cta / kGroupBytes; ++g) {
    for (int i = 0; i < kGroupBytes / kCopyBytes; ++i) {
      const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem + i * kCopyBytes));
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(d + g * kGroupBytes + i * kCopyBytes),
                   "r"(s), "r"(kCopyBytes) : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (inflight <= 2) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    else asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void fill(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = uint16_t(0x3c00 | (x & 0x03ff)) ^ uint16_t((x >> 16) & 0x8000);  // bf16 in +-[1, 2)
  }
}

struct Gpu {
  uint16_t *a, *b, *c;
  uint8_t *landing, *local;
  cudaStream_t gemm, side;
  cudaEvent_t g0, g1, p0, p1;
};

constexpr int64_t M = 4096, N = 14336, K = 2048;
constexpr size_t kPushBytes = size_t(3) << 30;  // outlasts the GEMM loop (~7 ms) at up to ~450 GB/s

int main() {
  Gpu g[2];
  // With one GPU, "the peer" is another buffer of the same GPU (no NVLink): a bound on what the push
  // CTAs and the GEMM do to each other through HBM alone.
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  gpus = gpus >= 2 ? 2 : 1;
  const auto peer = [&](int d) { return (d + 1) % gpus; };
  for (int d = 0; d < gpus; ++d) {
    cudaSetDevice(d);
    if (gpus == 2) cudaDeviceEnablePeerAccess(1 - d, 0);
    cudaMalloc(&g[d].a, M * K * 2);
    cudaMalloc(&g[d].b, K * N * 2);
    cudaMalloc(&g[d].c, M * N * 2);
    cudaMalloc(&g[d].landing, kPushBytes);
    cudaMalloc(&g[d].local, kPushBytes);
    fill<<<264, 256>>>(g[d].a, M * K, 1 + d);
    fill<<<264, 256>>>(g[d].b, K * N, 7 + d);
    cudaStreamCreateWithFlags(&g[d].gemm, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&g[d].side, cudaStreamNonBlocking);
    cudaEventCreate(&g[d].g0);
    cudaEventCreate(&g[d].g1);
    cudaEventCreate(&g[d].p0);
    cudaEventCreate(&g[d].p1);
    cudaFuncSetAttribute(push, cudaFuncAttributeMaxDynamicSharedMemorySize, kGroupBytes);
    cudaDeviceSynchronize();
  }
  const auto gemm = [&](int d) {
    WeftGemmParams p = WEFT_GEMM_PARAMS_INIT;
    p.a = reinterpret_cast<uint64_t>(g[d].a);
    p.b = reinterpret_cast<uint64_t>(g[d].b);
    p.c = reinterpret_cast<uint64_t>(g[d].c);
    p.m = M, p.n = N, p.k = K;
    p.lda = K, p.ldb = N, p.ldc = N;
    p.stream = reinterpret_cast<uint64_t>(g[d].gemm);
    if (weft_gemm(&p, nullptr) != WEFT_OK) std::printf("weft_gemm: %s\n", weft_last_error());
  };
  // The push alone: how many CTAs fill the link (512 MiB per direction, both directions at once).
  for (int ctas : {1, 2, 4, 8, 16, 32}) {
    for (int inflight : {2, 4}) {
      float us[2] = {};
      const size_t bytes = size_t(512) << 20;
      for (int pass = 0; pass < 2; ++pass) {
        for (int d = 0; d < gpus; ++d) {
          cudaSetDevice(d);
          cudaEventRecord(g[d].p0, g[d].side);
          push<<<ctas, 32, kGroupBytes, g[d].side>>>(g[peer(d)].landing, bytes / ctas, inflight);
          cudaEventRecord(g[d].p1, g[d].side);
        }
        for (int d = 0; d < gpus; ++d) {
          cudaSetDevice(d);
          cudaEventSynchronize(g[d].p1);
          float ms = 0;
          cudaEventElapsedTime(&ms, g[d].p0, g[d].p1);
          us[d] = ms * 1000;
        }
      }
      std::printf("push alone, %2d CTAs, %3d KiB in flight each: %5.0f / %5.0f GB/s per direction\n", ctas, inflight * 64,
                  double(bytes) / (us[0] * 1e3), double(bytes) / (us[1] * 1e3));
    }
  }
  const int iters = 20;
  // mode 0: GEMM alone; 1: push into local memory beside it; 2: push into the peer beside it.
  for (int ctas : {4, 2}) {
    for (int inflight : {2, 4}) {
      for (int mode = 0; mode < 3; ++mode) {
        float gemm_us[2] = {}, push_us[2] = {};
        for (int pass = 0; pass < 2; ++pass) {
          for (int d = 0; d < gpus; ++d) {
            cudaSetDevice(d);
            cudaDeviceSynchronize();
          }
          for (int d = 0; d < gpus; ++d) {
            cudaSetDevice(d);
            if (mode > 0) {
              cudaEventRecord(g[d].p0, g[d].side);
              push<<<ctas, 32, kGroupBytes, g[d].side>>>(mode == 2 ? g[peer(d)].landing : g[d].local, kPushBytes / ctas, inflight);
              cudaEventRecord(g[d].p1, g[d].side);
            }
          }
          for (int d = 0; d < gpus; ++d) {
            cudaSetDevice(d);
            gemm(d);  // one untimed launch: the push CTAs are resident by the timed ones
            cudaEventRecord(g[d].g0, g[d].gemm);
            for (int i = 0; i < iters; ++i) gemm(d);
            cudaEventRecord(g[d].g1, g[d].gemm);
          }
          for (int d = 0; d < gpus; ++d) {
            cudaSetDevice(d);
            cudaDeviceSynchronize();
            float ms = 0;
            cudaEventElapsedTime(&ms, g[d].g0, g[d].g1);
            gemm_us[d] = ms * 1000 / iters;
            if (mode > 0) {
              cudaEventElapsedTime(&ms, g[d].p0, g[d].p1);
              push_us[d] = ms * 1000;
            }
          }
        }
        const char* names[] = {"alone", "push local", "push peer"};
        std::printf("ctas %d inflight %d %-10s: gemm %7.1f / %7.1f us", ctas, inflight * 64, names[mode], gemm_us[0], gemm_us[1]);
        if (mode > 0)
          std::printf("   push %6.0f / %6.0f GB/s (whole push, %.0f us)", double(kPushBytes) / (push_us[0] * 1e3),
                      double(kPushBytes) / (push_us[1] * 1e3), push_us[0]);
        std::printf("\n");
      }
    }
  }
  for (int d = 0; d < gpus; ++d) {
    cudaSetDevice(d);
    std::printf("gpu %d: %s\n", d, cudaGetErrorString(cudaDeviceSynchronize()));
  }
  return 0;
}
