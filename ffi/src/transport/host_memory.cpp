#include "transport/host_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "device_guard.hpp"
#include "status.hpp"
#include "transport/live_counters.hpp"

namespace weft {

namespace {

constexpr size_t kPage = 4096;

// Memory handed across the ABI by address: how to free it. Pinned memory must go back through
// cudaFreeHost and aligned memory through free(); the address alone cannot tell which.
std::mutex released_mu;
std::unordered_map<void*, bool> released_pinned;

}  // namespace

HostMemory::HostMemory(size_t bytes) : bytes_(bytes) {
  WEFT_REQUIRE(bytes > 0, "host memory of 0 bytes");
  if (device_count() > 0) {
    WEFT_CUDA(cudaHostAlloc(&host_, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    pinned_ = true;
    cudaError_t e = cudaHostGetDevicePointer(&device_, host_, 0);
    if (e != cudaSuccess) {
      (void)cudaFreeHost(host_);
      host_ = nullptr;
      WEFT_CUDA(e);
    }
  } else {
    size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    if (posix_memalign(&host_, kPage, rounded) != 0 || !host_)
      WEFT_FAIL(WEFT_E_OOM, "host allocation of %zu bytes failed", bytes);
  }
  std::memset(host_, 0, bytes);
  live_counters().host_buffers.fetch_add(1);
}

HostMemory::~HostMemory() {
  if (!host_) return;
  if (pinned_) (void)cudaFreeHost(host_);
  else std::free(host_);
  live_counters().host_buffers.fetch_sub(1);
}

HostMemory& HostMemory::operator=(HostMemory&& other) noexcept {
  if (this != &other) {
    this->~HostMemory();
    host_ = other.host_;
    device_ = other.device_;
    bytes_ = other.bytes_;
    pinned_ = other.pinned_;
    other.host_ = other.device_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void* HostMemory::release() {
  void* h = host_;
  if (!h) return nullptr;
  {
    std::lock_guard<std::mutex> lock(released_mu);
    released_pinned[h] = pinned_;
  }
  host_ = device_ = nullptr;
  bytes_ = 0;
  return h;
}

void HostMemory::free_released(void* host) {
  bool pinned = false;
  {
    std::lock_guard<std::mutex> lock(released_mu);
    auto it = released_pinned.find(host);
    WEFT_REQUIRE(it != released_pinned.end(),
                 "%p was not allocated by weft_transport_host_alloc (or was freed already)", host);
    pinned = it->second;
    released_pinned.erase(it);
  }
  if (pinned) WEFT_CUDA(cudaFreeHost(host));
  else std::free(host);
  live_counters().host_buffers.fetch_sub(1);
}

}  // namespace weft
