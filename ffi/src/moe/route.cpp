// route.cpp — weft_moe_route: top-k routing of a [tokens, experts] logits matrix on the GPU
// (cuda/moe/route.cuh has the rule).
#include <cuda_runtime_api.h>

#include "device_guard.hpp"
#include "moe/moe.h"
#include "status.hpp"

using namespace weft;

namespace {

constexpr char kOp[] = "weft_moe_route";

int device_of(const void* ptr, const char* name) {
  const int dev = pointer_device(ptr);
  WEFT_REQUIRE(dev >= 0, "%s: %s (%p) is not device memory", kOp, name, ptr);
  return dev;
}

}  // namespace

extern "C" WEFT_API int weft_moe_route(const WeftMoeRouteParams* p) {
  return guard([&] {
    WEFT_REQUIRE(p, "%s: params must not be NULL", kOp);
    WEFT_REQUIRE(p->size == sizeof(WeftMoeRouteParams) && p->version == 1,
                 "%s: params->size/version must be sizeof(WeftMoeRouteParams) (%zu) and 1 (got %u, %u)", kOp,
                 sizeof(WeftMoeRouteParams), p->size, p->version);
    WEFT_REQUIRE((p->flags & ~WEFT_MOE_NORMALIZE) == 0, "%s: flags has unknown bits (0x%x)", kOp, p->flags);
    WEFT_REQUIRE(p->logits_dtype == WEFT_F32 || p->logits_dtype == WEFT_BF16, "%s: logits_dtype must be WEFT_F32 or WEFT_BF16",
                 kOp);
    WEFT_REQUIRE(p->experts >= 1 && p->experts <= moe::kMaxExperts, "%s: experts must be in [1, %d] (got %d)", kOp,
                 moe::kMaxExperts, p->experts);
    WEFT_REQUIRE(p->topk >= 1 && p->topk <= p->experts, "%s: topk must be in [1, experts = %d] (got %d)", kOp, p->experts,
                 p->topk);
    WEFT_REQUIRE(p->tokens >= 0 && p->tokens < (int64_t(1) << 31), "%s: tokens must be in [0, 2^31) (got %lld)", kOp,
                 (long long)p->tokens);
    WEFT_REQUIRE(p->done == 0 || p->arrivals != 0, "%s: arrivals is required when done is set", kOp);
    int dev = -1;
    if (p->tokens > 0) {
      dev = device_of(reinterpret_cast<const void*>(p->logits), "logits");
      WEFT_REQUIRE(device_of(reinterpret_cast<const void*>(p->ids), "ids") == dev &&
                       device_of(reinterpret_cast<const void*>(p->weights), "weights") == dev,
                   "%s: logits, ids and weights must be on one device", kOp);
      WEFT_REQUIRE((p->ids & 3) == 0 && (p->weights & 3) == 0, "%s: ids and weights must be 4-byte aligned", kOp);
    }
    auto stream = reinterpret_cast<cudaStream_t>(p->stream);
    if (stream) WEFT_CUDA(cudaStreamGetDevice(stream, &dev));
    if (dev < 0) WEFT_CUDA(cudaGetDevice(&dev));
    DeviceGuard g(dev);
    moe::RouteArgs a{};
    a.logits = reinterpret_cast<const void*>(p->logits);
    a.logits_dtype = p->logits_dtype;
    a.normalize = (p->flags & WEFT_MOE_NORMALIZE) ? 1 : 0;
    a.tokens = p->tokens;
    a.experts = p->experts;
    a.topk = p->topk;
    a.ids = reinterpret_cast<int32_t*>(p->ids);
    a.weights = reinterpret_cast<float*>(p->weights);
    a.completion = moe::CompletionWords{reinterpret_cast<uint64_t*>(p->done), p->seq,
                                        p->done ? reinterpret_cast<uint32_t*>(p->arrivals) : nullptr};
    WEFT_CUDA(moe::launch_route(a, stream));
  });
}
