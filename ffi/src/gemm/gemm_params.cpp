#include "gemm_params.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "device_guard.hpp"
#include "status.hpp"

namespace weft::gemm_abi {

namespace {

bool aligned16(uint64_t p) { return (p & 15u) == 0; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// TMA coordinates are int32 and the copy engine takes strides below 2^40 bytes.
constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;
constexpr int64_t kMaxStrideBytes = int64_t(1) << 40;

void require_stride(const char* name, int64_t ld, int64_t min_ld, const char* min_name, int64_t elem) {
  WEFT_REQUIRE(ld >= min_ld, "%s (%lld) must be >= %s (%lld)", name, static_cast<long long>(ld), min_name,
               static_cast<long long>(min_ld));
  WEFT_REQUIRE((ld * elem) % 16 == 0,
               "%s (%lld elements = %lld bytes) must be a multiple of 16 bytes (%lld elements), as the TMA copy "
               "engine requires: pad the rows and pass the logical size in m, n, k",
               name, static_cast<long long>(ld), static_cast<long long>(ld * elem), static_cast<long long>(16 / elem));
  WEFT_REQUIRE(ld * elem < kMaxStrideBytes, "%s (%lld) is too large: rows must be under 2^40 bytes apart", name,
               static_cast<long long>(ld));
}

int device_of(const char* name, uint64_t ptr) {
  const int dev = pointer_device(reinterpret_cast<const void*>(ptr));
  WEFT_REQUIRE(dev >= 0, "%s (%#llx) must be device memory", name, static_cast<unsigned long long>(ptr));
  return dev;
}

}  // namespace

Validated validate_problem(const WeftGemmParams* p) {
  WEFT_REQUIRE(p, "params must not be NULL");
  WEFT_REQUIRE(p->size == sizeof(WeftGemmParams), "params->size is %u but this library's WeftGemmParams has %zu bytes",
               p->size, sizeof(WeftGemmParams));
  WEFT_REQUIRE(p->version == 2, "params->version is %u; this library reads version 2 (addresses as uint64_t, "
               "completion in a WeftOpLaunch)", p->version);
  WEFT_REQUIRE(p->a && p->b && p->c, "a, b and c must not be 0");
  WEFT_REQUIRE((p->flags & ~uint32_t(WEFT_GEMM_B_NK | WEFT_GEMM_OUT_F32)) == 0, "flags has unknown bits (0x%x)",
               p->flags);
  WEFT_REQUIRE(p->m >= 1 && p->n >= 1 && p->k >= 1, "m, n and k must be >= 1 (got %lld, %lld, %lld)",
               static_cast<long long>(p->m), static_cast<long long>(p->n), static_cast<long long>(p->k));
  WEFT_REQUIRE(p->m <= kMaxDim && p->n <= kMaxDim && p->k <= kMaxDim, "m, n and k must be below 2^31");
  Validated v{};
  v.b_nk = (p->flags & WEFT_GEMM_B_NK) != 0;
  v.out_f32 = (p->flags & WEFT_GEMM_OUT_F32) != 0;
  require_stride("lda", p->lda, p->k, "k", 2);
  if (v.b_nk) {
    require_stride("ldb", p->ldb, p->k, "k (B is [N, K])", 2);
  } else {
    require_stride("ldb", p->ldb, p->n, "n (B is [K, N])", 2);
  }
  require_stride("ldc", p->ldc, p->n, "n", v.out_f32 ? 4 : 2);
  WEFT_REQUIRE(aligned16(p->a), "a (%#llx) must be 16-byte aligned (TMA)", static_cast<unsigned long long>(p->a));
  WEFT_REQUIRE(aligned16(p->b), "b (%#llx) must be 16-byte aligned (TMA)", static_cast<unsigned long long>(p->b));
  WEFT_REQUIRE(aligned16(p->c), "c (%#llx) must be 16-byte aligned (TMA)", static_cast<unsigned long long>(p->c));

  v.device = device_of("a", p->a);
  const int bd = device_of("b", p->b), cd = device_of("c", p->c);
  WEFT_REQUIRE(bd == v.device, "b is on device %d but a is on device %d: operands must share a device", bd, v.device);
  WEFT_REQUIRE(cd == v.device, "c is on device %d but a is on device %d: operands must share a device", cd, v.device);
  if (p->stream) {
    int sd = -1;
    WEFT_CUDA(cudaStreamGetDevice(reinterpret_cast<cudaStream_t>(p->stream), &sd));
    WEFT_REQUIRE(sd == v.device, "stream belongs to device %d but the operands are on device %d", sd, v.device);
  }
  return v;
}

Choice choose(const WeftGemmParams& p, const Validated& v) {
  int sms = 0;
  WEFT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, v.device));
  const int64_t tiles_m = ceil_div(p.m, gemm::kTileM);
  auto tiles = [&](int tile_n) { return tiles_m * ceil_div(p.n, tile_n); };

  WEFT_REQUIRE(p.tile_n == 0 || p.tile_n == 64 || p.tile_n == 128 || p.tile_n == 256,
               "tile_n must be 0 (auto), 64, 128 or 256 (got %d)", p.tile_n);
  WEFT_REQUIRE(p.cluster_m >= 0 && p.cluster_m <= 2, "cluster_m must be 0 (auto), 1 or 2 (got %d)", p.cluster_m);
  WEFT_REQUIRE(p.cluster_n >= 0 && p.cluster_n <= 2, "cluster_n must be 0 (auto), 1 or 2 (got %d)", p.cluster_n);
  WEFT_REQUIRE(p.group_m >= 0, "group_m must be >= 0 (got %d)", p.group_m);
  WEFT_REQUIRE(p.max_ctas >= 0, "max_ctas must be >= 0 (got %d)", p.max_ctas);

  Choice c{};
  // 128 x 256 tiles have the best operand reuse per byte of shared memory: a 128 x 128 tile takes
  // 0.58 of a 128 x 256 tile's time for half its work (at M = 512 and 1024; bench/DECISIONS.md,
  // "Tiles are 256 wide unless 128-wide ones take fewer tile-times"). So 256-wide tiles unless 128-wide ones finish in fewer tile times (rounds x time
  // per tile), e.g. one wave of 256-wide tiles on 128 of 132 SMs (45 us at 512 x 8192 x 4096)
  // beats two of 128-wide ones (52 us). Narrower still (decode) when even 128-wide tiles leave SMs
  // without a tile.
  const auto rounds = [&](int tile_n) { return double(ceil_div(tiles(tile_n), sms)); };
  if (p.tile_n != 0) {
    c.tile.tile_n = p.tile_n;
  } else if (rounds(256) <= 0.58 * rounds(128)) {
    c.tile.tile_n = 256;
  } else if (tiles(128) >= sms) {
    c.tile.tile_n = 128;
  } else {
    c.tile.tile_n = 64;
  }
  // Clusters of two (TMA multicast of the shared operand) are built and selectable, but not the
  // default (bench/DECISIONS.md, "Clusters of one by default").
  c.tile.cluster_m = p.cluster_m ? p.cluster_m : 1;
  c.tile.cluster_n = p.cluster_n ? p.cluster_n : 1;
  WEFT_REQUIRE(gemm::tile_config_supported(c.tile),
               "tile_n %d with cluster_m %d, cluster_n %d is not built; supported: tile_n 256 or 128 with "
               "cluster_m 1 or 2 (cluster_n 1), tile_n 64 with cluster_n 1 or 2 (cluster_m 1)",
               c.tile.tile_n, c.tile.cluster_m, c.tile.cluster_n);
  c.stages = gemm::pipeline_stages(c.tile, v.out_f32);
  const int cluster = c.tile.cluster_m * c.tile.cluster_n;
  const int64_t units = ceil_div(p.m, int64_t(gemm::kTileM) * c.tile.cluster_m) * ceil_div(p.n, int64_t(c.tile.tile_n) * c.tile.cluster_n);
  c.ctas = p.max_ctas ? (p.max_ctas < sms ? p.max_ctas : sms) : gemm::balanced_ctas(units, sms, cluster);
  // group_m counts cluster tiles: a cluster of two along M makes each band twice as high.
  c.group_m = p.group_m ? p.group_m : std::max(1, gemm::default_band(c.tile.tile_n, c.ctas) / c.tile.cluster_m);
  WEFT_REQUIRE(c.ctas >= c.tile.cluster_m * c.tile.cluster_n, "max_ctas (%d) is smaller than one cluster (%d CTAs)",
               p.max_ctas, c.tile.cluster_m * c.tile.cluster_n);
  return c;
}

}  // namespace weft::gemm_abi
