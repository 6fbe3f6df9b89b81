// bench/latency-probe.cu — the floors under a small awaited collective, measured without weft:
//   1. host cost of one launch of a 1-CTA, 512-thread kernel with a 320-byte parameter
//      (the size of weft's collective Args): cudaLaunchKernel against cuLaunchKernel;
//   2. launch to host-seen: the kernel's one thread publishes a sequence number into pinned,
//      host-mapped memory (st.release.sys) and the host spins on it; minus (1) that is the GPU's
//      start latency plus the PCIe write;
//   3. NVLink signal latency: one thread on each of two GPUs ping-pongs an epoch flag in the other's
//      memory (st.release.sys / ld.acquire.sys), and the same after each side first stores 8 KiB
//      into the peer with 512 threads (the staged all-reduce's push + release).
// Standalone (cudart static; the driver through cudaGetDriverEntryPoint), one process, GPU 0 (+1).
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o build/latency-probe bench/latency-probe.cu
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

struct Param {
  unsigned long long* flag;
  unsigned long long seq;
  char pad[320 - 16];
};

__global__ void __launch_bounds__(512, 1) publish(const __grid_constant__ Param p) {
  __syncthreads();
  if (threadIdx.x == 0 && p.flag)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p.flag), "l"(p.seq) : "memory");
}

struct SmallParam {
  unsigned long long* flag;
  unsigned long long seq;
};

__global__ void __launch_bounds__(512, 1) publish_small(const __grid_constant__ SmallParam p) {
  __syncthreads();
  if (threadIdx.x == 0 && p.flag)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p.flag), "l"(p.seq) : "memory");
}

__device__ __forceinline__ unsigned long long ld_acq(const unsigned long long* a) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(a) : "memory");
  return v;
}

// Rounds of: (all threads store `bytes` to the peer), barrier, thread 0 releases flag = round on
// the peer, waits for its own flag (written by the peer) to reach round. Rank 0 starts each round,
// rank 1 answers, so a round is two one-way trips. Writes the elapsed globaltimer ns to *out.
__global__ void __launch_bounds__(512, 1) pingpong(unsigned long long* mine, unsigned long long* theirs, uint4* peer_data,
                                                   int bytes, int rounds, int rank, unsigned long long* out) {
  const unsigned long long t0 = [] { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }();
  for (int r = 1; r <= rounds; ++r) {
    if (rank == 1 && threadIdx.x == 0)
      while (ld_acq(mine) < (unsigned long long)r) {}
    __syncthreads();
    for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) peer_data[i] = make_uint4(r, r, r, r);
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(theirs), "l"((unsigned long long)r) : "memory");
      if (rank == 0)
        while (ld_acq(mine) < (unsigned long long)r) {}
    }
    __syncthreads();
  }
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  if (threadIdx.x == 0) *out = t1 - t0;
}

static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void report(const char* name, std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  std::printf("%-44s p50 %7.2f us  p99 %7.2f us  min %7.2f us  (%zu)\n", name, v[v.size() / 2], v[v.size() * 99 / 100], v[0], v.size());
}

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 4000, cudaEnableDefault, &q));
  auto cuLaunch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(fn);
  cudaFunction_t f = nullptr;
  CK(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(&publish)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned long long* host = nullptr;
  CK(cudaHostAlloc(&host, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  unsigned long long* hostDev = nullptr;
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hostDev), host, 0));
  *host = 0;

  Param p{};
  void* params[] = {&p};
  auto launch = [&](bool driver) -> int {
    if (driver) return int(cuLaunch(reinterpret_cast<CUfunction>(f), 1, 1, 1, 512, 1, 1, 0, reinterpret_cast<CUstream>(s), params, nullptr));
    return int(cudaLaunchKernel(reinterpret_cast<const void*>(&publish), dim3(1), dim3(512), params, 0, s));
  };
  // 1 + 2, interleaved in blocks of 200.
  std::vector<double> api[2], seen[2], seenAfter[2];
  unsigned long long seq = 0;
  for (int warm = 0; warm < 2000; ++warm) launch(warm & 1);
  CK(cudaStreamSynchronize(s));
  for (int round = 0; round < 10; ++round) {
    for (int driver = 0; driver < 2; ++driver) {
      p.flag = nullptr;
      for (int i = 0; i < 200; ++i) {
        const double t0 = now_us();
        if (launch(driver)) return 2;
        api[driver].push_back(now_us() - t0);
        if (i % 20 == 19) CK(cudaStreamSynchronize(s));
      }
      CK(cudaStreamSynchronize(s));
      p.flag = hostDev;
      for (int i = 0; i < 200; ++i) {
        p.seq = ++seq;
        const double t0 = now_us();
        if (launch(driver)) return 2;
        const double t1 = now_us();
        while (reinterpret_cast<volatile unsigned long long*>(host)[0] < seq) {}
        const double t2 = now_us();
        seen[driver].push_back(t2 - t0);
        seenAfter[driver].push_back(t2 - t1);
      }
      CK(cudaStreamSynchronize(s));
    }
  }
  // A one-kernel CUDA graph, launched: the other submission path. Its parameters are fixed, so the
  // kernel publishes a constant and the host clears the word before each launch.
  {
    p.flag = hostDev;
    p.seq = 1;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (launch(false)) return 2;
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    std::vector<double> graph, graphSeen, graphAfter;
    for (int i = 0; i < 2200; ++i) {
      host[0] = 0;
      const double t0 = now_us();
      CK(cudaGraphLaunch(ge, s));
      const double t1 = now_us();
      while (reinterpret_cast<volatile unsigned long long*>(host)[0] < 1) {}
      const double t2 = now_us();
      if (i >= 200) {
        graph.push_back(t1 - t0);
        graphSeen.push_back(t2 - t0);
        graphAfter.push_back(t2 - t1);
      }
    }
    CK(cudaStreamSynchronize(s));
    report("launch call, cudaGraphLaunch (1 kernel)", graph);
    report("launch to host-seen, cudaGraphLaunch", graphSeen);
    report("launch returned to host-seen, cudaGraphLaunch", graphAfter);
  }
  // Parameter size: the same kernel with a 16-byte parameter, through the driver.
  {
    cudaFunction_t fs = nullptr;
    CK(cudaGetFuncBySymbol(&fs, reinterpret_cast<const void*>(&publish_small)));
    SmallParam sp{hostDev, 0};
    void* sparams[] = {&sp};
    std::vector<double> call, seenAll;
    for (int i = 0; i < 2200; ++i) {
      sp.seq = ++seq;
      const double t0 = now_us();
      if (cuLaunch(reinterpret_cast<CUfunction>(fs), 1, 1, 1, 512, 1, 1, 0, reinterpret_cast<CUstream>(s), sparams, nullptr)) return 2;
      const double t1 = now_us();
      while (reinterpret_cast<volatile unsigned long long*>(host)[0] < seq) {}
      if (i >= 200) {
        call.push_back(t1 - t0);
        seenAll.push_back(now_us() - t0);
      }
    }
    report("launch call, cuLaunchKernel, 16-byte param", call);
    report("launch to host-seen, cuLaunchKernel, 16-byte param", seenAll);
  }
  // What a DeviceGuard costs when the caller's current device is another one (rank 1 of a
  // process per GPU: weft_collective sets device 1 and restores 0 around every launch).
  {
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    std::vector<double> flip;
    for (int i = 0; i < 2000 && n > 1; ++i) {
      const double t0 = now_us();
      int cur = -1;
      CK(cudaGetDevice(&cur));
      CK(cudaSetDevice(1));
      CK(cudaGetDevice(&cur));
      CK(cudaSetDevice(0));
      flip.push_back(now_us() - t0);
    }
    if (!flip.empty()) report("cudaGetDevice+SetDevice(1), then back to 0", flip);
  }
  report("launch call, cudaLaunchKernel", api[0]);
  report("launch call, cuLaunchKernel", api[1]);
  report("launch to host-seen, cudaLaunchKernel", seen[0]);
  report("launch to host-seen, cuLaunchKernel", seen[1]);
  report("launch returned to host-seen, cudaLaunchKernel", seenAfter[0]);
  report("launch returned to host-seen, cuLaunchKernel", seenAfter[1]);

  // 3. NVLink ping-pong between GPUs 0 and 1.
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) return 0;
  unsigned long long* flag[2];
  uint4* data[2];
  unsigned long long* out[2];
  cudaStream_t st[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    cudaError_t e = cudaDeviceEnablePeerAccess(1 - d, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
    (void)cudaGetLastError();
    CK(cudaMalloc(&flag[d], 8));
    CK(cudaMalloc(&data[d], 8192));
    CK(cudaMallocManaged(&out[d], 8));
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
  }
  const int rounds = 2000;
  for (int bytes : {0, 8192}) {
    std::vector<double> oneway;
    for (int rep = 0; rep < 5; ++rep) {
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaMemset(flag[d], 0, 8));
        CK(cudaDeviceSynchronize());
      }
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        pingpong<<<1, 512, 0, st[d]>>>(flag[d], flag[1 - d], data[1 - d], bytes, rounds, d, out[d]);
        CK(cudaGetLastError());
      }
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaStreamSynchronize(st[d]));
      }
      oneway.push_back(double(*out[0]) / 1000.0 / (2.0 * rounds));
    }
    report(bytes ? "NVLink one-way, 8 KiB stores + release flag" : "NVLink one-way, release flag only", oneway);
  }
  return 0;
}
