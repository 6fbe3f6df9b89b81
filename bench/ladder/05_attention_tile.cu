// 05_attention_tile.cu — one GPU call that localises a bug in the attention engine: small problems
// through weft_attention against an fp64 CPU loop, printing per case the error and the first
// mismatching element with its coordinates, in three input modes that separate the engine's parts:
//   onehot  q = 0 (every score 0: P uniform over the visible keys), v[j] = e_(j mod D): out[i][d] is
//           the share of visible keys with j mod D = d, so a wrong mask, V layout or P·V fragment
//           shows as a wrong column pattern, independent of Q·Kᵀ;
//   qk      q, k random, v[j] = e_(j mod D) as above: adds the S GEMM and the softmax;
//   random  q, k, v random: everything.
// Then one timing: B 1, H 32, D 128, S 4096 and 8192, causal and not (CUDA events, 20 launches).
// Build and run (GPU host): bash bench/gpu-host.sh ladder/05_attention_tile.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "weft.h"

namespace {

struct Case {
  int b, sq, sk, h, hk, d;
  bool causal;
};

enum Mode { kOneHot, kQk, kRandom };
const char* kModeNames[] = {"onehot", "qk", "random"};

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

float bf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

struct Buffers {
  std::vector<__nv_bfloat16> q, k, v;
  std::vector<float> qf, kf, vf;
};

Buffers make(const Case& c, Mode mode, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Buffers x;
  const size_t nq = size_t(c.b) * c.sq * c.h * c.d, nk = size_t(c.b) * c.sk * c.hk * c.d;
  x.qf.resize(nq);
  x.kf.resize(nk);
  x.vf.resize(nk);
  for (size_t i = 0; i < nq; ++i) x.qf[i] = mode == kOneHot ? 0.0f : bf(u(gen));
  for (size_t i = 0; i < nk; ++i) x.kf[i] = bf(u(gen));
  for (size_t i = 0; i < nk; ++i) {
    const size_t row = i / (size_t(c.hk) * c.d), dd = i % c.d;
    const size_t j = row % c.sk;
    x.vf[i] = mode == kRandom ? bf(u(gen)) : (dd == j % c.d ? 1.0f : 0.0f);
  }
  for (float f : x.qf) x.q.push_back(__float2bfloat16_rn(f));
  for (float f : x.kf) x.k.push_back(__float2bfloat16_rn(f));
  for (float f : x.vf) x.v.push_back(__float2bfloat16_rn(f));
  return x;
}

void cpu(const Case& c, const Buffers& x, std::vector<double>& out, std::vector<double>& lse) {
  out.assign(size_t(c.b) * c.sq * c.h * c.d, 0.0);
  lse.assign(size_t(c.b) * c.h * c.sq, -INFINITY);
  const double scale = 1.0 / std::sqrt(double(c.d));
  std::vector<double> s(c.sk);
  for (int b = 0; b < c.b; ++b)
    for (int h = 0; h < c.h; ++h) {
      const int hk = h / (c.h / c.hk);
      for (int i = 0; i < c.sq; ++i) {
        const int last = c.causal ? std::min(c.sk - 1, i + c.sk - c.sq) : c.sk - 1;
        double mx = -INFINITY;
        for (int j = 0; j <= last; ++j) {
          double dot = 0;
          for (int e = 0; e < c.d; ++e)
            dot += double(x.qf[((size_t(b) * c.sq + i) * c.h + h) * c.d + e]) * x.kf[((size_t(b) * c.sk + j) * c.hk + hk) * c.d + e];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = 0; j <= last; ++j) sum += std::exp(s[j] - mx);
        for (int j = 0; j <= last; ++j) {
          const double p = std::exp(s[j] - mx) / sum;
          for (int e = 0; e < c.d; ++e)
            out[((size_t(b) * c.sq + i) * c.h + h) * c.d + e] += p * x.vf[((size_t(b) * c.sk + j) * c.hk + hk) * c.d + e];
        }
        if (last >= 0) lse[(size_t(b) * c.h + h) * c.sq + i] = mx + std::log(sum);
      }
    }
}

bool run_case(const Case& c, Mode mode) {
  Buffers x = make(c, mode, 1234u + c.sq * 7 + c.sk);
  void *q, *k, *v, *o;
  float* l;
  const size_t nq = x.q.size(), nk = x.k.size(), nl = size_t(c.b) * c.h * c.sq;
  CHECK(cudaMalloc(&q, nq * 2));
  CHECK(cudaMalloc(&k, nk * 2));
  CHECK(cudaMalloc(&v, nk * 2));
  CHECK(cudaMalloc(&o, nq * 2));
  CHECK(cudaMalloc(&l, nl * 4));
  CHECK(cudaMemcpy(q, x.q.data(), nq * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(k, x.k.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(v, x.v.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(o, 0xff, nq * 2));  // NaN
  CHECK(cudaMemset(l, 0xff, nl * 4));
  WeftAttentionParams p = WEFT_ATTENTION_PARAMS_INIT;
  p.q = uint64_t(q), p.k = uint64_t(k), p.v = uint64_t(v), p.out = uint64_t(o), p.lse = uint64_t(l);
  p.batch = c.b, p.heads = c.h, p.kv_heads = c.hk, p.head_dim = c.d, p.seqlen_q = c.sq, p.seqlen_k = c.sk;
  p.flags = c.causal ? WEFT_ATTENTION_CAUSAL : 0;
  if (weft_attention(&p, nullptr) != 0) {
    std::printf("weft_attention failed: %s\n", weft_last_error());
    return false;
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> ob(nq);
  std::vector<float> lb(nl);
  CHECK(cudaMemcpy(ob.data(), o, nq * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(lb.data(), l, nl * 4, cudaMemcpyDeviceToHost));
  std::vector<double> ref, ref_lse;
  cpu(c, x, ref, ref_lse);
  double num = 0, den = 0, lse_max = 0;
  long first = -1, first_lse = -1;
  for (size_t i = 0; i < nq; ++i) {
    const double got = __bfloat162float(ob[i]), d = got - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    if (first < 0 && !(std::fabs(d) <= 2e-2 + 1e-2 * std::fabs(ref[i]))) first = long(i);
  }
  for (size_t i = 0; i < nl; ++i) {
    const double d = (lb[i] == ref_lse[i]) ? 0.0 : std::fabs(lb[i] - ref_lse[i]);
    if (!(d <= lse_max)) lse_max = std::isnan(d) ? INFINITY : d;
    if (first_lse < 0 && !(d <= 1e-3)) first_lse = long(i);
  }
  const double rel = std::sqrt(num) / std::sqrt(den > 0 ? den : 1);
  const bool ok = rel <= 1e-2 && first < 0 && first_lse < 0;
  std::printf("%-6s B %d Sq %5d Sk %5d H %d/%d D %3d %-6s rel %.2e lse %.2e %s\n", kModeNames[mode], c.b, c.sq, c.sk, c.h,
              c.hk, c.d, c.causal ? "causal" : "full", rel, lse_max, ok ? "ok" : "MISMATCH");
  if (first >= 0) {
    const long e = first % c.d, hh = (first / c.d) % c.h, s = (first / c.d / c.h) % c.sq, b = first / c.d / c.h / c.sq;
    std::printf("    first out mismatch: b %ld s %ld h %ld d %ld (tile row %ld, consumer %ld, warp %ld): ours %.5f ref %.5f\n", b,
                s, hh, e, s % 128, (s % 128) / 64, (s % 64) / 16, double(__bfloat162float(ob[first])), ref[first]);
  }
  if (first_lse >= 0) {
    const long s = first_lse % c.sq, hh = (first_lse / c.sq) % c.h, b = first_lse / c.sq / c.h;
    std::printf("    first lse mismatch: b %ld h %ld s %ld: ours %.5f ref %.5f\n", b, hh, s, double(lb[first_lse]), ref_lse[first_lse]);
  }
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(l);
  return ok;
}

void time_case(int s, int d, bool causal) {
  const int h = 32;
  const size_t n = size_t(s) * h * d;
  void *q, *k, *v, *o;
  CHECK(cudaMalloc(&q, n * 2));
  CHECK(cudaMalloc(&k, n * 2));
  CHECK(cudaMalloc(&v, n * 2));
  CHECK(cudaMalloc(&o, n * 2));
  CHECK(cudaMemset(q, 0x3c, n * 2));
  CHECK(cudaMemset(k, 0x3c, n * 2));
  CHECK(cudaMemset(v, 0x3c, n * 2));
  WeftAttentionParams p = WEFT_ATTENTION_PARAMS_INIT;
  p.q = uint64_t(q), p.k = uint64_t(k), p.v = uint64_t(v), p.out = uint64_t(o);
  p.batch = 1, p.heads = h, p.kv_heads = h, p.head_dim = d, p.seqlen_q = s, p.seqlen_k = s;
  p.flags = causal ? WEFT_ATTENTION_CAUSAL : 0;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) weft_attention(&p, nullptr);
  CHECK(cudaEventRecord(a));
  const int iters = 20;
  for (int i = 0; i < iters; ++i) weft_attention(&p, nullptr);
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  ms /= iters;
  const double flops = 4.0 * s * double(s) * h * d * (causal ? 0.5 : 1.0);
  std::printf("time  S %5d D %3d %-6s %.3f ms  %.0f TFLOP/s\n", s, d, causal ? "causal" : "full", ms, flops / ms / 1e9);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o);
}

}  // namespace

int main() {
  const Case cases[] = {
      {1, 64, 64, 1, 1, 128, false},   {1, 128, 128, 1, 1, 128, false}, {1, 128, 128, 1, 1, 128, true},
      {1, 130, 130, 1, 1, 128, true},  {1, 256, 256, 2, 1, 128, true},  {1, 1, 300, 2, 2, 128, true},
      {2, 200, 333, 4, 2, 128, true},  {1, 128, 128, 1, 1, 64, false},  {1, 1000, 1000, 2, 1, 64, true},
      {1, 1000, 1000, 2, 2, 128, false}, {1, 300, 100, 1, 1, 128, true},
  };
  int bad = 0;
  for (Mode mode : {kOneHot, kQk, kRandom}) {
    for (const Case& c : cases) bad += run_case(c, mode) ? 0 : 1;
  }
  for (int d : {128, 64}) {
    for (int s : {4096, 8192}) {
      time_case(s, d, false);
      time_case(s, d, true);
    }
  }
  std::printf("%d mismatching cases\n", bad);
  return bad ? 1 : 0;
}
