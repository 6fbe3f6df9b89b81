// graph.cpp — weft_graph_*: capture what is enqueued on a stream into an executable CUDA graph and
// replay it. The MoE plans keep their epochs in device memory (cuda/moe/moe.h), so a replayed
// launch advances them like a host launch; their capture test (test/ops/moe.test.ts) lives on this.
// Thread-local capture mode: another thread's unrelated CUDA calls neither join nor break it.
#include <cuda_runtime_api.h>

#include "device_guard.hpp"
#include "status.hpp"

using namespace weft;

namespace {

// The device of `stream`: instantiation and launch run with it current (one process may drive
// ranks on several GPUs).
int device_of(void* stream) {
  int dev = -1;
  WEFT_CUDA(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &dev));
  return dev;
}

}  // namespace

extern "C" {

WEFT_API int weft_graph_capture_begin(void* stream) {
  return guard([&] {
    WEFT_REQUIRE(stream, "stream must not be NULL: the legacy default stream cannot be captured");
    WEFT_CUDA(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal));
  });
}

WEFT_API int weft_graph_capture_end(void* stream, void** out_graph_exec) {
  return guard([&] {
    WEFT_REQUIRE(stream && out_graph_exec, "stream and out_graph_exec must not be NULL");
    // End the capture before anything else can fail: a call that throws first would leave the
    // stream (and, in thread-local mode, every unsafe call of this thread) capturing.
    cudaGraph_t graph = nullptr;
    WEFT_CUDA(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph));
    DeviceGuard g(device_of(stream));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    WEFT_CUDA(e);
    *out_graph_exec = exec;
  });
}

WEFT_API int weft_graph_launch(void* graph_exec, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(graph_exec && stream, "graph_exec and stream must not be NULL");
    DeviceGuard g(device_of(stream));
    WEFT_CUDA(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph_exec), static_cast<cudaStream_t>(stream)));
  });
}

WEFT_API int weft_graph_destroy(void* graph_exec) {
  return guard([&] {
    if (graph_exec) WEFT_CUDA(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph_exec)));
  });
}

}  // extern "C"
