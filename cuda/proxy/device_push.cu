#include "device_push.h"

#include "primitives/fifo.cuh"

namespace weft::kernels {

namespace {

__global__ void push_kernel(proxy::FifoDevice fifo, proxy::Command tmpl, uint32_t per_thread,
                            unsigned long long* failures, uint64_t timeout_ns) {
  const uint64_t g = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  proxy::Command c = tmpl;
  c.signal_offset = tmpl.signal_offset + 8 * g;
  for (uint32_t i = 0; i < per_thread; ++i) {
    c.signal_value = i + 1;
    uint64_t ticket = 0;
    int64_t status = 0;
    sys::WaitBudget budget{timeout_ns, nullptr};
    if (proxy::thread::push(fifo, c, &ticket, &status, budget) != sys::WaitResult::kOk) {
      atomicAdd(&failures[0], 1ull);
      if (status) failures[1] = static_cast<unsigned long long>(status);
      return;  // the FIFO is dead past an unfilled ticket: stop pushing
    }
  }
}

}  // namespace

cudaError_t push_commands(const proxy::FifoDevice& fifo, const proxy::Command& tmpl, uint32_t ctas,
                          uint32_t threads, uint32_t per_thread, unsigned long long* failures,
                          uint64_t timeout_ns, cudaStream_t stream) {
  push_kernel<<<ctas, threads, 0, stream>>>(fifo, tmpl, per_thread, failures, timeout_ns);
  return cudaGetLastError();
}

}  // namespace weft::kernels
