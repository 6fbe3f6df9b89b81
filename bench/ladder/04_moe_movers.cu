// 04_moe_movers.cu — ladder experiment: which mover should carry MoE dispatch rows (issue 26,
// "measure the movers"). Rows of H = 7168 bf16 (14 KiB) gathered from a token buffer into an
// expert-contiguous receive buffer, on this GPU or (with two GPUs and peer access) into the other
// GPU's memory, by:
//   1  SM stores   a warp per row, 16-byte loads and stores (cuda/moe/peer.cuh's warp_copy_row), a
//                  red.release.sys arrival count per `rows_per_signal` rows, as the dispatch does
//   2  SM stores without the arrival counts (what the counters cost)
//   3  copy engine one cudaMemcpyAsync per contiguous run of `run` rows (the host enqueues them all)
//   4  TMA bulk    one thread per row issues cp.async.bulk global -> shared -> global (16 KiB of
//                  shared memory per row in flight, two per CTA)
// Each variant is checked (every destination row compared with its source on the host) and timed
// with CUDA events over 10 repeats (median); GB/s = rows x 14 KiB / time.
//
//   bash .gpu/enter.sh bash bench/gpu-host.sh ladder/04_moe_movers.cu     (or nvcc -arch=sm_90a -O3 -std=c++17 ...)
//
// Napkin: 32768 rows (config A, T 4096 x k 8) are 470 MB: 0.16 ms at 3 TB/s of local copy (read +
// write), 1.5 ms at 310 GB/s over NVLink; the GEMM they feed takes ~1.26 ms.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

constexpr int kH = 7168;
constexpr int kRowBytes = kH * 2;
constexpr int kThreads = 512;

__device__ __forceinline__ uint4 ld_nc16(const char* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void st16(char* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// 1 and 2: warp w of CTA c moves rows chunk by chunk (rows_per_signal rows each), gathered by `src_row`.
__global__ void __launch_bounds__(kThreads, 1) sm_rows(const char* src, char* dst, const int* src_row, int rows,
                                                       int rows_per_signal, unsigned long long* counter) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (kThreads / 32), warp = blockIdx.x * (kThreads / 32) + (threadIdx.x >> 5);
  for (int c0 = warp * rows_per_signal; c0 < rows; c0 += warps * rows_per_signal) {
    const int n = min(rows_per_signal, rows - c0);
    for (int i = 0; i < n; ++i) {
      const char* s = src + uint64_t(src_row[c0 + i]) * kRowBytes;
      char* d = dst + uint64_t(c0 + i) * kRowBytes;
      for (int v = lane; v < kRowBytes / 16; v += 32 * 4) {
        uint4 r[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (v + 32 * u < kRowBytes / 16) r[u] = ld_nc16(s + uint64_t(v + 32 * u) * 16);
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (v + 32 * u < kRowBytes / 16) st16(d + uint64_t(v + 32 * u) * 16, r[u]);
      }
    }
    __syncwarp();
    if (counter && lane == 0) asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(counter), "l"((unsigned long long)n) : "memory");
  }
}

// 4: one thread per row in flight, two rows per CTA (2 x 14 KiB of shared memory), bulk copies.
__global__ void __launch_bounds__(64, 1) tma_rows(const char* src, char* dst, const int* src_row, int rows) {
  extern __shared__ __align__(128) unsigned char buf[];
  __shared__ __align__(8) uint64_t bar[2];
  const int slot = threadIdx.x / 32;
  if (threadIdx.x % 32 != 0) return;
  unsigned char* mine = buf + slot * kRowBytes;
  const uint32_t smem = uint32_t(__cvta_generic_to_shared(mine));
  const uint32_t mbar = uint32_t(__cvta_generic_to_shared(&bar[slot]));
  asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(mbar));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  uint32_t phase = 0;
  for (int r = blockIdx.x * 2 + slot; r < rows; r += gridDim.x * 2) {
    const char* s = src + uint64_t(src_row[r]) * kRowBytes;
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(mbar), "r"(kRowBytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem), "l"(s),
                 "r"(kRowBytes), "r"(mbar)
                 : "memory");
    asm volatile(
        "{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }" ::"r"(mbar), "r"(phase) : "memory");
    phase ^= 1;
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + uint64_t(r) * kRowBytes), "r"(smem),
                 "r"(kRowBytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

struct Setup {
  int rows, dst_device;
  char *src, *dst;
  int* src_row;
  std::vector<int> host_src_row;
};

bool check(const Setup& s, const std::vector<uint16_t>& host_src) {
  std::vector<uint16_t> got(size_t(s.rows) * kH);
  CHECK(cudaMemcpy(got.data(), s.dst, got.size() * 2, cudaMemcpyDefault));
  for (int r = 0; r < s.rows; ++r)
    if (std::memcmp(&got[size_t(r) * kH], &host_src[size_t(s.host_src_row[r]) * kH], kRowBytes) != 0) return false;
  return true;
}

template <class F>
float median_ms(F&& run) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  run();  // warm-up
  for (int i = 0; i < 10; ++i) {
    CHECK(cudaEventRecord(a));
    run();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  int devices = 0;
  CHECK(cudaGetDeviceCount(&devices));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int rows = 32768, tokens = 4096;
  int peer_ok = 0;
  if (devices > 1) CHECK(cudaDeviceCanAccessPeer(&peer_ok, 0, 1));
  std::printf("GPUs %d, SMs %d, rows %d x %d B; destinations: this GPU%s\n", devices, sms, rows, kRowBytes,
              peer_ok ? " and GPU 1 (peer)" : "");
  if (peer_ok) CHECK(cudaDeviceEnablePeerAccess(1, 0));
  std::vector<uint16_t> host_src(size_t(tokens) * kH);
  std::mt19937 gen(7);
  for (auto& v : host_src) v = uint16_t(gen());
  std::printf("| variant | destination | CTAs | rows per signal or run | ms | GB/s | check |\n|---|---|---:|---:|---:|---:|---|\n");
  for (int dest = 0; dest < (peer_ok ? 2 : 1); ++dest) {
    Setup s{rows, dest, nullptr, nullptr, nullptr, {}};
    CHECK(cudaMalloc(&s.src, host_src.size() * 2));
    CHECK(cudaMemcpy(s.src, host_src.data(), host_src.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaSetDevice(dest));
    CHECK(cudaMalloc(&s.dst, size_t(rows) * kRowBytes));
    CHECK(cudaSetDevice(0));
    // The gather a dispatch does: destination row i comes from token src_row[i] (each token k times).
    s.host_src_row.resize(rows);
    for (int i = 0; i < rows; ++i) s.host_src_row[i] = int(gen() % tokens);
    CHECK(cudaMalloc(&s.src_row, rows * 4));
    CHECK(cudaMemcpy(s.src_row, s.host_src_row.data(), rows * 4, cudaMemcpyHostToDevice));
    unsigned long long* counter = nullptr;
    CHECK(cudaMalloc(&counter, 8));
    const char* where = dest == 0 ? "local" : "peer";
    auto report = [&](const char* v, int ctas, int per, float ms) {
      const bool ok = check(s, host_src);
      CHECK(cudaMemset(s.dst, 0, size_t(rows) * kRowBytes));
      std::printf("| %s | %s | %d | %d | %.3f | %.0f | %s |\n", v, where, ctas, per, ms, double(rows) * kRowBytes / (ms * 1e6),
                  ok ? "ok" : "WRONG");
    };
    for (int ctas : {16, 32, 66, sms}) {
      for (int per : {1, 2, 8}) {
        const float ms = median_ms([&] { sm_rows<<<ctas, kThreads>>>(s.src, s.dst, s.src_row, rows, per, counter); });
        CHECK(cudaGetLastError());
        report("1 SM stores + counts", ctas, per, ms);
      }
      const float ms = median_ms([&] { sm_rows<<<ctas, kThreads>>>(s.src, s.dst, s.src_row, rows, 2, nullptr); });
      report("2 SM stores, no counts", ctas, 2, ms);
    }
    // Copy engine: runs of `run` consecutive destination rows from consecutive source rows (the
    // gather above has no such runs, so this variant copies a contiguous permutation of runs).
    for (int run : {1, 8, 64, 512}) {
      std::vector<int> runs(rows / run);
      for (size_t i = 0; i < runs.size(); ++i) runs[i] = int(gen() % (tokens / run));
      for (int i = 0; i < rows; ++i) s.host_src_row[i] = runs[i / run] * run + i % run;
      const float ms = median_ms([&] {
        for (size_t i = 0; i < runs.size(); ++i)
          CHECK(cudaMemcpyAsync(s.dst + uint64_t(i) * run * kRowBytes, s.src + uint64_t(runs[i]) * run * kRowBytes,
                                size_t(run) * kRowBytes, cudaMemcpyDefault));
      });
      report("3 copy engine", 0, run, ms);
    }
    CHECK(cudaMemcpy(s.src_row, s.host_src_row.data(), rows * 4, cudaMemcpyHostToDevice));
    CHECK(cudaFuncSetAttribute(tma_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * kRowBytes));
    for (int ctas : {32, sms}) {
      const float ms = median_ms([&] { tma_rows<<<ctas, 64, 2 * kRowBytes>>>(s.src, s.dst, s.src_row, rows); });
      CHECK(cudaGetLastError());
      report("4 TMA bulk", ctas, 1, ms);
    }
    CHECK(cudaFree(counter));
    CHECK(cudaFree(s.src_row));
    CHECK(cudaFree(s.dst));
    CHECK(cudaFree(s.src));
  }
  return 0;
}
