// 03_register_exchange.cu — the decode all-reduce's register exchange (fused::RegisterExchangeHooks,
// gemm_exchange.cuh; bench/DECISIONS.md, "The register exchange (m ≤ 32) is its own kernel") on one
// GPU, without NVLink or a second rank: what its mechanism costs the GEMM. M = 16, 64-wide tiles:
//   1  GEMM      the engine's plain GEMM (the compute-only limit)
//   2  loopback  the shipped register-exchange kernel posing as rank 0 of two, its "peer" region
//                pointed back into its own: every warp stores its fragment as flagged words
//                (primitives/flagged.cuh), polls the same words back and adds them, so out = P +
//                bf16(P) for this GPU's partial P (checked against 2 x the fp32 reference)
// Each launch takes the next epoch and its parity half of the region, as plan launches do, so no
// poll can be satisfied by a previous launch's words.
//   bash bench/gpu-host.sh ladder/03_register_exchange.cu      (GPU host; build as in README.md)
#include "common.cuh"
#include "fused/gemm_exchange.cuh"
#include "gemm/launch.cuh"

namespace {

using namespace weft;
using Cfg = gemm::Config<64, 1, 1, /*BNMajor=*/false, /*OutF32=*/false>;

__global__ void scale(float* x, int64_t n, float by) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) x[i] *= by;
}

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 3 ? std::atoi(argv[1]) : 16, n = argc > 3 ? std::atoi(argv[2]) : 8192,
            k = argc > 3 ? std::atoi(argv[3]) : 4096;
  if (m < 1 || m > fused::kRegisterExchangeRows || n % 64 != 0 || k % 64 != 0) {
    std::fprintf(stderr, "M must be in [1, %d], N a multiple of 64 and K of 64 (got %d %d %d)\n", fused::kRegisterExchangeRows,
                 m, n, k);
    return 1;
  }
  ladder::Operands g(m, n, k, 6);
  ladder::fill_random(g.a, int64_t(m) * k, 5);
  ladder::reference(g.a, nullptr, g.b, g.ref, m, n, k);
  // This GEMM's own boxes: A exactly m rows high (as gemm::a_box_rows makes it), 64-wide B tiles.
  const CUtensorMap am = ladder::map_2d(g.a, k, m, k, 64, uint32_t(m));
  const CUtensorMap bm = ladder::map_2d(g.b, k, n, k, 64, 64);
  const int ctas = std::min(n / 64, g.sms);
  auto plain = g.params<gemm::DefaultHooks>();
  plain.a = am;
  plain.b = bm;
  plain.problem.a_box_rows = m;

  // The region of both parities [2][world 2][slot_rows][n] bf16, as the planner lays it out.
  const int32_t slot_rows = 128;
  const int64_t slot_bytes = int64_t(slot_rows) * n * 2;
  uint8_t* region = nullptr;
  CK(cudaMalloc(&region, size_t(4 * slot_bytes)));
  CK(cudaMemset(region, 0, size_t(4 * slot_bytes)));
  auto loop = g.params<fused::RegisterExchangeHooks>();
  loop.a = am;
  loop.b = bm;
  loop.problem.a_box_rows = m;
  fused::ScatterState& s = loop.hooks;
  s.out[0] = g.cm;
  s.rank = 0;
  s.world = 2;
  s.tiles_m = 1;
  s.tiles_n = n / 64;
  s.group_m = g.group_m;
  s.exchange = 1;
  s.slot_rows = slot_rows;
  s.ld = n;
  s.register_rows = m;
  s.timeout_ns = 2'000'000'000ull;
  // Rank 0 stores into region[1] + half + 0 * slot and polls recv + 1 * slot: "peer" 1's region is
  // this one, one slot on, so the words it stores are the words it polls.
  s.region[0] = region;
  s.region[1] = region + slot_bytes;
  uint64_t epoch = 0;
  const auto next_epoch = [&] {
    ++epoch;
    s.epoch = epoch;
    s.recv_row0 = int32_t((epoch & 1) * 2 * slot_rows);
    s.recv = reinterpret_cast<const uint16_t*>(region + int64_t(s.recv_row0) * n * 2);
  };
  float* twice = nullptr;
  CK(cudaMalloc(&twice, size_t(m) * n * 4));
  CK(cudaMemcpy(twice, g.ref, size_t(m) * n * 4, cudaMemcpyDeviceToDevice));
  scale<<<256, 256>>>(twice, int64_t(m) * n, 2.0f);
  CK(cudaGetLastError());

  const ladder::Version versions[] = {
      {"1 GEMM", [&] { CK((gemm::launch<Cfg, gemm::DefaultHooks>(plain, ctas, nullptr))); }, g.ref},
      {"2 register exchange, loopback", [&] {
         next_epoch();
         CK((gemm::launch<Cfg, fused::RegisterExchangeHooks>(loop, ctas, nullptr)));
       }, twice},
  };
  std::printf("03_register_exchange  M %d  N %d  K %d  (%d CTAs of 128 x 64 tiles)\n", m, n, k, ctas);
  const bool all_ok = ladder::run_versions(versions, g.out, int64_t(m) * n);
  CK(cudaFree(region));
  CK(cudaFree(twice));
  return all_ok ? 0 : 1;
}
