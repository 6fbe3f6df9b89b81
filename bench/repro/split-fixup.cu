// What joining two K-pieces of a 128 x 256 tile costs (bench/DECISIONS.md, "Decode GEMM + all-reduce
// at M = 512"): the
// decode all-reduce split into two phases (the peers' tiles first, each tile as two K-halves on two
// CTAs, so that 128 CTAs fill in each phase) has to add one piece's fp32 accumulators to the other's
// once per phase. One GPU, 128 CTAs of two consumer warpgroups (the engine's 256-wide consumers:
// 128 fp32 accumulators per thread), one CTA per SM, 400 launches back to back; us per launch, and
// the same kernel with no join subtracted. Modes:
//   none     each thread fills its accumulators and writes one checksum (the baseline)
//   pair     piece 0 (CTAs 64..127) stores its 128 KiB into a global slot (.cg), fences, raises one
//            flag per consumer; piece 1 (CTAs 0..63) waits for the flag and adds the slot
//   count    both pieces store their slot and count themselves; the second to count adds the other's
//            (gemm/tail_split.cuh's join: no wait, twice the stores)
//   dsmem    clusters of two: each CTA keeps one 128-column half and stores the other into its
//            partner's shared memory (st.shared::cluster), one cluster barrier, then adds (64 KiB a way)
//   nvcc -arch=sm_90a -O3 -std=c++17 -o /tmp/sf bench/repro/split-fixup.cu && /tmp/sf
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <cuda_runtime.h>

constexpr int kCtas = 128;
constexpr int kThreads = 256;  // two consumer warpgroups
constexpr int kAcc = 128;      // fp32 accumulators per thread (a 64 x 256 half-tile per warpgroup)
constexpr int kVec = kAcc / 4;
constexpr int kSmem = 128 * 1024;  // one CTA per SM in every mode

enum Mode { kNone, kPair, kCount, kDsmem };

__device__ __forceinline__ void fill(float (&acc)[kAcc], uint32_t seed) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = __uint_as_float(0x3f800000u | ((seed * 2654435761u + i * 40503u) & 0x7fffu));
}

__device__ __forceinline__ void bar(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

template <Mode M>
__global__ void __launch_bounds__(kThreads, 1)
    join(float4* slots, unsigned long long* flags, float* sink, unsigned long long epoch) {
  extern __shared__ __align__(16) float4 smem[];
  const int consumer = threadIdx.x / 128;
  const int th = threadIdx.x % 128;
  float acc[kAcc];
  fill(acc, blockIdx.x * kThreads + threadIdx.x);
  if constexpr (M == kPair || M == kCount) {
    const int tile = blockIdx.x % (kCtas / 2);
    const int piece = blockIdx.x / (kCtas / 2);
    // slot [tile][piece][consumer][kVec][128 threads]: a warp's stores are 512 contiguous bytes
    const auto slot = [&](int p) { return slots + ((size_t(tile) * 2 + p) * 2 + consumer) * kVec * 128 + th; };
    bool adds = true;
    if (M == kPair ? piece == 0 : true) {
      float4* mine = slot(piece);
#pragma unroll
      for (int i = 0; i < kVec; ++i) __stcg(mine + i * 128, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
      __threadfence();
      bar(1 + consumer);
    }
    unsigned long long* flag = flags + (tile * 2 + consumer) * 16;
    __shared__ int completes[2];
    if (M == kPair) {
      adds = piece == 1;
      if (piece == 0 && th == 0) asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(epoch) : "memory");
      if (piece == 1 && th == 0) {
        unsigned long long v = 0;
        long long spins = 0;
        do asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(flag) : "memory");
        while (v < epoch && ++spins < (1ll << 24));
      }
      if (piece == 1) bar(1 + consumer);
    } else {
      if (th == 0) {
        // tag << 16 | pieces counted in this launch (tail_split.cuh's count)
        const unsigned long long tag = epoch & 0xffffffffffffull;
        unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(flag), prior;
        do {
          prior = seen;
          const unsigned long long next = (prior >> 16) == tag ? prior + 1 : (tag << 16) | 1u;
          seen = atomicCAS(flag, prior, next);
        } while (seen != prior);
        completes[consumer] = (prior >> 16) == tag ? 1 : 0;
        __threadfence();
      }
      bar(1 + consumer);
      adds = completes[consumer] != 0;
    }
    if (adds) {
      const float4* theirs = slot(M == kPair ? 0 : 1 - piece);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const float4 v = __ldcg(theirs + i * 128);
        acc[4 * i] += v.x;
        acc[4 * i + 1] += v.y;
        acc[4 * i + 2] += v.z;
        acc[4 * i + 3] += v.w;
      }
    }
  } else if constexpr (M == kDsmem) {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    // Accumulator i covers columns (i / 4) * 8 + ...: the first half of acc is columns 0..127. This
    // CTA keeps half `rank` and sends the other to its partner's buffer, in this thread's order.
    const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(smem + (consumer * (kVec / 2)) * 128 + th));
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(1 - rank));
    // Compile-time accumulator indices in both branches (a run-time half index puts acc in local memory).
    const auto send = [&](auto half_tag) {
      constexpr int kHalf = decltype(half_tag)::value;
#pragma unroll
      for (int i = 0; i < kVec / 2; ++i) {
        const int j = kHalf * (kVec / 2) + i;
        asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(remote + i * 128 * 16), "f"(acc[4 * j]),
                     "f"(acc[4 * j + 1]), "f"(acc[4 * j + 2]), "f"(acc[4 * j + 3])
                     : "memory");
      }
    };
    const auto add = [&](auto half_tag) {
      constexpr int kHalf = decltype(half_tag)::value;
#pragma unroll
      for (int i = 0; i < kVec / 2; ++i) {
        const int j = kHalf * (kVec / 2) + i;
        const float4 v = smem[(consumer * (kVec / 2) + i) * 128 + th];
        acc[4 * j] += v.x;
        acc[4 * j + 1] += v.y;
        acc[4 * j + 2] += v.z;
        acc[4 * j + 3] += v.w;
      }
    };
    if (rank == 0) send(std::integral_constant<int, 1>{});
    else send(std::integral_constant<int, 0>{});
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (rank == 0) add(std::integral_constant<int, 0>{});
    else add(std::integral_constant<int, 1>{});
  }
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) sum += acc[i];
  sink[blockIdx.x * kThreads + threadIdx.x] = sum;
}

template <Mode M>
float time_us(float4* slots, unsigned long long* flags, float* sink, unsigned long long& epoch, int launches) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(kCtas);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cudaLaunchAttribute attr[1];
  if (M == kDsmem) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 20; ++i) cudaLaunchKernelEx(&cfg, join<M>, slots, flags, sink, ++epoch);
  cudaEventRecord(a);
  for (int i = 0; i < launches; ++i) cudaLaunchKernelEx(&cfg, join<M>, slots, flags, sink, ++epoch);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) std::printf("mode %d: %s\n", int(M), cudaGetErrorString(e));
  return ms * 1000.0f / launches;
}

int main() {
  float4* slots;
  unsigned long long* flags;
  float* sink;
  cudaMalloc(&slots, size_t(kCtas) * kThreads * kAcc * 4);
  cudaMalloc(&flags, size_t(kCtas) * 2 * 16 * 8);
  cudaMemset(flags, 0, size_t(kCtas) * 2 * 16 * 8);
  cudaMalloc(&sink, size_t(kCtas) * kThreads * 4);
  cudaFuncSetAttribute(join<kNone>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  cudaFuncSetAttribute(join<kPair>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  cudaFuncSetAttribute(join<kCount>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  cudaFuncSetAttribute(join<kDsmem>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  unsigned long long epoch = 0;
  constexpr int kLaunches = 400;
  std::printf("us per launch (%d launches, 128 CTAs x 256 threads, 128 fp32 per thread)\n", kLaunches);
  for (int round = 0; round < 3; ++round) {
    const float none = time_us<kNone>(slots, flags, sink, epoch, kLaunches);
    const float pair = time_us<kPair>(slots, flags, sink, epoch, kLaunches);
    const float count = time_us<kCount>(slots, flags, sink, epoch, kLaunches);
    const float dsmem = time_us<kDsmem>(slots, flags, sink, epoch, kLaunches);
    std::printf("round %d: none %.2f  pair %.2f (+%.2f)  count %.2f (+%.2f)  dsmem %.2f (+%.2f)\n", round, none, pair,
                pair - none, count, count - none, dsmem, dsmem - none);
  }
  return 0;
}
