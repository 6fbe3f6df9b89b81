// stream.cpp — streams and events, each created on and bound to one device.
#include <cuda_runtime_api.h>

#include "device_guard.hpp"
#include "status.hpp"
#include "weft.h"

using namespace weft;

namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }
}  // namespace

extern "C" {

WEFT_API int weft_stream_create(int32_t device, void** out_stream) {
  return guard([&] {
    WEFT_REQUIRE(out_stream, "out_stream must not be NULL");
    DeviceGuard g(device);
    cudaStream_t s = nullptr;
    // Non-blocking: our streams never serialize against the legacy default stream, which other
    // libraries in the same process may be using.
    WEFT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out_stream = s;
  });
}

WEFT_API int weft_stream_destroy(void* stream) {
  return guard([&] {
    if (stream) WEFT_CUDA(cudaStreamDestroy(as_stream(stream)));
  });
}

WEFT_API int weft_stream_synchronize(void* stream) {
  return guard([&] { WEFT_CUDA(cudaStreamSynchronize(as_stream(stream))); });
}

WEFT_API int weft_stream_query(void* stream, int32_t* out_done) {
  return guard([&] {
    WEFT_REQUIRE(out_done, "out_done must not be NULL");
    cudaError_t e = cudaStreamQuery(as_stream(stream));
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      *out_done = 0;
      return;
    }
    WEFT_CUDA(e);
    *out_done = 1;
  });
}

WEFT_API int weft_event_create(int32_t device, void** out_event) {
  return guard([&] {
    WEFT_REQUIRE(out_event, "out_event must not be NULL");
    DeviceGuard g(device);
    cudaEvent_t e = nullptr;
    WEFT_CUDA(cudaEventCreate(&e));
    *out_event = e;
  });
}

WEFT_API int weft_event_destroy(void* event) {
  return guard([&] {
    if (event) WEFT_CUDA(cudaEventDestroy(as_event(event)));
  });
}

WEFT_API int weft_event_record(void* event, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(event, "event must not be NULL");
    WEFT_CUDA(cudaEventRecord(as_event(event), as_stream(stream)));
  });
}

WEFT_API int weft_event_synchronize(void* event) {
  return guard([&] {
    WEFT_REQUIRE(event, "event must not be NULL");
    WEFT_CUDA(cudaEventSynchronize(as_event(event)));
  });
}

WEFT_API int weft_event_elapsed(void* start, void* end, float* out_ms) {
  return guard([&] {
    WEFT_REQUIRE(start && end && out_ms, "start, end and out_ms must not be NULL");
    WEFT_CUDA(cudaEventElapsedTime(out_ms, as_event(start), as_event(end)));
  });
}

WEFT_API int weft_stream_order(int32_t device, void* producer, void* consumer) {
  return guard([&] {
    if (producer == consumer) return;
    // The device makes NULL mean that device's legacy stream, and the event must be created on the
    // device whose stream records it.
    DeviceGuard g(device);
    cudaEvent_t e = nullptr;
    WEFT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaError_t r = cudaEventRecord(e, as_stream(producer));
    if (r == cudaSuccess) r = cudaStreamWaitEvent(as_stream(consumer), e, 0);
    // Destroying a recorded event is allowed at once: its resources go when the wait is satisfied.
    (void)cudaEventDestroy(e);
    WEFT_CUDA(r);
  });
}

}  // extern "C"
