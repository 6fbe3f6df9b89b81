// status.hpp — how host code turns failures into WEFT_E_* codes and a thread-local message.
//
// Internals throw weft::Error; every exported function body runs inside weft::guard(), which
// catches it (and anything else), records "file:line: message" for weft_last_error() and returns
// the code. Nothing escapes across the C ABI and nothing calls exit() or abort().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdarg>
#include <exception>
#include <string>

#include "weft.h"

namespace weft {

struct Error {
  int code;
  std::string message;
};

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void set_last_error(const std::string& message);
[[noreturn]] void fail_at(const char* file, int line, int code, const std::string& message);

template <typename F>
int guard(F&& body) noexcept {
  try {
    body();
    return WEFT_OK;
  } catch (const Error& e) {
    set_last_error(e.message);
    return e.code;
  } catch (const std::bad_alloc&) {
    set_last_error("host allocation failed (std::bad_alloc)");
    return WEFT_E_OOM;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal: ") + e.what());
    return WEFT_E_INTERNAL;
  } catch (...) {
    set_last_error("internal: unknown exception");
    return WEFT_E_INTERNAL;
  }
}

int cuda_status_code(cudaError_t e);

}  // namespace weft

#define WEFT_FAIL(code, ...) ::weft::fail_at(__FILE__, __LINE__, (code), ::weft::format(__VA_ARGS__))

#define WEFT_REQUIRE(cond, ...)                            \
  do {                                                     \
    if (!(cond)) WEFT_FAIL(WEFT_E_INVALID, __VA_ARGS__);   \
  } while (0)

#define WEFT_CUDA(call)                                                                         \
  do {                                                                                          \
    cudaError_t weft_e_ = (call);                                                               \
    if (weft_e_ != cudaSuccess) {                                                               \
      (void)cudaGetLastError();                                                                 \
      ::weft::fail_at(__FILE__, __LINE__, ::weft::cuda_status_code(weft_e_),                    \
                      ::weft::format("%s failed: %s (%s)", #call, cudaGetErrorName(weft_e_),    \
                                     cudaGetErrorString(weft_e_)));                             \
    }                                                                                           \
  } while (0)
