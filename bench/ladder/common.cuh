// common.cuh — what every bench/ladder program shares: status checks, tensor maps, fresh random
// bf16 data, a deliberately simple fp32 reference GEMM, an every-element validator and CUDA-event
// timing. Standalone: it needs the CUDA runtime only (the driver's cuTensorMapEncodeTiled comes
// through cudaGetDriverEntryPointByVersion, as in the library), never libweft.so.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "gemm/gemm.h"
#include "gemm/params.cuh"

namespace ladder {

inline void check(cudaError_t e, const char* what, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "line %d: %s: %s\n", line, what, cudaGetErrorString(e));
  std::exit(1);
}
#define CK(x) ladder::check((x), #x, __LINE__)

// A 2-D row-major bf16 tensor [outer, inner] (row stride ld elements), boxes of box0 x box1 through
// 128-byte swizzled shared memory: the engine's layout (ffi/src/tensor_map.cpp encodes the same).
inline CUtensorMap map_2d(const void* ptr, uint64_t inner, uint64_t outer, uint64_t ld, uint32_t box0, uint32_t box1) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    return reinterpret_cast<Encode>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {ld * 2};
  const cuuint32_t box[2] = {box0, box1};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides, box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d): %llu x %llu\n", int(r), (unsigned long long)outer,
                 (unsigned long long)inner);
    std::exit(1);
  }
  return map;
}

// Uniform values in [-1, 1) from a hash of (seed, index): fresh, never zero, the same on every run.
__global__ void fill_random_kernel(__nv_bfloat16* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9e3779b1u ^ seed * 0x85ebca77u ^ uint32_t(i >> 32);
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    x[i] = __float2bfloat16(float(h >> 8) / 8388608.0f - 1.0f);
  }
}
inline void fill_random(__nv_bfloat16* x, int64_t n, uint32_t seed) {
  fill_random_kernel<<<1024, 256>>>(x, n, seed);
  CK(cudaGetLastError());
}
__global__ void fill_bits_kernel(uint16_t* x, int64_t n, uint16_t bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) x[i] = bits;
}
// Poisons an output before a run: NaN (0x7fc0) unless told otherwise.
inline void poison(__nv_bfloat16* x, int64_t n, uint16_t bits = 0x7fc0) {
  fill_bits_kernel<<<1024, 256>>>(reinterpret_cast<uint16_t*>(x), n, bits);
  CK(cudaGetLastError());
}

// ref[M, N] = A[rows[i] or i, :] . B[N, K]^T in fp32, 16 x 16 shared-memory tiles, nothing else.
__global__ void reference_kernel(const __nv_bfloat16* a, const int32_t* rows, const __nv_bfloat16* b, float* ref, int m,
                                 int n, int k) {
  __shared__ float as[16][17], bs[16][17];
  const int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  const int64_t a_row = r < m ? (rows ? rows[r] : r) : 0;
  const int b_row = blockIdx.x * 16 + threadIdx.y;
  float sum = 0;
  for (int k0 = 0; k0 < k; k0 += 16) {
    as[threadIdx.y][threadIdx.x] = r < m && k0 + threadIdx.x < k ? __bfloat162float(a[a_row * k + k0 + threadIdx.x]) : 0.f;
    bs[threadIdx.y][threadIdx.x] = b_row < n && k0 + threadIdx.x < k ? __bfloat162float(b[int64_t(b_row) * k + k0 + threadIdx.x]) : 0.f;
    __syncthreads();
    for (int j = 0; j < 16; ++j) sum += as[threadIdx.y][j] * bs[threadIdx.x][j];
    __syncthreads();
  }
  if (r < m && c < n) ref[int64_t(r) * n + c] = sum;
}
inline void reference(const __nv_bfloat16* a, const int32_t* rows, const __nv_bfloat16* b, float* ref, int m, int n, int k) {
  reference_kernel<<<dim3((n + 15) / 16, (m + 15) / 16), dim3(16, 16)>>>(a, rows, b, ref, m, n, k);
  CK(cudaGetLastError());
}

// Every element of out[rows, n] against ref: sums of squares of the difference and of ref, and the
// count of elements that are not finite (a NaN left from the poison: not written).
__global__ void diff_kernel(const __nv_bfloat16* out, const float* ref, int64_t count, double* sums,
                            unsigned long long* bad) {
  double d2 = 0, r2 = 0;
  unsigned long long nonfinite = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float o = __bfloat162float(out[i]);
    if (!isfinite(o)) {
      ++nonfinite;
      continue;
    }
    const double d = double(o) - ref[i];
    d2 += d * d;
    r2 += double(ref[i]) * ref[i];
  }
  atomicAdd(sums, d2);
  atomicAdd(sums + 1, r2);
  atomicAdd(bad, nonfinite);
}
struct Verdict {
  double rel;
  unsigned long long nonfinite;
  bool ok() const { return nonfinite == 0 && rel <= 1e-2; }
};
inline Verdict validate(const __nv_bfloat16* out, const float* ref, int64_t count) {
  double* sums = nullptr;
  unsigned long long* bad = nullptr;
  CK(cudaMalloc(&sums, 2 * sizeof(double)));
  CK(cudaMalloc(&bad, sizeof(unsigned long long)));
  CK(cudaMemset(sums, 0, 2 * sizeof(double)));
  CK(cudaMemset(bad, 0, sizeof(unsigned long long)));
  diff_kernel<<<528, 256>>>(out, ref, count, sums, bad);
  CK(cudaGetLastError());
  double h[2];
  unsigned long long b = 0;
  CK(cudaMemcpy(h, sums, sizeof h, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&b, bad, sizeof b, cudaMemcpyDeviceToHost));
  CK(cudaFree(sums));
  CK(cudaFree(bad));
  return Verdict{h[1] > 0 ? std::sqrt(h[0] / h[1]) : 1.0, b};
}

// Median over `samples` of the CUDA-event time of `iters` back-to-back launches, in microseconds per
// launch. Every sample starts behind one untimed launch.
template <class Launch>
double time_us(const Launch& launch, int iters = 50, int samples = 9) {
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int s = 0; s < samples; ++s) {
    launch();
    CK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i) launch();
    CK(cudaEventRecord(stop));
    CK(cudaEventSynchronize(stop));
    float t = 0;
    CK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]) * 1e3 / iters;
}

// One version of a ladder: its name, one launch, and the fp32 reference its output must match.
struct Version {
  const char* name;
  std::function<void()> run;
  const float* ref;
};

// Every version in turn: out [count] poisoned, one run checked element by element against its
// reference, then timed; one line each, with its time against the first version's. True when every
// version checked out.
template <size_t N>
bool run_versions(const Version (&versions)[N], __nv_bfloat16* out, int64_t count) {
  bool all_ok = true;
  double first = 0;
  for (const Version& v : versions) {
    poison(out, count);
    v.run();
    CK(cudaDeviceSynchronize());
    const Verdict verdict = validate(out, v.ref, count);
    const double us = time_us(v.run);
    if (first == 0) first = us;
    std::printf("  %-34s %9.2f us  (%.4fx of the first, %+.2f us)  rel %.2e  unwritten %llu  %s\n", v.name, us, us / first,
                us - first, verdict.rel, verdict.nonfinite, verdict.ok() ? "ok" : "WRONG");
    all_ok = all_ok && verdict.ok();
  }
  return all_ok;
}

// One engine GEMM's operands on GPU 0, C [m, n] = A [m, k] . B [n, k]^T in 128 x 256 tiles: A (the
// caller fills it), B (random), C and an fp32 reference buffer, their tensor maps, the balanced grid
// and the default band.
struct Operands {
  int m, n, k, sms = 0, ctas, group_m;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *out = nullptr;
  float* ref = nullptr;
  CUtensorMap am, bm, cm;

  Operands(int m_, int n_, int k_, uint32_t b_seed) : m(m_), n(n_), k(k_) {
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaMalloc(&a, size_t(m) * k * 2));
    CK(cudaMalloc(&b, size_t(n) * k * 2));
    CK(cudaMalloc(&out, size_t(m) * n * 2));
    CK(cudaMalloc(&ref, size_t(m) * n * 4));
    fill_random(b, int64_t(n) * k, b_seed);
    am = map_2d(a, k, m, k, 64, 128);
    bm = map_2d(b, k, n, k, 64, 256);
    cm = map_2d(out, n, m, n, 64, 64);
    ctas = weft::gemm::balanced_ctas(int64_t(m / 128) * (n / 256), sms);
    group_m = weft::gemm::default_band(256, sms);
  }
  ~Operands() {
    for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(out), static_cast<void*>(ref)})
      (void)cudaFree(p);
  }

  // The engine's kernel parameters over these operands, no host completion; the Hooks' State is
  // value-initialised for the caller to fill.
  template <class Hooks>
  weft::gemm::KernelParams<typename Hooks::State> params() const {
    weft::gemm::KernelParams<typename Hooks::State> p{};
    p.a = am;
    p.b = bm;
    p.c = cm;
    p.problem = weft::gemm::Problem{m, n, k, group_m, 0};
    p.tail = weft::gemm::OutputTail{out, n, n};
    p.completion = weft::Completion{nullptr, 0, nullptr};
    return p;
  }
};

}  // namespace ladder
