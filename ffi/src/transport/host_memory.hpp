// host_memory.hpp — host memory that both a GPU and a NIC can reach: pinned and mapped into every
// device's address space when a GPU is present (cudaHostAllocMapped|Portable), page-aligned plain
// host memory otherwise (CI machines have no GPU; the transport and the proxy work the same).
#pragma once

#include <cstddef>

namespace weft {

class HostMemory {
 public:
  HostMemory() = default;
  // Zero-filled. Throws WEFT_E_OOM (or WEFT_E_CUDA) on failure.
  explicit HostMemory(size_t bytes);
  ~HostMemory();
  HostMemory(HostMemory&& other) noexcept { *this = static_cast<HostMemory&&>(other); }
  HostMemory& operator=(HostMemory&& other) noexcept;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  void* host() const { return host_; }
  // The device alias (equal to host() under UVA), or nullptr when there is no GPU.
  void* device() const { return device_; }
  size_t bytes() const { return bytes_; }

  // Adopts memory allocated by HostMemory and released with release() (the C ABI hands such
  // memory to JS and takes it back by address).
  void* release();
  static void free_released(void* host);

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;
};

}  // namespace weft
