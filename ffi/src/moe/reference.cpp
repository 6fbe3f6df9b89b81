// reference.cpp — the MoE references' entry points (weft.h, "Test support"): argument checks, the
// device from the stream or the first operand, then one stream-ordered launch (a NULL stream
// waits for it, as weft_fill_random does).
#include <cuda_runtime_api.h>

#include "device_guard.hpp"
#include "moe/moe.h"
#include "status.hpp"

using namespace weft;

namespace {

template <class F>
void on_device(void* stream, const void* operand, F&& launch) {
  int dev = -1;
  auto s = static_cast<cudaStream_t>(stream);
  if (s) WEFT_CUDA(cudaStreamGetDevice(s, &dev));
  else dev = pointer_device(operand);
  WEFT_REQUIRE(dev >= 0, "operand %p is not device memory", operand);
  DeviceGuard g(dev);
  WEFT_CUDA(launch(s));
  if (!s) WEFT_CUDA(cudaStreamSynchronize(nullptr));
}

bool float_dtype(int32_t d) { return d == WEFT_F32 || d == WEFT_BF16; }

}  // namespace

extern "C" {

WEFT_API int weft_moe_reference_route(const void* logits, int32_t logits_dtype, int64_t tokens, int32_t experts,
                                      int32_t topk, int32_t normalize, int32_t* ids, float* weights, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(float_dtype(logits_dtype), "logits_dtype must be WEFT_F32 or WEFT_BF16");
    WEFT_REQUIRE(experts >= 1 && topk >= 1 && topk <= experts && tokens >= 0, "need tokens >= 0, 1 <= topk <= experts");
    if (tokens == 0) return;
    WEFT_REQUIRE(logits && ids && weights, "logits, ids and weights must not be NULL");
    on_device(stream, logits, [&](cudaStream_t s) {
      return moe::reference_route(logits, logits_dtype, tokens, experts, topk, normalize != 0, ids, weights, s);
    });
  });
}

WEFT_API int weft_moe_reference_gather(const void* src, int64_t src_rows, int64_t cols, const int32_t* index, int64_t rows,
                                       void* out, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(src_rows >= 0 && cols >= 1 && rows >= 0, "need src_rows >= 0, cols >= 1, rows >= 0");
    if (rows == 0) return;
    WEFT_REQUIRE(src && index && out, "src, index and out must not be NULL");
    on_device(stream, out, [&](cudaStream_t s) { return moe::reference_gather(src, src_rows, cols, index, rows, out, s); });
  });
}

WEFT_API int weft_moe_reference_combine(const void* rows, int32_t rows_dtype, int64_t nrows, int64_t hidden,
                                        const int32_t* index, const float* weights, int64_t tokens, int32_t topk,
                                        float* out, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(float_dtype(rows_dtype), "rows_dtype must be WEFT_F32 or WEFT_BF16");
    WEFT_REQUIRE(nrows >= 0 && hidden >= 1 && tokens >= 0 && topk >= 1, "need nrows >= 0, hidden >= 1, tokens >= 0, topk >= 1");
    if (tokens == 0) return;
    WEFT_REQUIRE(rows && index && weights && out, "rows, index, weights and out must not be NULL");
    on_device(stream, out, [&](cudaStream_t s) {
      return moe::reference_combine(rows, rows_dtype, nrows, hidden, index, weights, tokens, topk, out, s);
    });
  });
}

WEFT_API int weft_moe_reference_rows_gemm(const void* a, int32_t a_dtype, int64_t lda, const int32_t* a_index,
                                          const void* b, int64_t ldb, int32_t b_nk, float* c, int64_t ldc,
                                          const int32_t* c_index, int64_t m, int64_t n, int64_t k, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(float_dtype(a_dtype), "a_dtype must be WEFT_F32 or WEFT_BF16");
    WEFT_REQUIRE(m >= 0 && n >= 1 && k >= 1 && lda >= k && ldc >= n && ldb >= (b_nk ? k : n),
                 "need m >= 0, n, k >= 1 and strides lda >= k, ldb >= %s, ldc >= n", b_nk ? "k" : "n");
    if (m == 0) return;
    WEFT_REQUIRE(a && b && c, "a, b and c must not be NULL");
    on_device(stream, c, [&](cudaStream_t s) {
      return moe::reference_rows_gemm(a, a_dtype, lda, a_index, b, ldb, b_nk != 0, c, ldc, c_index, m, n, k, s);
    });
  });
}

WEFT_API int weft_moe_reference_swiglu(const void* h, int32_t h_dtype, int64_t rows, int64_t inter, void* out,
                                       int32_t out_dtype, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(float_dtype(h_dtype) && float_dtype(out_dtype), "h_dtype and out_dtype must be WEFT_F32 or WEFT_BF16");
    WEFT_REQUIRE(rows >= 0 && inter >= 1, "need rows >= 0, inter >= 1");
    if (rows == 0) return;
    WEFT_REQUIRE(h && out, "h and out must not be NULL");
    on_device(stream, out, [&](cudaStream_t s) { return moe::reference_swiglu(h, h_dtype, rows, inter, out, out_dtype, s); });
  });
}

}  // extern "C"
