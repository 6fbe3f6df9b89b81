// bench/ce-probe.cu — what the copy engines give the copy-engine mover of GEMM + RS / AR, measured
// without weft: peer copies GPU 0 -> GPU 1 of the mover's chunk shape (512 rows of 8 KiB out of
// 16 KiB rows: a 4 MiB 2-D chunk, bench/NOTES-tp.md), 16 chunks (64 MiB, one rank's half of an
// 8192 x 8192 bf16 partial), against 1-D copies of the same bytes, on 1, 2 and 4 streams, in one
// direction and in both at once (AR's phase 2: each rank broadcasts while it receives).
// Standalone, one process, GPUs 0 and 1 with peer access.
//   nvcc -O2 -std=c++17 -o build/ce-probe bench/ce-probe.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

constexpr size_t kRows = 512, kWidth = 8192, kPitch = 16384, kChunks = 16;
constexpr size_t kChunkBytes = kRows * kWidth;

struct Side {
  int device;
  char* src;
  char* dst;  // on the other GPU
  std::vector<cudaStream_t> streams;
  cudaEvent_t start, stop;
};

Side make(int device, int peer, int streams) {
  Side s{};
  s.device = device;
  CK(cudaSetDevice(peer));
  CK(cudaMalloc(&s.dst, kChunks * kRows * kPitch));
  CK(cudaSetDevice(device));
  CK(cudaMalloc(&s.src, kChunks * kRows * kPitch));
  CK(cudaMemset(s.src, 1, kChunks * kRows * kPitch));
  for (int i = 0; i < streams; ++i) {
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    s.streams.push_back(st);
  }
  CK(cudaEventCreate(&s.start));
  CK(cudaEventCreate(&s.stop));
  return s;
}

// Enqueues every chunk (round robin over `streams` streams), events around them on stream 0.
void enqueue(Side& s, bool two_d, int streams) {
  CK(cudaSetDevice(s.device));
  CK(cudaEventRecord(s.start, s.streams[0]));
  for (int i = 1; i < streams; ++i) CK(cudaStreamWaitEvent(s.streams[i], s.start, 0));
  for (size_t c = 0; c < kChunks; ++c) {
    cudaStream_t st = s.streams[c % streams];
    if (two_d)
      CK(cudaMemcpy2DAsync(s.dst + c * kRows * kPitch, kPitch, s.src + c * kRows * kPitch, kPitch, kWidth, kRows,
                           cudaMemcpyDeviceToDevice, st));
    else
      CK(cudaMemcpyAsync(s.dst + c * kChunkBytes, s.src + c * kChunkBytes, kChunkBytes, cudaMemcpyDeviceToDevice, st));
  }
  for (int i = 1; i < streams; ++i) {
    cudaEvent_t e;
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaEventRecord(e, s.streams[i]));
    CK(cudaStreamWaitEvent(s.streams[0], e, 0));
    CK(cudaEventDestroy(e));
  }
  CK(cudaEventRecord(s.stop, s.streams[0]));
}

float elapsed(Side& s) {
  CK(cudaSetDevice(s.device));
  CK(cudaEventSynchronize(s.stop));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, s.start, s.stop));
  return ms;
}

int main() {
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) {
    std::printf("ce-probe needs 2 GPUs\n");
    return 1;
  }
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  Side a = make(0, 1, 4), b = make(1, 0, 4);
  std::printf("peer copies of %zu chunks x %zu KiB (64 MiB), GB/s (median of 7):\n", kChunks, kChunkBytes >> 10);
  std::printf("%-6s %-8s %-12s %-10s %s\n", "shape", "streams", "direction", "GB/s", "ms");
  for (bool two_d : {false, true}) {
    for (int streams : {1, 2, 4}) {
      for (bool both : {false, true}) {
        std::vector<float> t;
        for (int rep = 0; rep < 8; ++rep) {
          enqueue(a, two_d, streams);
          if (both) enqueue(b, two_d, streams);
          const float ms = elapsed(a);
          if (both) (void)elapsed(b);
          if (rep > 0) t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        const float ms = t[t.size() / 2];
        std::printf("%-6s %-8d %-12s %-10.1f %.4f\n", two_d ? "2-D" : "1-D", streams, both ? "both ways" : "0 -> 1",
                    double(kChunks * kChunkBytes) / (ms * 1e6), ms);
      }
    }
  }
  return 0;
}
