// memory.cpp — device and pinned host allocation, fills and copies.
#include <cuda_runtime_api.h>

#include "device_guard.hpp"
#include "status.hpp"
#include "tensor/fill.h"
#include "weft.h"

using namespace weft;

namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// The device a stream belongs to, so that a launch made on it runs with that device current.
int stream_device(void* stream, const void* fallback_ptr) {
  if (stream) {
    int dev = -1;
    WEFT_CUDA(cudaStreamGetDevice(as_stream(stream), &dev));
    return dev;
  }
  int dev = pointer_device(fallback_ptr);
  if (dev < 0) WEFT_CUDA(cudaGetDevice(&dev));
  return dev;
}

// The runtime's kind for a WeftCopyKind (validated).
cudaMemcpyKind copy_kind(int32_t kind) {
  WEFT_REQUIRE(kind >= WEFT_COPY_DEFAULT && kind <= WEFT_COPY_D2D, "kind %d is not a WeftCopyKind", kind);
  static const cudaMemcpyKind kinds[] = {cudaMemcpyDefault, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                         cudaMemcpyDeviceToDevice};
  return kinds[kind];
}

// The device a copy runs on: the stream's, else whichever side is device memory (else 0).
int copy_device(void* stream, void* dst, const void* src) {
  if (stream) return stream_device(stream, dst);
  int dev = pointer_device(dst);
  if (dev < 0) dev = pointer_device(src);
  return dev < 0 ? 0 : dev;
}

}  // namespace

extern "C" {

WEFT_API int weft_malloc(int32_t device, uint64_t bytes, void** out_ptr) {
  return guard([&] {
    WEFT_REQUIRE(out_ptr, "out_ptr must not be NULL");
    WEFT_REQUIRE(bytes > 0, "bytes must be > 0");
    DeviceGuard g(device);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      WEFT_FAIL(WEFT_E_OOM, "cudaMalloc of %llu bytes on device %d failed: %zu bytes free",
                static_cast<unsigned long long>(bytes), device, free_b);
    }
    WEFT_CUDA(e);
    *out_ptr = p;
  });
}

WEFT_API int weft_free(void* ptr) {
  return guard([&] {
    if (!ptr) return;
    int dev = pointer_device(ptr);
    WEFT_REQUIRE(dev >= 0, "weft_free: %p is not device memory allocated by weft_malloc", ptr);
    DeviceGuard g(dev);
    WEFT_CUDA(cudaFree(ptr));
  });
}

WEFT_API int weft_host_alloc(uint64_t bytes, void** out_host, void** out_device) {
  return guard([&] {
    WEFT_REQUIRE(out_host, "out_host must not be NULL");
    WEFT_REQUIRE(bytes > 0, "bytes must be > 0");
    require_device(0);
    void* h = nullptr;
    WEFT_CUDA(cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    void* d = nullptr;
    cudaError_t e = cudaHostGetDevicePointer(&d, h, 0);
    if (e != cudaSuccess) {
      (void)cudaFreeHost(h);
      WEFT_CUDA(e);
    }
    *out_host = h;
    if (out_device) *out_device = d;
  });
}

WEFT_API int weft_host_free(void* host) {
  return guard([&] {
    if (host) WEFT_CUDA(cudaFreeHost(host));
  });
}

WEFT_API int weft_memset(void* dst, int32_t value, uint64_t bytes, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(dst || bytes == 0, "dst must not be NULL");
    if (bytes == 0) return;
    DeviceGuard g(stream_device(stream, dst));
    WEFT_CUDA(cudaMemsetAsync(dst, value, bytes, as_stream(stream)));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

WEFT_API int weft_fill(void* dst, uint64_t count, int32_t elem_bytes, uint64_t pattern,
                       void* stream) {
  return guard([&] {
    WEFT_REQUIRE(elem_bytes == 1 || elem_bytes == 2 || elem_bytes == 4 || elem_bytes == 8,
                 "elem_bytes must be 1, 2, 4 or 8 (got %d)", elem_bytes);
    WEFT_REQUIRE(dst || count == 0, "dst must not be NULL");
    if (count == 0) return;
    DeviceGuard g(stream_device(stream, dst));
    WEFT_CUDA(kernels::fill_pattern(dst, count, elem_bytes, pattern, as_stream(stream)));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

WEFT_API int weft_memcpy(void* dst, const void* src, uint64_t bytes, int32_t kind, void* stream) {
  return guard([&] {
    const cudaMemcpyKind k = copy_kind(kind);
    WEFT_REQUIRE((dst && src) || bytes == 0, "dst and src must not be NULL");
    if (bytes == 0) return;
    DeviceGuard g(copy_device(stream, dst, src));
    WEFT_CUDA(cudaMemcpyAsync(dst, src, bytes, k, as_stream(stream)));
    // A NULL stream means "done when this returns": the caller may be handing us a JS buffer
    // that is only valid for the duration of the call.
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

WEFT_API int weft_memcpy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch, uint64_t width_bytes,
                            uint64_t rows, int32_t kind, void* stream) {
  return guard([&] {
    const cudaMemcpyKind k = copy_kind(kind);
    WEFT_REQUIRE((dst && src) || width_bytes == 0 || rows == 0, "dst and src must not be NULL");
    WEFT_REQUIRE(width_bytes <= dst_pitch && width_bytes <= src_pitch, "width_bytes (%llu) must be at most both pitches",
                 static_cast<unsigned long long>(width_bytes));
    if (width_bytes == 0 || rows == 0) return;
    DeviceGuard g(copy_device(stream, dst, src));
    WEFT_CUDA(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, rows, k, as_stream(stream)));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

WEFT_API int weft_memcpy_peer(void* dst, int32_t dst_device, const void* src, int32_t src_device,
                              uint64_t bytes, void* stream) {
  return guard([&] {
    WEFT_REQUIRE((dst && src) || bytes == 0, "dst and src must not be NULL");
    require_device(dst_device);
    require_device(src_device);
    if (bytes == 0) return;
    DeviceGuard g(stream ? stream_device(stream, dst) : src_device);
    WEFT_CUDA(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, as_stream(stream)));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

}  // extern "C"
