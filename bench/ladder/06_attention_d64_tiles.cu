// 06_attention_d64_tiles.cu — which tile makes the attention engine fastest at head dim 64? The
// engine's own kernel (cuda/attention/kernel.cuh, the local KV source) instantiated at each
// candidate shape and register split, against today's Config<64, 128, 128> in the same run:
//   1. 128 x 128, producer 40 / consumers 232: today's ConfigD64 (the baseline);
//   2. 128 x 192, 40 / 224: a third fewer key blocks per tile, so a third fewer per-block fixed costs
//      (barrier waits, token turns, row max / row sum shuffles, O rescales) per FLOP; S 96 + P 48 + O 32
//      registers. At 232 ptxas spills 14 bytes, at 224 none;
//   3. 192 x 128, three consumers, 32 / 160: FlashAttention-3's D 64 tile. Spills 102 bytes (O 32 +
//      S 64 + P 32 leave 32 registers for the walk, the ring positions, the tile sequence and the
//      softmax state, which need ~50): timed to see what those spills cost, not a product candidate.
// Not here, because they spill hundreds of bytes (ptxas 13.0): 128 x 256 (S 128 + P 64 + O 32 alone
// is 224 registers; 354 bytes), 192 x 192 (694 bytes).
//
// Each candidate: small problems (tails in both S, GQA, bottom-right causal, B 2) against the
// library's fp32 reference kernel (cuda/attention/reference.cu), inputs random, out and lse poisoned
// with NaN, every element checked (out rel ≤ 1e-2, lse abs ≤ 1e-3, no failure in the completion
// word); then B 1, H 32, D 64 at S 8k and 32k, causal and full: CUDA events around ~20 ms loops,
// the candidates interleaved round by round, the median of 7 rounds. At S 8k the output of the last
// timed launch (hundreds of launches, no reset) is checked against the reference as well.
// Build and run (GPU host): bash bench/gpu-host.sh ladder/06_attention_d64_tiles.cu
#include <cstring>

#include "attention/reference.cu"  // weft::attn::reference_attention (one TU: included, not linked)
#include "attention/launch.cuh"
#include "attention/local.cuh"
#include "common.cuh"

// A named namespace: kernel templates instantiated with types of an anonymous one confuse nvcc's
// host stub when another anonymous namespace (reference.cu's) is in the same file.
namespace d64_tiles {

using namespace weft::attn;

// A candidate: a tile shape with its own setmaxnreg split (hiding Config's budgets, which follow
// from the consumer count alone).
template <int BlockM, int BlockN, int Producer, int Consumer>
struct Tile : Config<64, BlockM, BlockN> {
  static constexpr int kProducerRegisters = Producer;
  static constexpr int kConsumerRegisters = Consumer;
  using Base = Config<64, BlockM, BlockN>;
  static_assert(weft::wg::kThreads * (Producer + Base::kConsumers * Consumer) <= Base::kLaunchRegisters * Base::kThreads,
                "register budgets exceed what the CTA gets at launch");
  static_assert(Producer % 8 == 0 && Consumer % 8 == 0 && Producer >= 24 && Consumer <= 256, "setmaxnreg counts");
};

struct Device {
  int sms = 0, l2 = 0;
  uint64_t* done = nullptr;  // completion words in device memory: [0] seq, [1] failure reason
  uint32_t* arrivals = nullptr;
  uint64_t seq = 0;
};

struct Shape {
  int b, sq, sk, h, hk;
  bool causal;
};

// Device tensors of one problem: q, out [b sq, h, 64], k, v [b sk, hk, 64], lse [b, h, sq].
struct Tensors {
  __nv_bfloat16 *q, *k, *v, *o;
  float* lse;
};

Problem problem_of(const Shape& s, int block_m, const Device& dev, const Tensors& t) {
  Problem q{};
  q.batch = s.b, q.heads = s.h, q.kv_heads = s.hk, q.seqlen_q = s.sq, q.seqlen_k = s.sk;
  q.m_blocks = (s.sq + block_m - 1) / block_m;
  q.tiles = s.b * s.h * q.m_blocks;
  q.section = section_pairs(s.sk, 64, s.h / s.hk, dev.l2, s.b * s.h);
  q.causal = s.causal;
  q.scale_log2 = 0.125f * 1.4426950408889634f;  // 1 / sqrt(64)
  q.lse = t.lse;
  q.lse_head_stride = s.sq;
  q.lse_batch_stride = int64_t(s.h) * s.sq;
  q.o = t.o;
  q.o_row_stride = int64_t(s.h) * 64;
  q.rows_q = s.b * s.sq;
  q.rows_k = s.b * s.sk;
  return q;
}

// One candidate's launch over one problem: its maps, grid and parameters, built once.
template <class Cfg>
struct Launch {
  Params<LocalPolicy::State> p{};
  int ctas = 0;
  Device* dev;

  Launch(const Shape& s, const Tensors& t, Device& d) : dev(&d) {
    const uint64_t q_cols = uint64_t(s.h) * 64, kv_cols = uint64_t(s.hk) * 64;
    p.q = ladder::map_2d(t.q, q_cols, uint64_t(s.b) * s.sq, q_cols, 64, Cfg::kBlockM);
    p.o = ladder::map_2d(t.o, q_cols, uint64_t(s.b) * s.sq, q_cols, 64, 64);
    p.k[0] = p.k[1] = ladder::map_2d(t.k, kv_cols, uint64_t(s.b) * s.sk, kv_cols, 64, Cfg::kBlockN);
    p.v[0] = p.v[1] = ladder::map_2d(t.v, kv_cols, uint64_t(s.b) * s.sk, kv_cols, 64, Cfg::kBlockN);
    p.problem = problem_of(s, Cfg::kBlockM, d, t);
    int resident_ctas = 0;
    CK((resident<Cfg, LocalPolicy>(&resident_ctas)));
    ctas = std::min(resident_ctas, p.problem.tiles);
  }
  void operator()() {
    p.completion = weft::Completion{dev->done, ++dev->seq, dev->arrivals};
    CK((launch<Cfg, LocalPolicy>(p, ctas, nullptr)));
  }
};

// lse: the largest |ours - ref| (equal infinities count 0; a NaN counts as infinite).
__global__ void lse_diff_kernel(const float* ours, const float* ref, int64_t n, unsigned* worst_bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float d = ours[i] == ref[i] ? 0.0f : fabsf(ours[i] - ref[i]);
    atomicMax(worst_bits, __float_as_uint(isnan(d) ? INFINITY : d));  // non-negative floats order as integers
  }
}

struct Check {
  double rel, lse;
  unsigned long long unwritten;
  bool failed;  // the completion word carries the failed bit, or the last launch never published
  bool ok() const { return !failed && unwritten == 0 && rel <= 1e-2 && lse <= 1e-3; }
};

// The output now in t against the reference (ref_out fp32 in the q layout, ref_lse as written).
Check compare(const Shape& s, const Tensors& t, const float* ref_out, const float* ref_lse, const Device& dev) {
  CK(cudaDeviceSynchronize());
  const int64_t n = int64_t(s.b) * s.sq * s.h * 64, nl = int64_t(s.b) * s.h * s.sq;
  const ladder::Verdict v = ladder::validate(t.o, ref_out, n);
  unsigned* worst = nullptr;
  CK(cudaMalloc(&worst, 4));
  CK(cudaMemset(worst, 0, 4));
  lse_diff_kernel<<<264, 256>>>(t.lse, ref_lse, nl, worst);
  CK(cudaGetLastError());
  unsigned bits = 0;
  uint64_t done = 0;
  CK(cudaMemcpy(&bits, worst, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&done, dev.done, 8, cudaMemcpyDeviceToHost));
  CK(cudaFree(worst));
  float lse = 0;
  std::memcpy(&lse, &bits, 4);
  return Check{v.rel, lse, v.nonfinite, done != dev.seq};
}

Tensors alloc(const Shape& s) {
  Tensors t{};
  const size_t nq = size_t(s.b) * s.sq * s.h * 64, nk = size_t(s.b) * s.sk * s.hk * 64;
  CK(cudaMalloc(&t.q, nq * 2));
  CK(cudaMalloc(&t.o, nq * 2));
  CK(cudaMalloc(&t.k, nk * 2));
  CK(cudaMalloc(&t.v, nk * 2));
  CK(cudaMalloc(&t.lse, size_t(s.b) * s.h * s.sq * 4));
  ladder::fill_random(t.q, nq, 11u + s.sq), ladder::fill_random(t.k, nk, 23u + s.sk), ladder::fill_random(t.v, nk, 37u + s.sk);
  return t;
}
void release(Tensors& t) {
  for (void* x : {(void*)t.q, (void*)t.k, (void*)t.v, (void*)t.o, (void*)t.lse}) CK(cudaFree(x));
}
void poison(const Shape& s, const Tensors& t) {
  ladder::poison(t.o, int64_t(s.b) * s.sq * s.h * 64);
  ladder::fill_bits_kernel<<<264, 256>>>(reinterpret_cast<uint16_t*>(t.lse), int64_t(s.b) * s.h * s.sq * 2, 0x7fc0);
  CK(cudaGetLastError());
}

struct Reference {
  float *out = nullptr, *lse = nullptr;
  Reference(const Shape& s, const Tensors& t, const Device& dev) {
    CK(cudaMalloc(&out, size_t(s.b) * s.sq * s.h * 64 * 4));
    CK(cudaMalloc(&lse, size_t(s.b) * s.h * s.sq * 4));
    Tensors r = t;
    r.lse = lse;
    CK(reference_attention(problem_of(s, 128, dev, r), 64, t.q, t.k, t.v, out, nullptr));
    CK(cudaDeviceSynchronize());
  }
  ~Reference() { (void)cudaFree(out), (void)cudaFree(lse); }
};

// The candidates, in one list: name, checked small problems, and per timed shape a launch.
struct Candidate {
  const char* name;
  int block_m, block_n, stages, smem, producer, consumer;
  std::function<std::function<void()>(const Shape&, const Tensors&, Device&)> make;
};
template <class Cfg>
Candidate candidate(const char* name) {
  return {name, Cfg::kBlockM, Cfg::kBlockN, Cfg::kStages, Cfg::kSmemBytes, Cfg::kProducerRegisters, Cfg::kConsumerRegisters,
          [](const Shape& s, const Tensors& t, Device& d) -> std::function<void()> { return Launch<Cfg>(s, t, d); }};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace d64_tiles

int main() {
  using namespace d64_tiles;
  Device dev;
  CK(cudaDeviceGetAttribute(&dev.sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&dev.l2, cudaDevAttrL2CacheSize, 0));
  CK(cudaMalloc(&dev.done, 16));
  CK(cudaMalloc(&dev.arrivals, 8));
  CK(cudaMemset(dev.done, 0, 16));
  CK(cudaMemset(dev.arrivals, 0, 8));

  const Candidate candidates[] = {
      candidate<Tile<128, 128, 40, 232>>("128x128 p40/c232 (today)"),
      candidate<Tile<128, 192, 40, 224>>("128x192 p40/c224"),
      candidate<Tile<192, 128, 32, 160>>("192x128 p32/c160 (spills)"),
  };
  constexpr int kCandidates = sizeof(candidates) / sizeof(candidates[0]);
  for (const Candidate& c : candidates) {
    std::printf("%-26s BlockM %3d BlockN %3d stages %d smem %6d B regs %d/%d\n", c.name, c.block_m, c.block_n, c.stages, c.smem,
                c.producer, c.consumer);
  }

  // Correctness on small problems: tails of both tiles' sizes, GQA, Sq < Sk (bottom-right causal).
  const Shape small[] = {
      {1, 1000, 1000, 2, 1, true}, {2, 777, 777, 4, 2, false}, {1, 300, 1000, 2, 2, true},
      {1, 1, 385, 2, 2, true},     {1, 4096, 4096, 2, 2, true}, {1, 2048, 4096, 2, 1, false},
  };
  int bad = 0;
  for (const Candidate& c : candidates) {
    double worst_rel = 0, worst_lse = 0;
    int failed = 0;
    for (const Shape& s : small) {
      Tensors t = alloc(s);
      Reference ref(s, t, dev);
      poison(s, t);
      auto run = c.make(s, t, dev);
      run();
      const Check k = compare(s, t, ref.out, ref.lse, dev);
      worst_rel = std::max(worst_rel, k.rel), worst_lse = std::max(worst_lse, k.lse);
      if (!k.ok()) {
        ++failed;
        std::printf("  MISMATCH %s: B %d Sq %d Sk %d H %d/%d %s: rel %.2e lse %.2e unwritten %llu failed %d\n", c.name, s.b, s.sq,
                    s.sk, s.h, s.hk, s.causal ? "causal" : "full", k.rel, k.lse, k.unwritten, int(k.failed));
      }
      release(t);
    }
    std::printf("check %-26s %zu small problems: %s (worst rel %.2e, lse %.2e)\n", c.name, sizeof(small) / sizeof(small[0]),
                failed ? "MISMATCH" : "ok", worst_rel, worst_lse);
    bad += failed;
  }

  // Timing: B 1, H 32, D 64; the candidates interleaved in each of 7 rounds of ~20 ms loops.
  std::printf("\n%-16s", "B 1 H 32 D 64");
  for (const Candidate& c : candidates) std::printf(" | %-36s", c.name);
  std::printf("\n");
  for (int S : {8192, 32768}) {
    for (bool causal : {false, true}) {
      const Shape s{1, S, S, 32, 32, causal};
      Tensors t = alloc(s);
      std::vector<std::function<void()>> runs;
      std::vector<int> iters;
      for (const Candidate& c : candidates) {
        runs.push_back(c.make(s, t, dev));
        runs.back()();  // warm: module load, opt-in
        const double once = ladder::time_us(runs.back(), 2, 1);
        iters.push_back(std::max(3, int(20000.0 / once)));
      }
      std::vector<std::vector<double>> us(kCandidates);
      for (int round = 0; round < 7; ++round) {
        for (int i = 0; i < kCandidates; ++i) us[i].push_back(ladder::time_us(runs[i], iters[i], 1));
      }
      const double flops = 4.0 * S * double(S) * 32 * 64 * (causal ? 0.5 : 1.0);
      const double base = median(us[0]);
      std::printf("S %5d %-6s  ", S, causal ? "causal" : "full");
      for (int i = 0; i < kCandidates; ++i) {
        const double m = median(us[i]);
        const auto [lo, hi] = std::minmax_element(us[i].begin(), us[i].end());
        std::printf(" | %7.3f ms %5.3fx %4.0f TF ±%3.1f%%", m / 1e3, base / m, flops / m / 1e6, 50.0 * (*hi - *lo) / m);
      }
      std::printf("\n");
      if (S == 8192) {  // the last of hundreds of launches, no reset between them
        Reference ref(s, t, dev);
        for (int i = 0; i < kCandidates; ++i) {
          poison(s, t);
          for (int n = 0; n < 100; ++n) runs[i]();
          const Check k = compare(s, t, ref.out, ref.lse, dev);
          if (!k.ok()) {
            ++bad;
            std::printf("  MISMATCH %s after 100 launches: rel %.2e lse %.2e unwritten %llu failed %d\n", candidates[i].name, k.rel,
                        k.lse, k.unwritten, int(k.failed));
          }
        }
      }
      release(t);
    }
  }
  std::printf("ratio: today's 128x128 time / the candidate's (> 1: faster); ± half the min-max spread of 7 rounds\n");
  std::printf("%d mismatching checks\n", bad);
  return bad ? 1 : 0;
}
