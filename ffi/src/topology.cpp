#include "topology.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "device_guard.hpp"
#include "status.hpp"

namespace weft {

namespace {

// The few NVML entry points we need, with their documented C signatures. NVML's handles and
// enums are ints and opaque pointers, so no NVML header is needed at build time.
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
using NvmlDevice = void*;

struct Nvml {
  bool ok = false;
  int (*init)() = nullptr;
  int (*byPci)(const char*, NvmlDevice*) = nullptr;
  int (*linkState)(NvmlDevice, unsigned, int*) = nullptr;
  int (*remotePci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;

  Nvml() {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    byPci = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(
        dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    linkState = reinterpret_cast<int (*)(NvmlDevice, unsigned, int*)>(
        dlsym(h, "nvmlDeviceGetNvLinkState"));
    remotePci = reinterpret_cast<int (*)(NvmlDevice, unsigned, NvmlPciInfo*)>(
        dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    ok = init && byPci && linkState && remotePci && init() == 0;
  }
};

Nvml& nvml() {
  static Nvml n;
  return n;
}

bool same_bus(const char* a, const char* b) {
  // NVML and CUDA disagree on the case and width of the domain; compare the trailing
  // "bus:device.function" case-insensitively.
  auto tail = [](const char* s) {
    const char* c = std::strchr(s, ':');
    return c ? c + 1 : s;
  };
  return strcasecmp(tail(a), tail(b)) == 0;
}

constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS on Hopper

}  // namespace

int nvlink_count(int a, int b) {
  Nvml& n = nvml();
  if (!n.ok) return 0;
  char bus_a[32] = {}, bus_b[32] = {};
  if (cudaDeviceGetPCIBusId(bus_a, sizeof bus_a, a) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus_b, sizeof bus_b, b) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  NvmlDevice dev = nullptr;
  if (n.byPci(bus_a, &dev) != 0) return 0;
  // A link whose far end is none of our GPUs goes to an NVSwitch, which reaches every GPU on the
  // baseboard (HGX): such links count for every pair when there is no direct link.
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) return 0;
  auto is_local_gpu = [&](const char* bus) {
    for (int g = 0; g < gpus; ++g) {
      char id[32] = {};
      if (cudaDeviceGetPCIBusId(id, sizeof id, g) == cudaSuccess && same_bus(id, bus)) return true;
    }
    return false;
  };
  int direct = 0, switched = 0;
  for (unsigned l = 0; l < kMaxNvLinks; ++l) {
    int active = 0;
    if (n.linkState(dev, l, &active) != 0 || !active) continue;
    NvmlPciInfo remote{};
    if (n.remotePci(dev, l, &remote) != 0) continue;
    if (same_bus(remote.busId, bus_b)) ++direct;
    else if (!is_local_gpu(remote.busId)) ++switched;
  }
  return direct > 0 ? direct : switched;
}

void enable_peer_access(int32_t device, int32_t peer) {
  require_device(device);
  require_device(peer);
  if (device == peer) return;
  static std::mutex mu;
  static std::set<std::pair<int, int>> enabled;
  std::lock_guard<std::mutex> lock(mu);
  if (enabled.count({device, peer})) return;
  int can = 0;
  WEFT_CUDA(cudaDeviceCanAccessPeer(&can, device, peer));
  if (!can)
    WEFT_FAIL(WEFT_E_UNSUPPORTED, "device %d cannot access device %d directly (no P2P path)",
              device, peer);
  DeviceGuard g(device);
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
  } else {
    WEFT_CUDA(e);
  }
  enabled.insert({device, peer});
}

}  // namespace weft
