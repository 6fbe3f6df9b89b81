// route.cu — moeRoute: top-k ids and softmax weights of every token, one warp per token
// (route.cuh has the rule), 16 tokens per CTA. A launch with completion words publishes its
// sequence number like every op (cuda/primitives/completion.cuh); tokens = 0 still runs one CTA so
// that it does.
#include <cuda_runtime.h>

#include "moe/moe.h"
#include "moe/route.cuh"
#include "primitives/completion.cuh"

namespace weft::moe {

namespace {

__global__ void __launch_bounds__(kThreads) route_kernel(const __grid_constant__ RouteArgs a) {
  const int64_t token = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (token < a.tokens)
    warp::route_token(a.logits, a.logits_dtype, token, a.experts, a.topk, a.normalize != 0, a.ids, a.weights);
  cta::finish(Completion{a.completion.done, a.completion.seq, a.completion.arrivals});
}

}  // namespace

cudaError_t launch_route(const RouteArgs& a, cudaStream_t stream) {
  const int64_t ctas = a.tokens > 0 ? (a.tokens + kWarps - 1) / kWarps : 1;
  route_kernel<<<unsigned(ctas), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace weft::moe
