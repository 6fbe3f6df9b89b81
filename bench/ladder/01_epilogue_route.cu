// 01_epilogue_route.cu — what it costs the engine's epilogue to choose a tile's destination at run
// time (bench/DECISIONS.md, "Copy-engine kernels choose their destination per phase at compile
// time": in the copy-engine reduce-scatter a run-time route cost ~8 us at (4096, 14336, 4096)). One
// GPU, no communication: the same GEMM C = A . B^T (bf16, B [N, K]) with three epilogue policies,
// each a Hooks type outside cuda/gemm, as an op would write it:
//   1  store     the engine's default policy (gemm::StoreEpilogue): one map, known at compile time
//   2  routed    fused::RoutedEpilogue with route() and out_map() at run time: the destination map
//                comes from a table in the kernel's parameters, indexed by a run-time value (always
//                the same map here, as in the copy-engine kernels' own tiles)
//   3  kinds     fused::RoutedEpilogue with two kinds of tile (rows in the first half of C, the
//                rest), each kind's map and operation fixed at compile time (kind_map<K>)
// Every version's output is poisoned with NaN before its run and checked element by element
// against a simple fp32 reference (relative error <= 1e-2, no element left unwritten).
//   bash bench/gpu-host.sh ladder/01_epilogue_route.cu      (GPU host; or build by hand:)
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++20 --expt-relaxed-constexpr -I ffi/include -I cuda \
//        -o build/01_epilogue_route bench/ladder/01_epilogue_route.cu && build/01_epilogue_route [M N K]
#include "common.cuh"
#include "fused/routed_epilogue.cuh"
#include "gemm/launch.cuh"

namespace {

using namespace weft;
using Cfg = gemm::Config<256, 1, 1, /*BNMajor=*/false, /*OutF32=*/false>;

struct RouteState {
  CUtensorMap out[2];  // the same C twice: a run-time choice between maps that are equal
  int32_t dest;        // which of them every tile takes (a kernel parameter: not known at compile time)
  int32_t half_tiles;  // tile rows in the first kind
};

// 2: the route at run time.
struct RoutedHooks : fused::RoutedHooks {
  using State = RouteState;
  static __device__ __forceinline__ fused::Route route(const State& s, const gemm::TileCoord&) {
    return fused::Route{1u << s.dest, 0, false, false};
  }
  static __device__ __forceinline__ const CUtensorMap* out_map(const State& s, int d) { return &s.out[d]; }
};

// 3: two kinds, each with its map fixed at compile time.
struct KindHooks : RoutedHooks {
  static constexpr int kKinds = 2;
  static __device__ __forceinline__ int kind(const State& s, const gemm::TileCoord& t) { return t.tile_m < s.half_tiles ? 0 : 1; }
  template <int Kind>
  static __device__ __forceinline__ fused::Route kind_route(const State&, const gemm::TileCoord&) {
    return fused::Route{1u, 0, false, false};
  }
  template <int Kind>
  static __device__ __forceinline__ const CUtensorMap* kind_map(const State& s) { return &s.out[Kind]; }
};

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 3 ? std::atoi(argv[1]) : 4096, n = argc > 3 ? std::atoi(argv[2]) : 14336,
            k = argc > 3 ? std::atoi(argv[3]) : 4096;
  if (m % 128 != 0 || n % 256 != 0 || k % 64 != 0) {
    std::fprintf(stderr, "M must be a multiple of 128, N of 256 and K of 64 (got %d %d %d)\n", m, n, k);
    return 1;
  }
  ladder::Operands g(m, n, k, 2);
  ladder::fill_random(g.a, int64_t(m) * k, 1);
  ladder::reference(g.a, nullptr, g.b, g.ref, m, n, k);
  const int ctas = g.ctas;
  const auto p1 = g.params<gemm::DefaultHooks>();
  auto p2 = g.params<RoutedHooks>();
  p2.hooks.out[0] = p2.hooks.out[1] = g.cm;
  p2.hooks.dest = 1;
  p2.hooks.half_tiles = m / 256;
  const auto p3 = p2;
  const ladder::Version versions[] = {
      {"1 store (compile-time map)", [&] { CK((gemm::launch<Cfg, gemm::DefaultHooks>(p1, ctas, nullptr))); }, g.ref},
      {"2 routed (run-time map)", [&] { CK((gemm::launch<Cfg, RoutedHooks>(p2, ctas, nullptr))); }, g.ref},
      {"3 kinds (compile-time per kind)", [&] { CK((gemm::launch<Cfg, KindHooks>(p3, ctas, nullptr))); }, g.ref},
  };
  std::printf("01_epilogue_route  M %d  N %d  K %d  (%d tiles of 128 x 256 on %d CTAs)\n", m, n, k, (m / 128) * (n / 256),
              ctas);
  const bool all_ok = ladder::run_versions(versions, g.out, int64_t(m) * n);
  return all_ok ? 0 : 1;
}
