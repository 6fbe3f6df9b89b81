// nn.h — the decoder's small layers (embedding, RMSNorm, rotary embedding, SwiGLU, the slotted KV
// cache and its attention, sampling): one kernel each, launched on the params' stream. The params
// are the ABI structs of weft.h, validated by ffi/src/nn/ before they get here; these launchers only
// pick a grid and launch.
//
// All of them but attention and sampling are memory-bound streams over rows of bf16: every thread
// moves 16-byte vectors (8 elements) and each byte is read once and written once. Their napkin
// math sits beside each kernel, at 3.3 TB/s (H200 HBM3e, achievable).
#pragma once

#include <cuda_runtime_api.h>

#include "weft.h"

namespace weft::nn {

cudaError_t embedding(const WeftEmbeddingParams& p);
cudaError_t rms_norm(const WeftRmsNormParams& p);
cudaError_t rope(const WeftRopeParams& p);
cudaError_t swiglu(const WeftSwigluParams& p);
cudaError_t kv_append(const WeftKvAppendParams& p);
cudaError_t cache_attention(const WeftCacheAttentionParams& p);

// The launch's completion words (cuda/primitives/completion.cuh); done == nullptr: untracked.
struct CompletionWords {
  uint64_t* done;
  uint64_t seq;
  uint32_t* arrivals;
};
cudaError_t sample(const WeftSampleParams& p, const CompletionWords& completion);

// Threads of one sampling CTA. A fixed number, not the GPU's choice: the order of the block's sums
// decides ties at the top-p cut and the inverse-CDF draw, so it must not change with the machine.
constexpr int kSampleThreads = 256;

}  // namespace weft::nn
