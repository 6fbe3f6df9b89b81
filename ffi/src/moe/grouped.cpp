// grouped.cpp — weft_grouped_gemm / weft_grouped_gemm_choose: validates, chooses the tile width and
// the grid, encodes the maps (b as one 3-D map) and launches the grouped kernel (cuda/moe/grouped.cuh).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "device_guard.hpp"
#include "gemm/gemm.h"
#include "moe/grouped_choice.hpp"
#include "moe/maps.hpp"
#include "moe/moe.h"
#include "op_launch.hpp"
#include "status.hpp"
#include "tensor_map.hpp"
#include "weft.h"

using namespace weft;

namespace {

constexpr char kOp[] = "weft_grouped_gemm";
constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;
constexpr int32_t kMaxGroups = 4096;

struct Checked {
  int device;
  bool b_nk;
};

int device_of(uint64_t ptr, const char* name) {
  const int dev = pointer_device(reinterpret_cast<const void*>(ptr));
  WEFT_REQUIRE(dev >= 0, "%s: %s (%#llx) must be device memory", kOp, name, (unsigned long long)ptr);
  return dev;
}

Checked validate(const WeftGroupedGemmParams* p) {
  WEFT_REQUIRE(p, "%s: params must not be NULL", kOp);
  WEFT_REQUIRE(p->size == sizeof(WeftGroupedGemmParams) && p->version == 2,
               "%s: params->size/version must be sizeof(WeftGroupedGemmParams) (%zu) and 2 (got %u, %u; version 2 takes "
               "its completion in a WeftOpLaunch)", kOp, sizeof(WeftGroupedGemmParams), p->size, p->version);
  WEFT_REQUIRE((p->flags & ~uint32_t(WEFT_GEMM_B_NK)) == 0, "%s: flags has unknown bits (0x%x)", kOp, p->flags);
  WEFT_REQUIRE(p->a && p->b && p->offsets && p->out, "%s: a, b, offsets and out must not be 0", kOp);
  WEFT_REQUIRE(p->m >= 1 && p->n >= 1 && p->k >= 1 && p->m <= kMaxDim && p->n <= kMaxDim && p->k <= kMaxDim,
               "%s: m, n and k must be in [1, 2^31) (got %lld, %lld, %lld)", kOp, (long long)p->m, (long long)p->n,
               (long long)p->k);
  WEFT_REQUIRE(p->n % 8 == 0 && p->k % 8 == 0,
               "%s: n (%lld) and k (%lld) must be multiples of 8: every row of a, b and out starts on 16 bytes (TMA)",
               kOp, (long long)p->n, (long long)p->k);
  WEFT_REQUIRE(p->groups >= 1 && p->groups <= kMaxGroups, "%s: groups must be in [1, %d] (got %d)", kOp, kMaxGroups,
               p->groups);
  WEFT_REQUIRE(p->tile_n == 0 || p->tile_n == 128 || p->tile_n == 256, "%s: tile_n must be 0 (chosen), 128 or 256 (got %d)",
               kOp, p->tile_n);
  WEFT_REQUIRE(p->max_ctas >= 0, "%s: max_ctas must be >= 0 (got %d)", kOp, p->max_ctas);
  for (const auto& [ptr, name] : {std::pair{p->a, "a"}, {p->b, "b"}, {p->out, "out"}})
    WEFT_REQUIRE((ptr & 15) == 0, "%s: %s (%#llx) must be 16-byte aligned (TMA)", kOp, name, (unsigned long long)ptr);
  WEFT_REQUIRE((p->offsets & 3) == 0, "%s: offsets must be 4-byte aligned", kOp);
  Checked c{};
  c.b_nk = (p->flags & WEFT_GEMM_B_NK) != 0;
  c.device = device_of(p->a, "a");
  for (const auto& [ptr, name] : {std::pair{p->b, "b"}, {p->offsets, "offsets"}, {p->out, "out"}}) {
    const int d = device_of(ptr, name);
    WEFT_REQUIRE(d == c.device, "%s: %s is on device %d but a is on device %d", kOp, name, d, c.device);
  }
  if (p->stream) {
    int sd = -1;
    WEFT_CUDA(cudaStreamGetDevice(reinterpret_cast<cudaStream_t>(p->stream), &sd));
    WEFT_REQUIRE(sd == c.device, "%s: stream belongs to device %d but the operands are on device %d", kOp, sd, c.device);
  }
  return c;
}

moe::GroupedChoice choose(const WeftGroupedGemmParams& p, int device) {
  int sms = 0;
  WEFT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int most = p.max_ctas ? std::min(p.max_ctas, sms) : sms;
  return moe::choose_grouped(p.m, p.n, p.groups, p.tile_n, most);
}

}  // namespace

extern "C" {

WEFT_API int weft_grouped_gemm(const WeftGroupedGemmParams* params, const WeftOpLaunch* launch) {
  return guard([&] {
    const Checked v = validate(params);
    const moe::CompletionWords completion = completion_words<moe::CompletionWords>(launch);
    const WeftGroupedGemmParams& p = *params;
    DeviceGuard g(v.device);
    const moe::GroupedChoice c = choose(p, v.device);
    moe::GroupedLaunch l{};
    l.a_box_rows = p.m < gemm::kTileM ? int32_t(p.m) : gemm::kTileM;
    const uint32_t a_box[2] = {uint32_t(gemm::kTileK), uint32_t(l.a_box_rows)};
    encode_bf16(&l.a, reinterpret_cast<const void*>(p.a), uint64_t(p.k), uint64_t(p.m), uint64_t(p.k), a_box, "a");
    moe::encode_weights(&l.b, reinterpret_cast<const void*>(p.b), p.groups, p.n, p.k, !v.b_nk, 0, p.n, c.tile_n, false, "b");
    const uint32_t c_box[2] = {64, gemm::kTileM / 2};
    encode_bf16(&l.c, reinterpret_cast<const void*>(p.out), uint64_t(p.n), uint64_t(p.m), uint64_t(p.n), c_box, "out");
    l.c_ptr = reinterpret_cast<void*>(p.out);
    l.ldc = p.n;
    l.rows = int32_t(p.m);
    l.n = int32_t(p.n);
    l.k = int32_t(p.k);
    const int32_t* offsets = reinterpret_cast<const int32_t*>(p.offsets);
    l.groups = moe::Groups{offsets, offsets + 1, nullptr, nullptr, p.groups, int32_t(p.m),
                           int32_t((p.n + c.tile_n - 1) / c.tile_n), c.tile_n, c.band, 0};
    l.tile_n = c.tile_n;
    l.b_n_major = !v.b_nk;
    l.ctas = c.ctas;
    l.completion = completion;
    l.stream = reinterpret_cast<cudaStream_t>(p.stream);
    WEFT_CUDA(moe::launch_grouped(l));
  });
}

WEFT_API int weft_grouped_gemm_choose(const WeftGroupedGemmParams* params, WeftGroupedGemmChoice* out) {
  return guard([&] {
    WEFT_REQUIRE(out && out->size == sizeof(WeftGroupedGemmChoice) && out->version == 1,
                 "%s: out must be a WeftGroupedGemmChoice with size %zu and version 1", kOp, sizeof(WeftGroupedGemmChoice));
    const Checked v = validate(params);
    DeviceGuard g(v.device);
    const moe::GroupedChoice c = choose(*params, v.device);
    out->tile_n = c.tile_n;
    out->ctas = c.ctas;
    out->band = c.band;
    out->stages = moe::grouped_stages(c.tile_n);
  });
}

}  // extern "C"
