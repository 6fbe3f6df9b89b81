// 02_gather_a.cu — the two contract points a MoE layer needs (cuda/gemm/hooks.cuh), on one GPU:
// an A source that gathers a tile's rows by index, and an epilogue that stops at a row bound (a
// group ending mid-tile). C = A . B^T with A[i] = A_src[index[i]] (bf16, B [N, K]):
//   1  gather, then GEMM   a copy kernel builds A from A_src (its time, then the GEMM's: timed
//                          apart and together), and the engine's plain GEMM runs on it
//   2  gathering source    the producer's warp 0 loads each tile's 128 rows as 1-row TMA boxes from
//                          A_src at index[row] straight into the stage (ASource::kLanes = 32); TMA
//                          applies the 128-byte swizzle by destination address, so the stage ends up
//                          as one 128-row box would leave it
//   3  2 + a row bound     the same, storing only rows below row_end (M - 100: inside a half-tile):
//                          whole half-tiles by TMA, the one that crosses row_end by gemm::store_rows;
//                          rows at or past row_end must keep the poison
// Every output is poisoned with NaN before its run and checked element by element against a
// simple fp32 reference of the gathered product (relative error <= 1e-2).
//   bash bench/gpu-host.sh ladder/02_gather_a.cu      (GPU host; or build as in bench/ladder/README.md)
#include <functional>

#include "common.cuh"
#include "gather.cuh"
#include "gemm/launch.cuh"

namespace {

using namespace weft;
using Cfg = gemm::Config<256, 1, 1, /*BNMajor=*/false, /*OutF32=*/false>;

struct GatherState {
  CUtensorMap rows;       // A_src [R, K], box {64, 1}: one row per load
  const int32_t* index;   // [M]: A's row i is A_src's row index[i]
  int32_t m;
  int32_t row_end;        // version 3: rows >= row_end are not this GEMM's
};

struct GatherHooks : gemm::DefaultHooks {
  using State = GatherState;
  template <class C>
  using ASource = ladder::TmaRowGather<C>;
};

// Version 3's policy: StoreEpilogue for whole half-tiles below row_end, plain bounded stores for the
// one that crosses it, nothing past it.
template <class C, class H>
struct RowBoundEpilogue : gemm::StoreEpilogue<C, H> {
  using Base = gemm::StoreEpilogue<C, H>;
  using Base::Base;
  template <int Kind, class S>
  __device__ __forceinline__ void store(float (&acc)[C::kTileN / 2], const gemm::TileCoord& t, const S& scheduler) {
    const auto& p = this->p_;
    const int32_t row0 = t.m0 + this->consumer_ * C::kConsumerRows;
    const int32_t rows = min(p.hooks.row_end - row0, C::kConsumerRows);
    if (rows <= 0) return;  // uniform over the warpgroup
    if (rows == C::kConsumerRows) return Base::template store<Kind>(acc, t, scheduler);
    gemm::store_rows<C>(acc, static_cast<__nv_bfloat16*>(p.tail.c) + int64_t(row0) * p.tail.ldc + t.n0, p.tail.ldc, rows,
                        min(C::kTileN, p.problem.n - t.n0));
  }
};

struct BoundHooks : GatherHooks {
  template <class C, class H>
  using Epilogue = RowBoundEpilogue<C, H>;
};

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 3 ? std::atoi(argv[1]) : 4096, n = argc > 3 ? std::atoi(argv[2]) : 8192,
            k = argc > 3 ? std::atoi(argv[3]) : 4096;
  if (m < 128 || m % 128 != 0 || n % 256 != 0 || k % 64 != 0) {
    std::fprintf(stderr, "M must be a multiple of 128, N of 256 and K of 64 (got %d %d %d)\n", m, n, k);
    return 1;
  }
  const int source_rows = m + 1000;
  const int row_end = m - 100;
  ladder::Operands g(m, n, k, 4);
  __nv_bfloat16* a_src;
  int32_t* index;
  CK(cudaMalloc(&a_src, size_t(source_rows) * k * 2));
  CK(cudaMalloc(&index, size_t(m) * 4));
  std::vector<int32_t> host_index(m);
  uint32_t x = 12345;
  for (int i = 0; i < m; ++i) {  // arbitrary rows, repeats allowed (a token routed to one expert twice)
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    host_index[i] = int32_t(x % uint32_t(source_rows));
  }
  CK(cudaMemcpy(index, host_index.data(), size_t(m) * 4, cudaMemcpyHostToDevice));
  ladder::fill_random(a_src, int64_t(source_rows) * k, 3);
  ladder::reference(a_src, index, g.b, g.ref, m, n, k);
  const int ctas = g.ctas;
  const auto plain = g.params<gemm::DefaultHooks>();
  auto gathered = g.params<GatherHooks>();
  gathered.hooks.rows = ladder::map_2d(a_src, k, source_rows, k, 64, 1);
  gathered.hooks.index = index;
  gathered.hooks.m = m;
  gathered.hooks.row_end = m;
  auto bound = g.params<BoundHooks>();
  bound.hooks = gathered.hooks;
  bound.hooks.row_end = row_end;

  const auto gather = [&] {
    ladder::gather_rows<<<2 * g.sms, 256>>>(a_src, index, g.a, m, k);
    CK(cudaGetLastError());
  };
  const auto gemm_plain = [&] { CK((gemm::launch<Cfg, gemm::DefaultHooks>(plain, ctas, nullptr))); };
  struct Version {
    const char* name;
    std::function<void()> run;
    int64_t rows_written;
  };
  const Version versions[] = {
      {"1 gather, then GEMM", [&] { gather(); gemm_plain(); }, m},
      {"2 gathering A source", [&] { CK((gemm::launch<Cfg, GatherHooks>(gathered, ctas, nullptr))); }, m},
      {"3 gathering source, row bound", [&] { CK((gemm::launch<Cfg, BoundHooks>(bound, ctas, nullptr))); }, row_end},
  };
  std::printf("02_gather_a  M %d  N %d  K %d  (A from %d source rows; version 3 stores rows < %d)\n", m, n, k,
              source_rows, row_end);
  bool all_ok = true;
  for (const Version& v : versions) {
    ladder::poison(g.out, int64_t(m) * n);
    v.run();
    CK(cudaDeviceSynchronize());
    const ladder::Verdict kept = ladder::validate(g.out, g.ref, v.rows_written * n);
    // Past the rows it may write, every element must still be the poison.
    const ladder::Verdict past = ladder::validate(g.out + v.rows_written * n, g.ref + v.rows_written * n, (m - v.rows_written) * int64_t(n));
    const bool ok = kept.ok() && past.nonfinite == uint64_t(m - v.rows_written) * n;
    const double us = ladder::time_us(v.run);
    std::printf("  %-32s %9.2f us  rel %.2e  unwritten %llu  written past row_end %lld  %s\n", v.name, us, kept.rel,
                kept.nonfinite, (long long)((m - v.rows_written) * int64_t(n) - int64_t(past.nonfinite)), ok ? "ok" : "WRONG");
    all_ok = all_ok && ok;
  }
  std::printf("  (the gather alone: %.2f us; the GEMM alone on gathered A: %.2f us)\n", ladder::time_us(gather),
              ladder::time_us(gemm_plain));
  CK(cudaFree(a_src));
  CK(cudaFree(index));
  return all_ok ? 0 : 1;
}
