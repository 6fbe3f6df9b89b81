// 07_gather_cpasync.cu — can the GEMM's producer gather A's rows by index at full speed, so that a
// MoE layer's local rows need no permutation copy at all? 02 gathered with 1-row TMA boxes from one
// warp and was 5x slower than gather-then-GEMM (TMA's box issue rate). Here the whole producer
// warpgroup gathers with cp.async (LDGSTS) 16-byte copies. C = A . B^T with A[i] = A_src[index[i]]
// (bf16, B [N, K] k-major), 128 x 256 tiles, the engine's consumers, scheduler and epilogue:
//   1  plain GEMM           the engine (gemm::launch, DefaultHooks) on A already gathered: the
//                           compute-only limit
//   2  gather, then GEMM    a copy kernel builds A from A_src, then 1 (what push dispatch costs)
//   3  cp.async, noinc      this file's kernel: the producer warpgroup's 128 threads each copy 8
//                           rows x 16 bytes per k-block (8 threads per 128-byte row, so one warp
//                           instruction moves 4 whole lines) into the 128-byte-swizzled stage, and
//                           each thread's cp.async.mbarrier.arrive.noinc lands on the stage's full
//                           barrier (1 + 128 arrivals: thread 0's expect_tx for B's TMA bytes, then
//                           one per thread once its copies have landed)
//   4  cp.async, fenced     the same copies; each thread waits for its copies of the stage two
//                           behind (cp.async.wait_group 2), fences them to the async proxy
//                           (fence.proxy.async.shared::cta: wgmma reads shared memory through it)
//                           and lane 0 arrives for its warp with a plain mbarrier arrive (1 + 4
//                           arrivals per stage). The PTX memory model asks for that fence between
//                           generic-proxy writes (cp.async) and async-proxy reads (wgmma); 3 has
//                           none (as public cp.async + wgmma gathers do): this measures its cost
//   5  1-row TMA boxes      02's gathering source (ladder::TmaRowGather, ASource::kLanes = 32)
//   6  cp.async, consumer   3's producer; the consumers fence the async proxy themselves after their
//      fenced             wait on `full` and before a slot's release (gemm::accumulate_tile with
//                           GenericA, what the product's PULL mover runs: bench/DECISIONS.md, "A
//                           gathered by cp.async is fenced by its consumers")
//   7  6 on contiguous rows the same kernel with index[i] = i over 1's A: what cp.async itself costs
//                           against TMA, apart from the rows being scattered
//   8  6, early release     the consumers fence twice per k-block (after the wait on `full`, and
//                           after wgmma.wait_group before the slot's release), so a slot goes back
//                           to the producer one k-block sooner than in 6: does 6's deferred release
//                           cost lookahead (one of 4 stages at 128 x 256)?
// Only the producer differs from the engine's kernel (cuda/gemm/kernel.cuh, engine_cta: copied
// here, ladder only, since the engine's produce() runs one thread or one warp). It keeps the
// engine's setmaxnreg budgets: the producer fits its 40 registers with no spill (at 32 ptxas
// spills 36 bytes; 48 would also fit beside the consumers' 232: 128 x 48 + 256 x 232 = 65536).
// Rows past M are zero-filled (cp.async src-size 0): their results are never stored.
// Checks: random inputs, output poisoned with NaN, every element against a simple fp32 reference
// of the gathered product (rel <= 1e-2), once and again after 24 back-to-back runs; indices with
// repeats and gaps; the group shape has M 1000 (not a multiple of 128). Timing: CUDA events, loops
// of about 20 ms, the versions interleaved over 7 rounds, median (min-max).
//   bash bench/gpu-host.sh ladder/07_gather_cpasync.cu    (GPU host; or build as in bench/ladder/README.md)
//   07_gather_cpasync [M N K SOURCE_ROWS [once]]          one shape instead of the three below; `once`:
//                                                         each version checked once, untimed (for ncu)
#include <functional>
#include <string>

#include "common.cuh"
#include "gather.cuh"
#include "gemm/launch.cuh"

namespace {

using namespace weft;
using Cfg = gemm::Config<256, 1, 1, /*BNMajor=*/false, /*OutF32=*/false>;

struct GatherState {
  CUtensorMap rows;            // version 5: A_src [R, K], box {64, 1}
  const __nv_bfloat16* src;    // A_src [R, K], row stride K
  const int32_t* index;        // [M]: A's row i is A_src's row index[i]
  int32_t m;
};

struct GatherHooks : gemm::DefaultHooks {
  using State = GatherState;
};

// ---- version 5: 02's 1-row TMA gathering source (gather.cuh) ----
struct TmaRowHooks : GatherHooks {
  template <class C>
  using ASource = ladder::TmaRowGather<C>;
};

// ---- versions 3 and 4: the cp.async producer ----
enum class Arrival { kNoinc, kFenced, kConsumerFenced, kEarlyRelease };

// Version 4 arrives on a stage once the copies two stages later are issued. At most kStages - 2:
// a consumer hands slot j back only after slot j + 1 is full (it keeps one wgmma batch in flight),
// and the producer needs slot j back before it issues stage j + kStages.
constexpr int kLag = 2;
static_assert(kLag <= Cfg::kStages - 2, "a lag the ring's consumers can wait for");

// Arrivals on a stage's full barrier besides thread 0's expect_tx: one per thread (noinc: each
// thread's arrival fires when its own copies land), or one per warp (fenced: lane 0 arrives for
// the warp once every lane has waited for and fenced its copies: a writer-side fence, then a warp
// barrier, then one release, as for shared-memory stores before a TMA store).
template <Arrival Mode>
constexpr uint32_t kArrivals = Mode == Arrival::kFenced ? wg::kWarps : wg::kThreads;

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(cta::smem_address(bar)) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// All 128 threads of the producer warpgroup. Thread t copies 16-byte chunk c = t % 8 of rows
// g + 16 j (g = t / 8, j = 0..7) of each k-block: 8 threads per 128-byte row, so one warp
// instruction reads 4 whole 128-byte lines. The 128-byte swizzle (what TMA's SWIZZLE_128B leaves
// and smem_desc_sw128 reads, from a 1024-byte-aligned stage): chunk c of row r lies at
// r * 128 + ((c ^ (r % 8)) * 16). r % 8 = g % 8 for every j, so a thread's chunk offset is fixed.
// The tile's row addresses are computed once per tile (8 pointers: 16 registers).
template <Arrival Mode>
__device__ __forceinline__ bool produce_cpasync(const gemm::KernelParams<GatherState>& p,
                                                const gemm::SharedStorage<Cfg>& s) {
  constexpr int kRowsPerThread = Cfg::kTileM / 16;
  const int t = wg::thread();
  const int chunk = t % 8, group = t / 8;
  const uint32_t offset = uint32_t(group * 128 + ((chunk ^ (group % 8)) * 16));
  const int64_t k = p.problem.k;
  gemm::GroupedScheduler<Cfg> scheduler(p.problem, p.hooks, 0);
  RingPosition<Cfg::kStages> ring, arrive;
  int pending = 0;
  bool ok = true;
  gemm::TileCoord tile;
  while (scheduler.next(tile)) {
    const __nv_bfloat16* row[kRowsPerThread];
    uint32_t valid = 0;  // bit j: row g + 16 j of the tile lies below M
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
      const int32_t r = tile.m0 + group + 16 * j;
      const bool in = r < p.hooks.m;
      valid |= uint32_t(in) << j;
      row[j] = p.hooks.src + (in ? int64_t(p.hooks.index[r]) : 0) * k + chunk * 8;
    }
    const gemm::TmaB<Cfg> b(p, tile);
    const int32_t k_blocks = gemm::k_blocks_of(tile, p.problem);
    for (int32_t i = 0; i < k_blocks; ++i) {
      const int32_t k0 = (tile.k_begin + i) * Cfg::kTileK;
      uint64_t* full = s.full(ring.stage);
      ok = ok && cta::mbarrier_wait(s.empty(ring.stage), ring.parity ^ 1u);
      if (t == 0) {
        cta::mbarrier_arrive_expect_tx(full, uint32_t(Cfg::kBBytes));
        b.load(s.b(ring.stage), full, k0, 0, 0);
      }
      const uint32_t dst = cta::smem_address(s.a(ring.stage)) + offset;
#pragma unroll
      for (int j = 0; j < kRowsPerThread; ++j) cp_async_16(dst + j * 16 * 128, row[j] + k0, (valid >> j & 1u) * 16u);
      if constexpr (Mode != Arrival::kFenced) {
        cp_async_arrive_noinc(full);
      } else {
        cp_async_commit();
        if (++pending > kLag) {
          cp_async_wait<kLag>();
          cta::fence_proxy_async_shared();
          __syncwarp();  // every lane's copies landed and fenced before lane 0 arrives for the warp
          if (t % 32 == 0) cta::mbarrier_arrive(s.full(arrive.stage));
          arrive.advance();
          --pending;
        }
      }
      ring.advance();
    }
  }
  if constexpr (Mode == Arrival::kFenced) {
    cp_async_wait<0>();
    cta::fence_proxy_async_shared();
    __syncwarp();
    for (; pending > 0; --pending) {
      if (t % 32 == 0) cta::mbarrier_arrive(s.full(arrive.stage));
      arrive.advance();
    }
  }
  return ok;
}

// Version 8's consumer loop: gemm::accumulate_tile with GenericA, but each slot fenced and released
// right after its wgmmas are done (wgmma.wait_group 1), not after the next k-block's wait.
__device__ __forceinline__ void accumulate_early_release(float (&acc)[Cfg::kTileN / 2], const gemm::SharedStorage<Cfg>& s,
                                                         RingPosition<Cfg::kStages>& ring, int32_t k_blocks, int consumer,
                                                         bool& ok) {
  const gemm::RingAddresses<Cfg> at(s);
  uint32_t previous = 0;
#pragma unroll
  for (int i = 0; i < Cfg::kTileN / 2; ++i) acc[i] = 0.0f;
  for (int32_t kb = 0; kb < k_blocks; ++kb) {
    ok = ok && cta::mbarrier_wait(s.full(ring.stage), ring.parity);
    cta::fence_proxy_async_shared();
    const uint64_t a_desc = wg::smem_desc_sw128(s.a(ring.stage) + consumer * Cfg::kConsumerRows * 128, 0, 1024);
    const uint64_t b_desc = wg::smem_desc_sw128(s.b(ring.stage), 0, 1024);
    wg::fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kTileK / 16; ++kk)
      wg::mma_async<Cfg::kTileN, Cfg::kBNMajor>(acc, wg::desc_advance(a_desc, kk * 32), wg::desc_advance(b_desc, kk * 32));
    wg::commit();
    wg::wait<1>();
    if (kb > 0) {
      cta::fence_proxy_async_shared();
      gemm::release_slot<Cfg>(s, at, previous);
    }
    previous = ring.stage;
    ring.advance();
  }
  wg::wait<0>();
  cta::fence_proxy_async_shared();
  if (k_blocks > 0) gemm::release_slot<Cfg>(s, at, previous);
#pragma unroll
  for (int i = 0; i < Cfg::kTileN / 2; ++i) wg::fence_operand(acc[i]);
}

// gemm::engine_cta with produce_cpasync in warpgroup 0 and the engine's consumers as they are.
template <Arrival Mode>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    cpasync_gemm_kernel(const __grid_constant__ gemm::KernelParams<GatherState> p) {
  using Hooks = GatherHooks;
  using Epilogue = Hooks::Epilogue<Cfg, Hooks>;
  grid::wait_previous();
  extern __shared__ uint8_t smem_raw[];
  const gemm::SharedStorage<Cfg> s(smem_raw);
  if (threadIdx.x == 0) {
    for (uint32_t i = 0; i < Cfg::kStages; ++i) {
      cta::mbarrier_init(s.full(i), 1 + kArrivals<Mode>);  // thread 0's expect_tx, then the copies'
      cta::mbarrier_init(s.empty(i), Cfg::kConsumers);
    }
    for (int i = 0; i < Epilogue::kBarriers; ++i) cta::mbarrier_init(s.epilogue_barrier(i), 1);
    cluster::fence_mbarrier_init();
    cta::prefetch_tensor_map(&p.b);
    cta::prefetch_tensor_map(&p.c);
  }
  __syncthreads();
  if (wg::index() == 0) {
    wg::release_registers<Cfg::kProducerRegisters>();
    if (!produce_cpasync<Mode>(p, s)) cta::fail(p.completion, gemm::kFailBarrierTimeout, gemm::kStageProducer);
    gemm::finish_cta<Cfg, Hooks>(p);
  } else {
    wg::claim_registers<Cfg::kConsumerRegisters>();
    const int consumer = wg::index() - 1;
    gemm::GroupedScheduler<Cfg> scheduler(p.problem, p.hooks, 0);
    Epilogue epilogue(p, s, consumer, 0);
    RingPosition<Cfg::kStages> ring;
    float acc[Cfg::kTileN / 2];
    bool ok = true;
    gemm::TileCoord t;
    while (scheduler.next(t)) {
      epilogue.template before_math<0>(t);
      const int32_t k_blocks = gemm::k_blocks_of(t, p.problem);
      const auto on_block = [&](int32_t kb) { epilogue.template on_kblock<0>(t, kb, k_blocks); };
      const bool rows_past_m = t.m0 + consumer * Cfg::kConsumerRows >= p.problem.m;
      if constexpr (Mode == Arrival::kEarlyRelease) {
        if (rows_past_m) gemm::pass_tile<Cfg>(s, ring, k_blocks, ok, on_block);
        else accumulate_early_release(acc, s, ring, k_blocks, consumer, ok);
      } else {
        gemm::accumulate_tile<Cfg, Mode == Arrival::kConsumerFenced>(acc, s, ring, k_blocks, consumer, ok, on_block,
                                                                     rows_past_m);
      }
      epilogue.template store<0>(acc, t, scheduler);
    }
    epilogue.finish(acc);
    if (wg::thread() == 0) {
      cta::bulk_wait<0>();
      cta::fence_proxy_async_global();
      if (!ok) cta::fail(p.completion, gemm::kFailBarrierTimeout, gemm::kStageConsumer);
    }
    gemm::finish_cta<Cfg, Hooks>(p);
  }
}

template <Arrival Mode>
void launch_cpasync(const gemm::KernelParams<GatherState>& p, int ctas) {
  static bool attributed = [] {
    CK(cudaFuncSetAttribute(cpasync_gemm_kernel<Mode>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
    return true;
  }();
  (void)attributed;
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr = gemm::programmatic_launch();
  cfg.gridDim = dim3(unsigned(ctas));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, cpasync_gemm_kernel<Mode>, p));
}

// Median (and min, max) over `rounds` interleaved rounds of each launch's ~20 ms loop, in ms per launch.
struct Timing {
  double median, min, max;
};
std::vector<Timing> time_interleaved(const std::vector<std::function<void()>>& runs, int rounds = 7) {
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  std::vector<int> iters;
  for (const auto& run : runs) {  // calibrate: 3 launches
    run();
    CK(cudaEventRecord(start));
    for (int i = 0; i < 3; ++i) run();
    CK(cudaEventRecord(stop));
    CK(cudaEventSynchronize(stop));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, start, stop));
    iters.push_back(std::max(3, int(20.0 / std::max(ms / 3, 1e-3f))));
  }
  std::vector<std::vector<double>> samples(runs.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t v = 0; v < runs.size(); ++v) {
      runs[v]();
      CK(cudaEventRecord(start));
      for (int i = 0; i < iters[v]; ++i) runs[v]();
      CK(cudaEventRecord(stop));
      CK(cudaEventSynchronize(stop));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, start, stop));
      samples[v].push_back(double(ms) / iters[v]);
    }
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  std::vector<Timing> out;
  for (auto& s : samples) {
    std::sort(s.begin(), s.end());
    out.push_back({s[s.size() / 2], s.front(), s.back()});
  }
  return out;
}

// One shape: A_src [source_rows, k] random, index [m] (see make_index), every version checked and
// timed. True when every version checked out.
bool run_shape(const char* label, int m, int n, int k, int source_rows, const std::vector<int32_t>& host_index,
               bool once = false) {
  ladder::Operands g(m, n, k, 4);
  g.ctas = gemm::balanced_ctas(int64_t((m + 127) / 128) * ((n + 255) / 256), g.sms);
  __nv_bfloat16* a_src;
  int32_t* index;
  CK(cudaMalloc(&a_src, size_t(source_rows) * k * 2));
  CK(cudaMalloc(&index, size_t(m) * 4));
  CK(cudaMemcpy(index, host_index.data(), size_t(m) * 4, cudaMemcpyHostToDevice));
  ladder::fill_random(a_src, int64_t(source_rows) * k, 3);
  ladder::reference(a_src, index, g.b, g.ref, m, n, k);

  const auto plain = g.params<gemm::DefaultHooks>();
  auto gathered = g.params<GatherHooks>();
  gathered.hooks.rows = ladder::map_2d(a_src, k, source_rows, k, 64, 1);
  gathered.hooks.src = a_src;
  gathered.hooks.index = index;
  gathered.hooks.m = m;
  // Version 7: the same producer over 1's A (contiguous rows, index[i] = i).
  int32_t* identity;
  CK(cudaMalloc(&identity, size_t(m) * 4));
  {
    std::vector<int32_t> iota(m);
    for (int i = 0; i < m; ++i) iota[i] = i;
    CK(cudaMemcpy(identity, iota.data(), size_t(m) * 4, cudaMemcpyHostToDevice));
  }
  auto contiguous = gathered;
  contiguous.hooks.src = g.a;
  contiguous.hooks.index = identity;
  const int ctas = g.ctas;
  const auto gather = [&] {
    ladder::gather_rows<<<2 * g.sms, 256>>>(a_src, index, g.a, m, k);
    CK(cudaGetLastError());
  };
  const auto gemm_plain = [&] { CK((gemm::launch<Cfg, gemm::DefaultHooks>(plain, ctas, nullptr))); };
  gather();  // version 1's A
  struct Version {
    const char* name;
    std::function<void()> run;
  };
  const std::vector<Version> versions = {
      {"1 plain GEMM (A contiguous, TMA)", gemm_plain},
      {"2 gather, then GEMM", [&] { gather(); gemm_plain(); }},
      {"3 cp.async gather, noinc arrive", [&] { launch_cpasync<Arrival::kNoinc>(gathered, ctas); }},
      {"4 cp.async gather, fenced arrive", [&] { launch_cpasync<Arrival::kFenced>(gathered, ctas); }},
      {"5 1-row TMA gather (02)", [&] { CK((gemm::launch<Cfg, TmaRowHooks>(gathered, ctas, nullptr))); }},
      {"6 cp.async gather, consumer fence", [&] { launch_cpasync<Arrival::kConsumerFenced>(gathered, ctas); }},
      {"7 6 on contiguous rows", [&] { launch_cpasync<Arrival::kConsumerFenced>(contiguous, ctas); }},
      {"8 6 with early release", [&] { launch_cpasync<Arrival::kEarlyRelease>(gathered, ctas); }},
  };
  const double flop = 2.0 * m * n * k;
  std::printf("%s  M %d  N %d  K %d  (A from %d source rows, %d CTAs, %d stages)\n", label, m, n, k, source_rows, ctas,
              Cfg::kStages);
  bool all_ok = true;
  std::vector<std::string> verdicts;
  for (const Version& v : versions) {
    ladder::poison(g.out, int64_t(m) * n);
    v.run();
    CK(cudaDeviceSynchronize());
    const ladder::Verdict once_verdict = ladder::validate(g.out, g.ref, int64_t(m) * n);
    ladder::poison(g.out, int64_t(m) * n);
    for (int i = 0; i < (once ? 1 : 24); ++i) v.run();
    CK(cudaDeviceSynchronize());
    const ladder::Verdict again = ladder::validate(g.out, g.ref, int64_t(m) * n);
    const bool ok = once_verdict.ok() && again.ok();
    char line[160];
    std::snprintf(line, sizeof line, "rel %.2e / %.2e after 24  unwritten %llu  %s", once_verdict.rel, again.rel,
                  once_verdict.nonfinite + again.nonfinite, ok ? "ok" : "WRONG");
    verdicts.push_back(line);
    all_ok = all_ok && ok;
  }
  if (once) {
    for (size_t i = 0; i < versions.size(); ++i) std::printf("  %-34s %s\n", versions[i].name, verdicts[i].c_str());
    CK(cudaFree(a_src));
    CK(cudaFree(index));
    CK(cudaFree(identity));
    return all_ok;
  }
  std::vector<std::function<void()>> runs;
  for (const Version& v : versions) runs.push_back(v.run);
  runs.push_back(gather);
  const std::vector<Timing> times = time_interleaved(runs);
  for (size_t i = 0; i < versions.size(); ++i) {
    const Timing& t = times[i];
    std::printf("  %-34s %8.3f ms (%.3f-%.3f)  %6.1f TFLOP/s  %.3fx of 1  %s\n", versions[i].name, t.median, t.min, t.max,
                flop / t.median * 1e-9, t.median / times[0].median, verdicts[i].c_str());
  }
  std::printf("  (the gather alone: %.3f ms, %.0f GB/s read + write)\n", times.back().median,
              2.0 * m * k * 2 / times.back().median * 1e-6);
  CK(cudaFree(a_src));
  CK(cudaFree(index));
  CK(cudaFree(identity));
  return all_ok;
}

uint32_t xorshift(uint32_t& x) {
  x ^= x << 13, x ^= x >> 17, x ^= x << 5;
  return x;
}
// m rows drawn at random from source_rows: repeats (a token routed twice) and gaps (rows no one reads).
std::vector<int32_t> random_index(int m, int source_rows, uint32_t seed) {
  std::vector<int32_t> index(m);
  for (int i = 0; i < m; ++i) index[i] = int32_t(xorshift(seed) % uint32_t(source_rows));
  return index;
}
// A MoE dispatch's order: tokens x top-k distinct experts, sorted by expert (then token), so each
// token appears k times, in k different expert groups.
std::vector<int32_t> routed_index(int tokens, int topk, int experts, uint32_t seed) {
  std::vector<std::vector<int32_t>> by_expert(experts);
  for (int t = 0; t < tokens; ++t) {
    std::vector<int> chosen;
    while (int(chosen.size()) < topk) {
      const int e = int(xorshift(seed) % uint32_t(experts));
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    for (int e : chosen) by_expert[e].push_back(t);
  }
  std::vector<int32_t> index;
  for (const auto& rows : by_expert) index.insert(index.end(), rows.begin(), rows.end());
  return index;
}

}  // namespace

int main(int argc, char** argv) {
  bool ok = true;
  if (argc > 4) {
    const int m = std::atoi(argv[1]), n = std::atoi(argv[2]), k = std::atoi(argv[3]), rows = std::atoi(argv[4]);
    if (m < 1 || n % 256 != 0 || k % 64 != 0 || rows < 1) {
      std::fprintf(stderr, "M >= 1, N a multiple of 256, K of 64, SOURCE_ROWS >= 1 (got %d %d %d %d)\n", m, n, k, rows);
      return 1;
    }
    const bool once = argc > 5 && std::string(argv[5]) == "once";
    // rows == 4096 with m == 32768: config A's routed order (below), else random rows.
    const std::vector<int32_t> index = m == 32768 && rows == 4096 ? routed_index(4096, 8, 32, 777) : random_index(m, rows, 12345);
    ok = run_shape("07_gather_cpasync", m, n, k, rows, index, once);
  } else {
    ok = run_shape("07_gather_cpasync square", 4096, 8192, 4096, 5096, random_index(4096, 5096, 12345)) && ok;
    // Config A at world 1 (bench/moe.ts): T 4096, top-8 of 32 experts, H 7168, I 2048; the
    // up-projection's rows as one GEMM (one B for every group: the A side is what is measured).
    ok = run_shape("07_gather_cpasync config A up", 32768, 2048, 7168, 4096, routed_index(4096, 8, 32, 777)) && ok;
    // One expert group of config A (about T k / E = 1024 rows; 1000: a partial last tile). 64 tiles:
    // half the SMs, as a lone group would run.
    // Config B's up-projection (T 16384, top-4 of 16 experts, H 4096, I 1536).
    ok = run_shape("07_gather_cpasync config B up", 65536, 1536, 4096, 16384, routed_index(16384, 4, 16, 555)) && ok;
    ok = run_shape("07_gather_cpasync config A group", 1000, 2048, 7168, 4096, random_index(1000, 4096, 99)) && ok;
  }
  std::printf("%s\n", ok ? "all versions ok" : "SOME VERSION WRONG");
  return ok ? 0 : 1;
}
