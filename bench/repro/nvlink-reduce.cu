// Peer stores against peer bf16 reduce-adds over NVLink, both GPUs sending at once (bench/DECISIONS.md,
// "Partials are not added at the destination"): can the decode all-reduce's exchange add the peer's partial at the destination (TMA
// reduce-add into a zeroed out) instead of landing it in a slot and adding it locally afterwards?
// 128 CTAs each send 64 KiB (8 bulk copies of 8 KiB from shared memory: the decode M = 512 wave, 8 MiB
// per direction). Modes, per launch:
//   data     the copies only (bulk_wait at the end)
//   chain    + fence.sc.sys, a flag into the peer, and a wait for the peer's flag (the exchange's chain)
// each with plain stores (st) and with bf16 add reductions (red), to the peer and to local memory.
//   nvcc -arch=sm_90a -O3 -std=c++17 -o /tmp/nr bench/repro/nvlink-reduce.cu && /tmp/nr
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int kCtas = 128;
constexpr int kCtaBytes = 64 * 1024;
constexpr int kCopyBytes = 8 * 1024;

template <bool Reduce>
__device__ __forceinline__ void bulk(void* dst, const void* src) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(src));
  if constexpr (Reduce)
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%0], [%1], %2;"
                 ::"l"(dst), "r"(s), "r"(kCopyBytes) : "memory");
  else
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(s), "r"(kCopyBytes)
                 : "memory");
}

template <bool Reduce, bool Chain>
__global__ void send(uint8_t* dst, unsigned long long* peer_flags, unsigned long long* my_flags, unsigned long long epoch) {
  extern __shared__ __align__(128) uint8_t smem[];
  for (int i = threadIdx.x; i < kCtaBytes / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = 0x3c003c00u;  // bf16 pairs of small values
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x != 0) return;
  uint8_t* d = dst + size_t(blockIdx.x) * kCtaBytes;
  for (int i = 0; i < kCtaBytes / kCopyBytes; ++i) bulk<Reduce>(d + i * kCopyBytes, smem + i * kCopyBytes);
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  if constexpr (Chain) {
    asm volatile("fence.proxy.async.global;" ::: "memory");
    asm volatile("fence.sc.sys;" ::: "memory");
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(peer_flags + blockIdx.x * 16), "l"(epoch) : "memory");
    unsigned long long v = 0;
    long long spins = 0;
    do {
      asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(my_flags + blockIdx.x * 16) : "memory");
    } while (v < epoch && ++spins < (1ll << 26));
  }
}

struct Side {
  uint8_t* buf;                 // 8 MiB landing area in this GPU's memory
  unsigned long long* flags;    // kCtas * 16 words in this GPU's memory
  cudaStream_t stream;
  cudaEvent_t a, b;
};

template <bool Reduce, bool Chain>
void time_mode(Side (&s)[2], bool peer, const char* name, unsigned long long& epoch) {
  const int iters = 200;
  for (int g = 0; g < 2; ++g) {
    cudaSetDevice(g);
    cudaFuncSetAttribute(send<Reduce, Chain>, cudaFuncAttributeMaxDynamicSharedMemorySize, kCtaBytes);
  }
  float ms[2] = {0, 0};
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up
    for (int g = 0; g < 2; ++g) {
      cudaSetDevice(g);
      cudaEventRecord(s[g].a, s[g].stream);
    }
    for (int i = 0; i < iters; ++i) {
      ++epoch;
      for (int g = 0; g < 2; ++g) {
        const int q = peer ? 1 - g : g;
        cudaSetDevice(g);
        send<Reduce, Chain><<<kCtas, 128, kCtaBytes, s[g].stream>>>(s[q].buf, s[q].flags, s[g].flags, epoch);
      }
    }
    for (int g = 0; g < 2; ++g) {
      cudaSetDevice(g);
      cudaEventRecord(s[g].b, s[g].stream);
    }
    for (int g = 0; g < 2; ++g) {
      cudaSetDevice(g);
      cudaEventSynchronize(s[g].b);
      cudaEventElapsedTime(&ms[g], s[g].a, s[g].b);
    }
  }
  std::printf("%-6s %-10s %-5s  %7.2f / %7.2f us per launch  (%5.0f GB/s per direction)\n", peer ? "peer" : "local",
              name, Chain ? "chain" : "data", ms[0] * 1000 / iters, ms[1] * 1000 / iters,
              double(kCtas) * kCtaBytes / (ms[0] * 1e-3 / iters) / 1e9);
}


int main() {
  Side s[2];
  for (int g = 0; g < 2; ++g) {
    cudaSetDevice(g);
    cudaDeviceEnablePeerAccess(1 - g, 0);
    cudaMalloc(&s[g].buf, size_t(kCtas) * kCtaBytes);
    cudaMemset(s[g].buf, 0, size_t(kCtas) * kCtaBytes);
    cudaMalloc(&s[g].flags, kCtas * 16 * 8);
    cudaMemset(s[g].flags, 0, kCtas * 16 * 8);
    cudaStreamCreateWithFlags(&s[g].stream, cudaStreamNonBlocking);
    cudaEventCreate(&s[g].a);
    cudaEventCreate(&s[g].b);
  }
  unsigned long long epoch = 0;
  for (int round = 0; round < 2; ++round) {
    time_mode<false, false>(s, true, "st", epoch);
    time_mode<true, false>(s, true, "red.bf16", epoch);
    time_mode<false, true>(s, true, "st", epoch);
    time_mode<true, true>(s, true, "red.bf16", epoch);
  }
  // Local: what the own partial's add into a zeroed out costs (chain mode would wait on itself).
  time_mode<false, false>(s, false, "st", epoch);
  time_mode<true, false>(s, false, "red.bf16", epoch);
  for (int g = 0; g < 2; ++g) {
    cudaSetDevice(g);
    std::printf("gpu %d: %s\n", g, cudaGetErrorString(cudaDeviceSynchronize()));
  }
  return 0;
}
