#include "status.hpp"

#include <cstdio>
#include <cstring>

namespace weft {

// Per-thread so that the JS thread and the proxy threads never read each other's failures.
thread_local std::string last_error;

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

void set_last_error(const std::string& message) { last_error = message; }

void fail_at(const char* file, int line, int code, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error{code, format("%s:%d: %s", base ? base + 1 : file, line, message.c_str())};
}

int cuda_status_code(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation: return WEFT_E_OOM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: return WEFT_E_NO_DEVICE;
    case cudaErrorInvalidValue: return WEFT_E_INVALID;
    case cudaErrorNotSupported:
    case cudaErrorPeerAccessUnsupported: return WEFT_E_UNSUPPORTED;
    default: return WEFT_E_CUDA;
  }
}

}  // namespace weft

extern "C" WEFT_API const char* weft_last_error(void) { return weft::last_error.c_str(); }
