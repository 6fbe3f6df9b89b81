#include "driver.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

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

}  // namespace

// Function-local statics: looked up once, on first use, thread-safely.
PFN_cuTensorMapEncodeTiled_v12000 tensorMapEncodeTiled() {
  static auto fn = lookup<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);
  return fn;
}

PFN_cuStreamWriteValue64_v11070 streamWriteValue64() {
  static auto fn = lookup<PFN_cuStreamWriteValue64_v11070>("cuStreamWriteValue64", 11070);
  return fn;
}

PFN_cuStreamWaitValue64_v11070 streamWaitValue64() {
  static auto fn = lookup<PFN_cuStreamWaitValue64_v11070>("cuStreamWaitValue64", 11070);
  return fn;
}

PFN_cuDriverGetVersion_v2020 driverGetVersion() {
  static auto fn = lookup<PFN_cuDriverGetVersion_v2020>("cuDriverGetVersion", 2020);
  return fn;
}

PFN_cuLaunchKernel_v4000 launchKernel() {
  static auto fn = lookup<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", 4000);
  return fn;
}

}  // namespace weft::driver
