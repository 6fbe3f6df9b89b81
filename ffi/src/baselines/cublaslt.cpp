// cublaslt.cpp — the cuBLASLt GEMM baseline for benchmarks, dlopen'ed at run time so that the build
// needs no cuBLAS headers and the library loads without cuBLAS. Same WeftGemmParams as weft_gemm.
//
// Row-major trick: cuBLAS is column-major, and a row-major [R, C] matrix is the column-major [C, R]
// one. So C[M,N] = A·op(B) is computed as Cᵀ[N,M] = op(B)ᵀ·Aᵀ with cuBLAS m = N, n = M:
//   cuBLAS "A" = our B: [N,K] row-major is col-major K x N -> op T;  [K,N] row-major is N x K -> op N
//   cuBLAS "B" = our A: [M,K] row-major is col-major K x M -> op N
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <library_types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "device_guard.hpp"
#include "gemm/gemm_params.hpp"
#include "status.hpp"
#include "weft.h"

using namespace weft;

namespace {

// The few cuBLASLt declarations we use (cublasLt.h, CUDA 13.0; values checked against the header
// on the GPU host by bench/gemm-host.sh).
using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque*;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
constexpr int CUBLAS_COMPUTE_32F = 68;
constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;
constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;
constexpr int CUBLAS_OP_N = 0;
constexpr int CUBLAS_OP_T = 1;
constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;

struct Api {
  void* lib = nullptr;
  std::string path;  // or why loading failed
  cublasStatus_t (*create)(cublasLtHandle_t*);
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, int, cudaDataType_t);
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, int, const void*, size_t);
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType_t, uint64_t, uint64_t, int64_t);
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t*);
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, int, const void*, size_t);
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t*, int*);
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                           const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);
};

const Api& api() {
  static const Api a = [] {
    Api x{};
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"}) {
      x.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (x.lib) {
        x.path = name;
        break;
      }
    }
    if (!x.lib) {
      const char* why = dlerror();
      x.path = std::string("not loaded: ") + (why ? why : "libcublasLt.so.13 / libcublasLt.so not found");
      return x;
    }
    auto sym = [&](const char* n) {
      void* f = dlsym(x.lib, n);
      if (!f) x.path = std::string("not loaded: ") + n + " missing";
      return f;
    };
    x.create = reinterpret_cast<decltype(x.create)>(sym("cublasLtCreate"));
    x.desc_create = reinterpret_cast<decltype(x.desc_create)>(sym("cublasLtMatmulDescCreate"));
    x.desc_set = reinterpret_cast<decltype(x.desc_set)>(sym("cublasLtMatmulDescSetAttribute"));
    x.layout_create = reinterpret_cast<decltype(x.layout_create)>(sym("cublasLtMatrixLayoutCreate"));
    x.pref_create = reinterpret_cast<decltype(x.pref_create)>(sym("cublasLtMatmulPreferenceCreate"));
    x.pref_set = reinterpret_cast<decltype(x.pref_set)>(sym("cublasLtMatmulPreferenceSetAttribute"));
    x.heuristic = reinterpret_cast<decltype(x.heuristic)>(sym("cublasLtMatmulAlgoGetHeuristic"));
    x.matmul = reinterpret_cast<decltype(x.matmul)>(sym("cublasLtMatmul"));
    if (!(x.create && x.desc_create && x.desc_set && x.layout_create && x.pref_create && x.pref_set && x.heuristic &&
          x.matmul)) {
      dlclose(x.lib);
      x.lib = nullptr;
    }
    return x;
  }();
  return a;
}

#define CUBLASLT(call)                                                                   \
  do {                                                                                   \
    cublasStatus_t st_ = (call);                                                         \
    if (st_ != 0) WEFT_FAIL(WEFT_E_CUDA, "%s failed with cublasStatus %d", #call, st_); \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// Per device: handle and workspace. Per problem: descriptors and the heuristic's algorithm, built
// once so that timed calls are only cublasLtMatmul.
struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};
struct Plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
};
using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t>;

std::mutex g_mutex;
std::map<int, DeviceState> g_devices;
std::map<PlanKey, Plan> g_plans;

const Plan& plan_for(const WeftGemmParams& p, int device, const DeviceState& ds) {
  const PlanKey key{device, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.flags};
  if (auto it = g_plans.find(key); it != g_plans.end()) return it->second;
  const Api& x = api();
  const bool b_nk = p.flags & WEFT_GEMM_B_NK;
  const cudaDataType_t out_type = (p.flags & WEFT_GEMM_OUT_F32) ? CUDA_R_32F : CUDA_R_16BF;
  Plan pl{};
  CUBLASLT(x.desc_create(&pl.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int op_a = b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  CUBLASLT(x.desc_set(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  CUBLASLT(x.desc_set(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  if (b_nk) {
    CUBLASLT(x.layout_create(&pl.a, CUDA_R_16BF, p.k, p.n, p.ldb));
  } else {
    CUBLASLT(x.layout_create(&pl.a, CUDA_R_16BF, p.n, p.k, p.ldb));
  }
  CUBLASLT(x.layout_create(&pl.b, CUDA_R_16BF, p.k, p.m, p.lda));
  CUBLASLT(x.layout_create(&pl.c, out_type, p.n, p.m, p.ldc));
  cublasLtMatmulPreference_t pref{};
  CUBLASLT(x.pref_create(&pref));
  const uint64_t ws = kWorkspaceBytes;
  CUBLASLT(x.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLASLT(x.heuristic(ds.handle, pl.desc, pl.a, pl.b, pl.c, pl.c, pref, 1, &result, &found));
  if (found < 1) WEFT_FAIL(WEFT_E_UNSUPPORTED, "cuBLASLt found no algorithm for this GEMM");
  pl.algo = result.algo;
  pl.workspace = result.workspaceSize;
  return g_plans.emplace(key, pl).first->second;
}

}  // namespace

extern "C" {

WEFT_API int weft_cublaslt_available(int32_t* out_available, const char** out_path) {
  return guard([&] {
    WEFT_REQUIRE(out_available, "out_available must not be NULL");
    *out_available = api().lib != nullptr;
    if (out_path) *out_path = api().path.c_str();
  });
}

WEFT_API int weft_cublaslt_gemm(const WeftGemmParams* params) {
  return guard([&] {
    const gemm_abi::Validated v = gemm_abi::validate_problem(params);
    const Api& x = api();
    if (!x.lib) WEFT_FAIL(WEFT_E_UNSUPPORTED, "cuBLASLt is not available (%s)", x.path.c_str());
    DeviceGuard g(v.device);
    std::lock_guard<std::mutex> lock(g_mutex);
    DeviceState& ds = g_devices[v.device];
    if (!ds.handle) {
      CUBLASLT(x.create(&ds.handle));
      WEFT_CUDA(cudaMalloc(&ds.workspace, kWorkspaceBytes));
    }
    const Plan& pl = plan_for(*params, v.device, ds);
    const float alpha = 1.0f, beta = 0.0f;
    const auto addr = [](uint64_t a) { return reinterpret_cast<void*>(a); };
    CUBLASLT(x.matmul(ds.handle, pl.desc, &alpha, addr(params->b), pl.a, addr(params->a), pl.b, &beta, addr(params->c), pl.c,
                      addr(params->c), pl.c, &pl.algo, ds.workspace, pl.workspace, reinterpret_cast<cudaStream_t>(params->stream)));
  });
}

}  // extern "C"
