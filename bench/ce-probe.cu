// bench/ce-probe.cu — what the copy engines give the copy-engine mover of GEMM + RS / AR, measured
// without weft, in steady state: one rank's partials of the peer's rows at (4096, 14336, 4096)
// (2048 rows of 28 KiB, 56 MiB) copied GPU 0 -> 1 and 1 -> 0 at once, the whole set repeated
// back to back for ~3 ms, in the mover's chunk shapes:
//   1-D         cudaMemcpyAsync of contiguous 16 MiB / 4 MiB pieces
//   band        a band of 512 rows, every column (2-D with width == pitch: the 16 MiB chunks)
//   slab        a band of 512 rows x 14 tiles of 256 columns (7 KiB of each 28 KiB row: 4 MiB chunks)
// each alone, and as the mover issues them: cuStreamWaitValue64 (already satisfied) before each
// chunk and/or cuStreamWriteValue64 after, on 1, 2 or 4 streams taking chunks in turn (do more
// streams hide the gap between one chunk's end and the next one's start?). (The write without its
// memory barrier, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER, is refused here: CUDA_ERROR_INVALID_VALUE.)
// Standalone, one process, GPUs 0 and 1 with peer access.
//   nvcc -O2 -std=c++17 -o build/ce-probe bench/ce-probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

// One check for both APIs' status codes: the call's text and why it failed, then exit.
const char* why(cudaError_t e) { return cudaGetErrorString(e); }
const char* why(CUresult r) {
  const char* s = nullptr;
  return cuGetErrorString(r, &s) == CUDA_SUCCESS && s ? s : "unknown CUresult";
}
template <class Status>
void check(Status status, Status ok, const char* call, int line) {
  if (status == ok) return;
  std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, line, call, why(status));
  std::exit(1);
}
#define CK(x) check<cudaError_t>((x), cudaSuccess, #x, __LINE__)
#define CU(x) check<CUresult>((x), CUDA_SUCCESS, #x, __LINE__)

constexpr size_t kRows = 2048, kPitch = 14336 * 2, kBandRows = 512, kSlabBytes = 14 * 256 * 2;
constexpr size_t kBytes = kRows * kPitch;

enum class Shape { kFlat16, kFlat4, kBand, kSlab };
enum Signals { kNone = 0, kWait = 1, kWrite = 2, kBoth = 3 };

struct Side {
  int device;
  char* src;
  char* dst;        // on the other GPU
  uint64_t* word;   // local: the waits' word (holds 1) and the writes' target
  cudaStream_t streams[4];
  cudaEvent_t start, stop, joined[4];
};

Side make(int device, int peer) {
  Side s{};
  s.device = device;
  CK(cudaSetDevice(peer));
  CK(cudaMalloc(&s.dst, kBytes));
  CK(cudaSetDevice(device));
  CK(cudaMalloc(&s.src, kBytes));
  CK(cudaMemset(s.src, 1, kBytes));
  CK(cudaMalloc(&s.word, 64 * sizeof(uint64_t)));
  std::vector<uint64_t> ones(64, 1);
  CK(cudaMemcpy(s.word, ones.data(), 64 * sizeof(uint64_t), cudaMemcpyHostToDevice));
  for (auto& st : s.streams) CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CK(cudaEventCreate(&s.start));
  CK(cudaEventCreate(&s.stop));
  for (auto& e : s.joined) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return s;
}

// One set of chunks (kBytes), chunk i on stream i % streams, each wrapped in a wait and a write when
// `signals`.
void enqueue_set(Side& s, Shape shape, int streams, int signals) {
  int chunk = 0;
  auto wrap = [&](auto copy) {
    cudaStream_t st = s.streams[chunk % streams];
    if (signals & kWait) CU(cuStreamWaitValue64(st, CUdeviceptr(s.word), 1, CU_STREAM_WAIT_VALUE_GEQ));
    copy(st);
    if (signals & kWrite)
      CU(cuStreamWriteValue64(st, CUdeviceptr(s.word + 8 + chunk % 32), 1, 0));
    ++chunk;
  };
  if (shape == Shape::kFlat16 || shape == Shape::kFlat4) {
    const size_t piece = size_t(shape == Shape::kFlat16 ? 16 : 4) << 20;
    for (size_t at = 0; at < kBytes; at += piece) {
      const size_t n = std::min(piece, kBytes - at);
      wrap([&](cudaStream_t st) { CK(cudaMemcpyAsync(s.dst + at, s.src + at, n, cudaMemcpyDeviceToDevice, st)); });
    }
    return;
  }
  for (size_t row = 0; row < kRows; row += kBandRows) {
    const size_t width = shape == Shape::kBand ? kPitch : kSlabBytes;
    for (size_t col = 0; col < kPitch; col += width) {
      const size_t w = std::min(width, kPitch - col);
      wrap([&](cudaStream_t st) {
        CK(cudaMemcpy2DAsync(s.dst + row * kPitch + col, kPitch, s.src + row * kPitch + col, kPitch, w, kBandRows,
                             cudaMemcpyDeviceToDevice, st));
      });
    }
  }
}

void enqueue(Side& s, Shape shape, int streams, int signals, int reps) {
  CK(cudaSetDevice(s.device));
  CK(cudaEventRecord(s.start, s.streams[0]));
  for (int i = 1; i < streams; ++i) CK(cudaStreamWaitEvent(s.streams[i], s.start, 0));
  for (int r = 0; r < reps; ++r) enqueue_set(s, shape, streams, signals);
  for (int i = 1; i < streams; ++i) {
    CK(cudaEventRecord(s.joined[i], s.streams[i]));
    CK(cudaStreamWaitEvent(s.streams[0], s.joined[i], 0));
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
  Side a = make(0, 1), b = make(1, 0);
  constexpr int kReps = 20;  // ~3 ms at 350 GB/s
  std::printf("steady-state peer copies, both directions at once: %d x %zu MiB per direction, GB/s per direction "
              "(slower GPU, median of 5)\n", kReps, kBytes >> 20);
  std::printf("%-8s %-14s %-8s %-8s %s\n", "shape", "signals", "streams", "GB/s", "us per 56 MiB");
  const struct { int signals; const char* name; } kinds[] = {
      {kNone, "none"}, {kWait, "wait"}, {kWrite, "write"}, {kBoth, "wait+write"}};
  const struct { Shape shape; const char* name; } shapes[] = {
      {Shape::kFlat16, "1-D 16M"}, {Shape::kFlat4, "1-D 4M"}, {Shape::kBand, "band"}, {Shape::kSlab, "slab"}};
  for (const auto& sh : shapes) {
    for (const auto& kind : kinds) {
      for (int streams : {1, 2, 4}) {
        const int signals = kind.signals;
        if (signals != kBoth && streams > 1) continue;
        std::vector<float> t;
        for (int rep = 0; rep < 6; ++rep) {
          enqueue(a, sh.shape, streams, signals, kReps);
          enqueue(b, sh.shape, streams, signals, kReps);
          const float ms = std::max(elapsed(a), elapsed(b));
          if (rep > 0) t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        const float ms = t[t.size() / 2];
        std::printf("%-8s %-14s %-8d %-8.1f %.1f\n", sh.name, kind.name, streams,
                    double(kReps) * double(kBytes) / (ms * 1e6), ms * 1e3 / kReps);
      }
    }
  }
  return 0;
}
