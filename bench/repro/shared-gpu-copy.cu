// Which engine runs a copy between two buffers of ONE device, and does it need SMs? (issue 24,
// finding 5: two ranks on one GPU, each half the SMs, deadlocked in the copy-engine all-gather at
// every shape whose grid filled its share, and passed where the grid left an SM or two idle.)
//
// Hypotheses this program tells apart, in one run of ~10-20 s:
//   H1  a same-device cudaMemcpyAsync / cudaMemcpy2DAsync runs as a kernel on SMs: with every SM
//       held by kernels that wait for it, it never starts (the holder times out); with two SMs
//       left free it completes, slowly.
//   H2  it runs on a copy engine, but a stream memory operation (cuStreamWriteValue64) behind it is
//       held back (the holder times out in the control case too, or only with two streams).
//   H3  neither: the copy and the write complete while the SMs are held (then the deadlock is
//       elsewhere: queue order, residency of the two ranks' kernels).
// A "holder" kernel fills every SM (2 CTAs of 1024 threads per SM: no warp slot is left for any other
// CTA, as with our GEMM CTAs, which take every register) and spins until a flag in device memory
// reaches 1, or 300 ms pass. On a second stream: a copy of `bytes` between two buffers of the same
// GPU, then cuStreamWriteValue64(flag, 1). The holder reports whether, and how soon, it was released.
// Cases: copy kinds (1-D, 2-D, cudaMemcpyPeerAsync to the same device, cudaMemcpyBatchAsync with
// cudaMemcpyFlagPreferOverlapWithCompute, no copy at all, and a copy to GPU 1 when there is one) x
// 64 KiB / 4 MiB / 64 MiB x the holder on every SM / leaving two SMs' worth of warps / as two kernels of half the
// SMs on two streams (two ranks). Every copy's bytes are checked afterwards.
//
//   nvcc -arch=sm_90a -O2 -std=c++17 -o /tmp/shared-gpu-copy bench/repro/shared-gpu-copy.cu \
//     && /tmp/shared-gpu-copy
// Prediction (H1): on every SM, the same-device 1-D, 2-D and peer copies are NOT released (each waits
// out the 300 ms), the no-copy control and the copy to GPU 1 are released in under 0.1 ms, and with
// two SMs free every copy is released (the copy kernel runs on the two free SMs). The batch copy with
// the overlap hint tells whether the driver can be asked for a copy engine here.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

constexpr unsigned long long kHoldNs = 300ull * 1000 * 1000;

// Every thread spins (warp slots stay taken); thread 0 polls the flag, the others its shared copy.
// result[0]: ns from the holder's start until it saw the flag (0: never); result[1]: 1 if released.
__global__ void __launch_bounds__(1024, 2) holder(const volatile unsigned long long* flag, unsigned long long* result) {
  __shared__ volatile int seen;
  if (threadIdx.x == 0) seen = 0;
  __syncthreads();
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    if (threadIdx.x == 0 && *flag >= 1) seen = 1;
    if (seen) break;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > kHoldNs) break;
    __nanosleep(1000);
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    result[0] = seen ? t - t0 : 0;
    result[1] = seen ? 1 : 0;
  }
}

__global__ void fill(unsigned* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = unsigned(i) * 2654435761u ^ seed;
}

enum Kind { kMemcpy1d, kMemcpy2d, kPeerSameDevice, kBatchOverlapHint, kNoCopy, kOtherGpu, kKinds };
const char* kKindNames[] = {"cudaMemcpyAsync D2D", "cudaMemcpy2DAsync D2D", "cudaMemcpyPeerAsync 0->0",
                            "cudaMemcpyBatchAsync + PreferOverlapWithCompute", "no copy (control)", "copy to GPU 1 (control)"};
enum Hold { kEverySm, kAllButTwo, kTwoRanks, kHolds };
const char* kHoldNames[] = {"every SM held", "2 SMs' worth of warps free", "every SM held by 2 kernels (2 ranks)"};

using WriteValue = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);

int main() {
  int devices = 0;
  CHECK(cudaGetDeviceCount(&devices));
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  int driver = 0;
  CHECK(cudaDriverGetVersion(&driver));
  std::printf("GPU 0: %s, %d SMs, driver %d, %d GPUs\n", prop.name, sms, driver, devices);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 12000, cudaEnableDefault, &q));
  const WriteValue write_value = reinterpret_cast<WriteValue>(fn);
  const bool other = devices > 1;
  if (other) {
    int can = 0;
    CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (can) (void)cudaDeviceEnablePeerAccess(1, 0);
  }

  const size_t max_bytes = size_t(64) << 20;
  unsigned *src = nullptr, *dst = nullptr, *far = nullptr;
  CHECK(cudaMalloc(&src, max_bytes));
  CHECK(cudaMalloc(&dst, max_bytes));
  if (other) {
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&far, max_bytes));
    CHECK(cudaSetDevice(0));
  }
  unsigned long long *flag = nullptr, *result = nullptr;
  CHECK(cudaMalloc(&flag, 8));
  CHECK(cudaMallocHost(&result, 4 * 8));
  cudaStream_t hold_s[2], copy_s;
  for (auto& s : hold_s) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&copy_s, cudaStreamNonBlocking));
  std::vector<unsigned> host(max_bytes / 4);

  int released_wrong = 0;
  for (int hold = 0; hold < kHolds; ++hold) {
    for (int kind = 0; kind < kKinds; ++kind) {
      if (kind == kOtherGpu && !other) continue;
      for (size_t bytes : {size_t(64) << 10, size_t(4) << 20, max_bytes}) {
        fill<<<256, 256>>>(src, bytes / 4, unsigned(bytes + kind));
        CHECK(cudaMemset(dst, 0, bytes));
        CHECK(cudaMemset(flag, 0, 8));
        std::memset(result, 0, 4 * 8);
        CHECK(cudaDeviceSynchronize());
        // The holder first, resident on its SMs before the copy is enqueued.
        const int ctas = 2 * (hold == kAllButTwo ? sms - 2 : sms);
        if (hold == kTwoRanks) {
          holder<<<ctas / 2, 1024, 0, hold_s[0]>>>(flag, result);
          holder<<<ctas - ctas / 2, 1024, 0, hold_s[1]>>>(flag, result + 2);
        } else {
          holder<<<ctas, 1024, 0, hold_s[0]>>>(flag, result);
        }
        CHECK(cudaGetLastError());
        struct timespec ts{0, 20 * 1000 * 1000};
        nanosleep(&ts, nullptr);
        unsigned* to = kind == kOtherGpu ? far : dst;
        cudaError_t e = cudaSuccess;
        switch (kind) {
          case kMemcpy1d: e = cudaMemcpyAsync(to, src, bytes, cudaMemcpyDeviceToDevice, copy_s); break;
          case kMemcpy2d: {
            const size_t pitch = 4096, rows = bytes / pitch;
            e = cudaMemcpy2DAsync(to, pitch, src, pitch, pitch, rows, cudaMemcpyDeviceToDevice, copy_s);
            break;
          }
          case kPeerSameDevice: e = cudaMemcpyPeerAsync(to, 0, src, 0, bytes, copy_s); break;
          case kBatchOverlapHint: {
            void* dsts[1] = {to};
            const void* srcs[1] = {src};
            size_t sizes[1] = {bytes};
            cudaMemcpyAttributes attr{};
            attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
            size_t idx = 0;
            e = cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &idx, 1, copy_s);
            break;
          }
          case kOtherGpu: e = cudaMemcpyPeerAsync(to, 1, src, 0, bytes, copy_s); break;
          default: break;
        }
        const char* enqueue = e == cudaSuccess ? "" : cudaGetErrorString(e);
        if (e != cudaSuccess) (void)cudaGetLastError();
        const CUresult w = write_value(reinterpret_cast<CUstream>(copy_s), reinterpret_cast<CUdeviceptr>(flag), 1, 0);
        CHECK(cudaDeviceSynchronize());
        bool ok = true;
        if (kind != kNoCopy && e == cudaSuccess) {
          if (kind == kOtherGpu) CHECK(cudaMemcpy(host.data(), far, bytes, cudaMemcpyDeviceToHost));
          else CHECK(cudaMemcpy(host.data(), dst, bytes, cudaMemcpyDeviceToHost));
          for (size_t i = 0; i < bytes / 4 && ok; ++i) ok = host[i] == (unsigned(i) * 2654435761u ^ unsigned(bytes + kind));
        }
        const bool released = result[1] == 1 && (hold != kTwoRanks || result[3] == 1);
        const double us = (hold == kTwoRanks ? std::max(result[0], result[2]) : result[0]) / 1e3;
        std::printf("%-38s %-48s %8zu KiB: %s%s%s%s\n", kHoldNames[hold], kKindNames[kind], bytes >> 10,
                    released ? "released after " : "NOT released within 300 ms (the copy waited for SMs)",
                    released ? (std::to_string(us).substr(0, 8) + " us").c_str() : "", ok ? "" : "  DATA WRONG",
                    w != CUDA_SUCCESS ? "  (cuStreamWriteValue64 failed)" : enqueue[0] ? (std::string("  enqueue: ") + enqueue).c_str() : "");
        if (!ok) ++released_wrong;
      }
    }
  }
  std::printf("%s\n", released_wrong ? "some copies moved wrong bytes" : "every copy's bytes checked");
  return released_wrong ? 1 : 0;
}
