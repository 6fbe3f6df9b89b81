// gemm.cpp — the GEMM engine's ABI: weft_gemm_choose (the configuration), a plan (validated,
// configured and its three tensor maps encoded once; cuda/gemm with the default hooks at each
// launch) and weft_gemm, one launch without a plan.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <memory>

#include "device_guard.hpp"
#include "driver.hpp"
#include "gemm/gemm.h"
#include "gemm_params.hpp"
#include "op_launch.hpp"
#include "out_struct.hpp"
#include "status.hpp"
#include "tensor_map.hpp"
#include "weft.h"

using namespace weft;

struct WeftGemmPlan {
  int device = 0;
  gemm::PlainLaunch launch{};
};

namespace {

void* addr(uint64_t a) { return reinterpret_cast<void*>(a); }

// Validates, chooses the configuration and encodes the tensor maps (on the operands' device).
WeftGemmPlan prepare(const WeftGemmParams* params) {
  const gemm_abi::Validated v = gemm_abi::validate_problem(params);
  const WeftGemmParams& p = *params;
  DeviceGuard g(v.device);
  const gemm_abi::Choice c = gemm_abi::choose(p, v);
  const gemm::Boxes boxes = gemm::box_dims(c.tile, v.b_nk == false, v.out_f32, p.m);
  WeftGemmPlan plan;
  plan.device = v.device;
  gemm::PlainLaunch& l = plan.launch;
  encode_2d(&l.a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, addr(p.a), p.k, p.m, p.lda, boxes.a, "a");
  if (v.b_nk) {
    encode_2d(&l.b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, addr(p.b), p.k, p.n, p.ldb, boxes.b, "b");
  } else {
    encode_2d(&l.b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, addr(p.b), p.n, p.k, p.ldb, boxes.b, "b");
  }
  // TMA stores write whole 16-byte chunks: its map stops at the last full chunk of a row and the
  // kernel stores the remaining columns itself. (With fewer columns than one chunk the map is never
  // used; it is encoded over one chunk so that it is valid.)
  const int64_t chunk = v.out_f32 ? 4 : 8;
  l.c_tma_cols = static_cast<int32_t>(p.n - p.n % chunk);
  const uint64_t c_map_cols = l.c_tma_cols > 0 ? uint64_t(l.c_tma_cols) : uint64_t(chunk);
  if (v.out_f32) {
    encode_2d(&l.c, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, addr(p.c), c_map_cols, p.m, p.ldc, boxes.c, "c");
  } else {
    encode_2d(&l.c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, addr(p.c), c_map_cols, p.m, p.ldc, boxes.c, "c");
  }
  l.c_ptr = addr(p.c);
  l.ldc = p.ldc;
  l.m = static_cast<int32_t>(p.m);
  l.n = static_cast<int32_t>(p.n);
  l.k = static_cast<int32_t>(p.k);
  l.group_m = c.group_m;
  l.a_box_rows = gemm::a_box_rows(c.tile, p.m);
  l.b_n_major = !v.b_nk;
  l.out_f32 = v.out_f32;
  l.tile = c.tile;
  l.max_ctas = c.ctas;
  l.stream = reinterpret_cast<cudaStream_t>(p.stream);
  return plan;
}

void launch_plan(WeftGemmPlan& plan, const WeftOpLaunch* launch) {
  plan.launch.completion = completion_words<gemm::CompletionWords>(launch);
  DeviceGuard g(plan.device);
  WEFT_CUDA(gemm::launch_plain(plan.launch));
}

}  // namespace

extern "C" {

WEFT_API int weft_gemm(const WeftGemmParams* params, const WeftOpLaunch* launch) {
  return guard([&] {
    WeftGemmPlan plan = prepare(params);
    launch_plan(plan, launch);
  });
}

WEFT_API int weft_gemm_plan_create(const WeftGemmParams* params, WeftGemmPlan** out_plan) {
  return guard([&] {
    WEFT_REQUIRE(out_plan, "out_plan must not be NULL");
    auto plan = std::make_unique<WeftGemmPlan>(prepare(params));
    *out_plan = plan.release();
  });
}

WEFT_API int weft_gemm_plan_launch(WeftGemmPlan* plan, const WeftOpLaunch* launch) {
  return guard([&] {
    WEFT_REQUIRE(plan, "plan must not be NULL");
    launch_plan(*plan, launch);
  });
}

WEFT_API int weft_gemm_plan_destroy(WeftGemmPlan* plan) {
  return guard([&] { delete plan; });
}

WEFT_API int weft_gemm_choose(const WeftGemmParams* params, WeftGemmChoice* out) {
  return guard([&] {
    require_out_struct(out, "WeftGemmChoice");
    const gemm_abi::Validated v = gemm_abi::validate_problem(params);
    DeviceGuard g(v.device);
    const gemm_abi::Choice c = gemm_abi::choose(*params, v);
    out->tile_m = gemm::kTileM;
    out->tile_n = c.tile.tile_n;
    out->tile_k = gemm::kTileK;
    out->cluster_m = c.tile.cluster_m;
    out->cluster_n = c.tile.cluster_n;
    out->group_m = c.group_m;
    out->stages = c.stages;
    gemm::PlainLaunch l{};
    l.m = static_cast<int32_t>(params->m);
    l.n = static_cast<int32_t>(params->n);
    l.k = static_cast<int32_t>(params->k);
    l.b_n_major = !v.b_nk;
    l.out_f32 = v.out_f32;
    l.tile = c.tile;
    l.max_ctas = c.ctas;
    int ctas = 0;
    WEFT_CUDA(gemm::plain_grid(l, &ctas));
    out->ctas = ctas;
  });
}

WEFT_API int weft_reference_gemm(const void* a, const void* b, float* c, int64_t m, int64_t n, int64_t k, int64_t lda,
                                 int64_t ldb, int64_t ldc, int32_t b_nk, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(a && b && c, "a, b and c must not be NULL");
    WEFT_REQUIRE(m >= 1 && n >= 1 && k >= 1, "m, n and k must be >= 1");
    WEFT_REQUIRE(lda >= k && ldb >= (b_nk ? k : n) && ldc >= n, "row strides must cover a row");
    const int dev = pointer_device(a);
    WEFT_REQUIRE(dev >= 0, "a must be device memory");
    DeviceGuard g(dev);
    auto s = static_cast<cudaStream_t>(stream);
    WEFT_CUDA(gemm::reference_gemm(a, b, c, m, n, k, lda, ldb, ldc, b_nk == 0, s));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

}  // extern "C"
