// publish.cu — completion for a launch that is a sequence of kernels and copies (the sequential
// path, or a fused kernel followed by copies): an earlier kernel reports into scratch completion
// words, and this one-thread kernel, last on the stream, publishes the launch's own completion with
// that kernel's outcome. A stage that never published its sequence number counts as failed.
#include "fused/fused.h"
#include "primitives/completion.cuh"
#include "primitives/signal.cuh"
#include "weft.h"

namespace weft::fused {

namespace {

__global__ void publish_kernel(const uint64_t* scratch, uint64_t scratch_seq, Completion c) {
  // The earlier kernel published with st.release.sys and finished before this one started (stream
  // order); scratch is host-mapped, so read it past any cache.
  const uint64_t word = sys::signal_load(scratch);
  uint64_t reason = 0;
  bool failed = false;
  if ((word & ~kFailedBit) < scratch_seq) {
    failed = true;
    reason = WEFT_TP_FAIL_STAGE_MISSING;
  } else if (word & kFailedBit) {
    failed = true;
    reason = sys::signal_load(scratch + 1);
  }
  if (failed) c.done[1] = reason;
  sys::signal_store(c.done, failed ? (c.seq | kFailedBit) : c.seq);
}

}  // namespace

cudaError_t preload_publish() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, publish_kernel);
}

cudaError_t launch_publish(const uint64_t* scratch, uint64_t scratch_seq, const gemm::CompletionWords& completion,
                           cudaStream_t stream) {
  publish_kernel<<<1, 1, 0, stream>>>(scratch, scratch_seq, Completion{completion.done, completion.seq, completion.arrivals});
  return cudaGetLastError();
}

}  // namespace weft::fused
