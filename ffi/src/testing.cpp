// testing.cpp — test support: device-side data generation and error norms, so that tests and
// benchmarks at gigabyte sizes never round-trip their data through JS, and fault injection
// (weft_testing_*), which the library itself never calls.
#include <cuda_runtime_api.h>

#include <mutex>

#include "device_guard.hpp"
#include "status.hpp"
#include "tensor/fill.h"
#include "transport/transport_handle.hpp"
#include "weft.h"

using namespace weft;

namespace {
int device_of(void* stream, const void* ptr) {
  int dev = -1;
  if (stream) {
    WEFT_CUDA(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &dev));
    return dev;
  }
  dev = pointer_device(ptr);
  WEFT_REQUIRE(dev >= 0, "%p is not device memory", ptr);
  return dev;
}
bool valid_dtype(int32_t d) { return d >= WEFT_BF16 && d <= WEFT_U8; }
}  // namespace

extern "C" {

WEFT_API int weft_fill_random(void* dst, int32_t dtype, uint64_t count, uint64_t seed, float lo,
                              float hi, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(dtype == WEFT_BF16 || dtype == WEFT_F16 || dtype == WEFT_F32,
                 "dtype must be bf16, f16 or f32 for random fills (got %d)", dtype);
    WEFT_REQUIRE(dst || count == 0, "dst must not be NULL");
    WEFT_REQUIRE(hi > lo, "hi (%g) must be greater than lo (%g)", hi, lo);
    if (count == 0) return;
    DeviceGuard g(device_of(stream, dst));
    auto s = static_cast<cudaStream_t>(stream);
    WEFT_CUDA(kernels::fill_random(dst, dtype, count, seed, lo, hi, s));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

WEFT_API int weft_diff_norms(const void* a, int32_t a_dtype, const void* b, int32_t b_dtype,
                             uint64_t count, double* out_device, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(a && b && out_device, "a, b and out_device must not be NULL");
    WEFT_REQUIRE(valid_dtype(a_dtype) && valid_dtype(b_dtype), "dtypes must be WeftDtype values");
    DeviceGuard g(device_of(stream, a));
    auto s = static_cast<cudaStream_t>(stream);
    WEFT_CUDA(cudaMemsetAsync(out_device, 0, 3 * sizeof(double), s));
    if (count) WEFT_CUDA(kernels::diff_norms(a, a_dtype, b, b_dtype, count, out_device, s));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

WEFT_API int weft_testing_transport_drop_writes(WeftTransport* transport, uint64_t every) {
  return guard([&] {
    WEFT_REQUIRE(transport && transport->transport, "transport must be an open WeftTransport");
    Transport& t = *transport->transport;
    std::lock_guard<std::recursive_mutex> lock(t.lock());
    t.drop_writes_for_testing(every);
  });
}

}  // extern "C"
