#include "driver.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "status.hpp"

namespace weft::driver {

namespace {

template <typename Fn>
Fn lookup(const char* name, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    (void)cudaGetLastError();
    WEFT_FAIL(WEFT_E_UNSUPPORTED, "driver entry point %s (v%u) is not available: %s", name, version,
              e == cudaSuccess ? "symbol not found in this driver" : cudaGetErrorString(e));
  }
  return reinterpret_cast<Fn>(fn);
}

// A driver entry point's name as a template argument: one cache per entry point (two entry points
// can share a function type, as cuStreamWriteValue64 and cuStreamWaitValue64 do).
template <size_t N>
struct EntryName {
  char text[N];
  constexpr EntryName(const char (&name)[N]) { std::copy_n(name, N, text); }
};

// Looked up once, on first use (a function-local static: thread-safe; a lookup that throws is tried
// again on the next call).
template <typename Fn, EntryName Name, unsigned Version>
Fn entry_point() {
  static auto fn = lookup<Fn>(Name.text, Version);
  return fn;
}

}  // namespace

PFN_cuTensorMapEncodeTiled_v12000 tensorMapEncodeTiled() { return entry_point<PFN_cuTensorMapEncodeTiled_v12000, "cuTensorMapEncodeTiled", 12000>(); }
PFN_cuStreamWriteValue64_v11070 streamWriteValue64() { return entry_point<PFN_cuStreamWriteValue64_v11070, "cuStreamWriteValue64", 11070>(); }
PFN_cuStreamWaitValue64_v11070 streamWaitValue64() { return entry_point<PFN_cuStreamWaitValue64_v11070, "cuStreamWaitValue64", 11070>(); }
PFN_cuDriverGetVersion_v2020 driverGetVersion() { return entry_point<PFN_cuDriverGetVersion_v2020, "cuDriverGetVersion", 2020>(); }
PFN_cuLaunchKernel_v4000 launchKernel() { return entry_point<PFN_cuLaunchKernel_v4000, "cuLaunchKernel", 4000>(); }

}  // namespace weft::driver
