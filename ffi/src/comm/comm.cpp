// comm.cpp — communicator lifetime: the symmetric arena, mapping peers (CUDA IPC across
// processes, direct peer access within one), the device peer table, collective teardown.
#include "comm.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "device_guard.hpp"
#include "tensor/fill.h"
#include "status.hpp"
#include "topology.hpp"

using namespace weft;

namespace {

// Tells ranks in this process from ranks elsewhere: equal tokens share an address space.
uint64_t process_token() {
  static const uint64_t token = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd() ^ 1;
  }();
  return token;
}

}  // namespace

namespace weft::comm {

WeftComm& require(WeftComm* comm, bool connected) {
  WEFT_REQUIRE(comm, "comm must not be NULL");
  WEFT_REQUIRE(comm->arena, "comm was destroyed");
  if (connected) {
    WEFT_REQUIRE(comm->connected, "comm is not connected yet (weft_comm_connect) or its peers were closed");
    if (const uint64_t declared = declared_failed(*comm))
      WEFT_FAIL(WEFT_E_PEER, "rank %llu was declared failed (weft_comm_abort): this communicator runs nothing more; dispose it",
                (unsigned long long)(declared - 1));
  }
  return *comm;
}

uint64_t declared_failed(const WeftComm& c) {
  return c.abort_host ? std::atomic_ref<uint64_t>(*c.abort_host).load(std::memory_order_acquire) : 0;
}

}  // namespace weft::comm

extern "C" {

WEFT_API int weft_comm_create(const WeftCommConfig* config, WeftComm** out_comm) {
  return guard([&] {
    WEFT_REQUIRE(config && out_comm, "config and out_comm must not be NULL");
    WEFT_REQUIRE(config->size >= sizeof(WeftCommConfig), "config->size is %u but WeftCommConfig needs %zu bytes (ABI mismatch)",
                 config->size, sizeof(WeftCommConfig));
    WEFT_REQUIRE(config->world_size >= 1 && config->world_size <= coll::kThreads,
                 "world_size must be in [1, %d] (got %d)", coll::kThreads, config->world_size);
    WEFT_REQUIRE(config->rank >= 0 && config->rank < config->world_size, "rank must be in [0, %d) (got %d)",
                 config->world_size, config->rank);
    WEFT_REQUIRE(config->heap_bytes > 0, "heap_bytes must be > 0");
    WEFT_REQUIRE(config->sm_budget >= 0, "sm_budget must be >= 0 (0 = every SM; got %d)", config->sm_budget);
    DeviceGuard g(config->device);
    auto comm = std::make_unique<WeftComm>();
    comm->device = config->device;
    comm->rank = uint32_t(config->rank);
    comm->world = uint32_t(config->world_size);
    comm->heap_bytes = coll::round_up(config->heap_bytes, 2ull << 20);
    comm->timeout_ns = config->timeout_ns ? config->timeout_ns : 10'000'000'000ull;
    const uint64_t staged = coll::round_up(config->staged_bytes ? config->staged_bytes : 4096, 4096);
    comm->layout = coll::make_layout(comm->world, staged, comm->heap_bytes);
    WEFT_CUDA(cudaDeviceGetAttribute(&comm->sm_count, cudaDevAttrMultiProcessorCount, config->device));
    // Every planner and collective sizes its grid from sm_count, so a budget caps them all.
    if (config->sm_budget > 0) comm->sm_count = std::min(comm->sm_count, int(config->sm_budget));
    comm->max_ctas = std::min<uint32_t>(uint32_t(comm->sm_count), coll::kMaxCtas);

    void* arena = nullptr;
    cudaError_t e = cudaMalloc(&arena, comm->layout.total);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      WEFT_FAIL(WEFT_E_OOM, "the symmetric heap needs %llu bytes on device %d (heap_bytes %llu plus %llu of control and staging) and they are not free",
                (unsigned long long)comm->layout.total, config->device, (unsigned long long)comm->heap_bytes,
                (unsigned long long)comm->layout.heap);
    }
    WEFT_CUDA(e);
    comm->arena = static_cast<char*>(arena);
    try {
      void* abort_host = nullptr;
      WEFT_CUDA(cudaHostAlloc(&abort_host, 64, cudaHostAllocMapped | cudaHostAllocPortable));
      comm->abort_host = static_cast<uint64_t*>(abort_host);
      *comm->abort_host = 0;
      void* abort_dev = nullptr;
      WEFT_CUDA(cudaHostGetDevicePointer(&abort_dev, abort_host, 0));
      comm->abort_dev = static_cast<const volatile uint64_t*>(abort_dev);
      // Signals start at 0 once, here; after that the epoch rule means nothing is ever reset.
      WEFT_CUDA(cudaMemset(comm->arena, 0, comm->layout.heap));
      WEFT_CUDA(cudaMalloc(reinterpret_cast<void**>(&comm->peer_table), sizeof(char*) * comm->world));
      WEFT_CUDA(cudaMalloc(reinterpret_cast<void**>(&comm->a2a), sizeof(uint64_t) * 4 * comm->world));
      WEFT_CUDA(cudaDeviceSynchronize());
    } catch (...) {
      if (comm->peer_table) (void)cudaFree(comm->peer_table);
      if (comm->a2a) (void)cudaFree(comm->a2a);
      if (comm->abort_host) (void)cudaFreeHost(comm->abort_host);
      (void)cudaFree(comm->arena);
      throw;
    }
    comm->peer_base.assign(comm->world, nullptr);
    comm->peer_ipc.assign(comm->world, false);
    comm->peer_device.assign(comm->world, -1);
    comm->peer_base[comm->rank] = comm->arena;
    comm->peer_device[comm->rank] = comm->device;
    *out_comm = comm.release();
  });
}

WEFT_API int weft_comm_info(WeftComm* comm, WeftCommInfo* out) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    WEFT_REQUIRE(out && out->size >= sizeof(WeftCommInfo), "out must be a WeftCommInfo with size set");
    out->version = 1;
    out->heap_base = reinterpret_cast<uint64_t>(c.arena + c.layout.heap);
    out->heap_bytes = c.heap_bytes;
    out->arena_base = reinterpret_cast<uint64_t>(c.arena);
    out->arena_bytes = c.layout.total;
    out->staged_bytes = c.layout.staged_bytes;
    out->sm_count = c.sm_count;
    out->max_ctas = int32_t(c.max_ctas);
    out->shares_device = c.shares_device ? 1 : 0;
    out->reserved = 0;
  });
}

WEFT_API int weft_comm_export(WeftComm* comm, WeftPeerHandle* out) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    WEFT_REQUIRE(out && out->size >= sizeof(WeftPeerHandle), "out must be a WeftPeerHandle with size set");
    static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(out->ipc), "cudaIpcMemHandle_t is 64 bytes");
    DeviceGuard g(c.device);
    cudaIpcMemHandle_t h{};
    WEFT_CUDA(cudaIpcGetMemHandle(&h, c.arena));
    out->version = 1;
    out->process_token = process_token();
    out->device = c.device;
    out->rank = int32_t(c.rank);
    out->arena_base = reinterpret_cast<uint64_t>(c.arena);
    out->arena_bytes = c.layout.total;
    std::memcpy(out->ipc, &h, sizeof h);
  });
}

WEFT_API int weft_comm_import(WeftComm* comm, const WeftPeerHandle* handle) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    WEFT_REQUIRE(handle && handle->size >= sizeof(WeftPeerHandle), "handle must be a WeftPeerHandle with size set");
    const int32_t peer = handle->rank;
    WEFT_REQUIRE(peer >= 0 && uint32_t(peer) < c.world && uint32_t(peer) != c.rank,
                 "handle->rank must be another rank in [0, %u) (got %d)", c.world, peer);
    WEFT_REQUIRE(!c.peer_base[peer], "rank %d is already imported", peer);
    WEFT_REQUIRE(handle->arena_bytes == c.layout.total,
                 "rank %d's arena is %llu bytes but this rank's is %llu: every rank must create the communicator with the same heap and staging sizes",
                 peer, (unsigned long long)handle->arena_bytes, (unsigned long long)c.layout.total);
    DeviceGuard g(c.device);
    if (handle->process_token == process_token()) {
      if (handle->device != c.device) enable_peer_access(c.device, handle->device);
      c.peer_base[peer] = reinterpret_cast<char*>(handle->arena_base);
      c.peer_device[peer] = handle->device;
      return;
    }
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle->ipc, sizeof h);
    void* p = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      WEFT_FAIL(e == cudaErrorPeerAccessUnsupported ? WEFT_E_UNSUPPORTED : WEFT_E_CUDA,
                "rank %u (device %d) could not map rank %d's arena through CUDA IPC: %s (%s). The GPUs must be on one host with peer access (NVLink or PCIe P2P)",
                c.rank, c.device, peer, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    c.peer_base[peer] = static_cast<char*>(p);
    c.peer_ipc[peer] = true;
    // The peer's device ordinal is its own process's; where its arena lives, in this process's
    // ordinals, is the mapping's (two processes on one GPU see the same device here).
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) == cudaSuccess) {
      c.peer_device[peer] = attr.device;
    } else {
      (void)cudaGetLastError();
      c.peer_device[peer] = handle->device;
    }
  });
}

WEFT_API int weft_comm_connect(WeftComm* comm) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    for (uint32_t r = 0; r < c.world; ++r) WEFT_REQUIRE(c.peer_base[r], "rank %u has not been imported yet", r);
    DeviceGuard g(c.device);
    WEFT_CUDA(cudaMemcpy(c.peer_table, c.peer_base.data(), sizeof(char*) * c.world, cudaMemcpyHostToDevice));
    c.shares_device = false;
    for (uint32_t r = 0; r < c.world; ++r)
      for (uint32_t q = r + 1; q < c.world; ++q) c.shares_device = c.shares_device || c.peer_device[r] == c.peer_device[q];
    // Before any rank's first fused kernel: see preload_tensor_kernels() (cuda/tensor/fill.h).
    WEFT_CUDA(kernels::preload_tensor_kernels());
    comm::make_launch_graph(c);
    c.connected = true;
  });
}

WEFT_API int weft_comm_close_peers(WeftComm* comm) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    DeviceGuard g(c.device);
    c.connected = false;
    // Collectives of this rank may still read or write peer arenas: let them finish first.
    WEFT_CUDA(cudaDeviceSynchronize());
    std::string first_error;
    for (uint32_t r = 0; r < c.world; ++r) {
      if (c.peer_ipc[r]) {
        cudaError_t e = cudaIpcCloseMemHandle(c.peer_base[r]);
        if (e != cudaSuccess && first_error.empty()) {
          (void)cudaGetLastError();
          first_error = format("cudaIpcCloseMemHandle of rank %u's arena failed: %s", r, cudaGetErrorString(e));
        }
        c.peer_ipc[r] = false;
      }
      if (r != c.rank) c.peer_base[r] = nullptr;
    }
    if (!first_error.empty()) WEFT_FAIL(WEFT_E_CUDA, "%s", first_error.c_str());
  });
}

WEFT_API int weft_comm_destroy(WeftComm* comm) {
  return guard([&] {
    if (!comm) return;
    std::unique_ptr<WeftComm> owned(comm);
    if (!comm->arena) return;
    DeviceGuard g(comm->device);
    for (uint32_t r = 0; r < comm->world; ++r)
      if (comm->peer_ipc[r]) (void)cudaIpcCloseMemHandle(comm->peer_base[r]);
    WEFT_CUDA(cudaDeviceSynchronize());
    comm::destroy_launch_graph(*comm);
    WEFT_CUDA(cudaFree(comm->peer_table));
    WEFT_CUDA(cudaFree(comm->a2a));
    WEFT_CUDA(cudaFree(comm->arena));
    comm->arena = nullptr;
    if (comm->abort_host) WEFT_CUDA(cudaFreeHost(comm->abort_host));
    comm->abort_host = nullptr;
  });
}

WEFT_API int weft_comm_abort(WeftComm* comm, int32_t failed_rank) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    const uint32_t world = c.inter.nodes > 1 ? c.inter.world : c.world;
    WEFT_REQUIRE(failed_rank >= 0 && uint32_t(failed_rank) < world && failed_rank < 0xffff,
                 "failed_rank must be a rank of this communicator, in [0, %u) (got %d)", world, failed_rank);
    // The first declared rank stays; a plain store into host-mapped memory, which the kernels' next
    // poll reads (PCIe ordering makes it visible to them as soon as it lands).
    uint64_t expected = 0;
    std::atomic_ref<uint64_t>(*c.abort_host).compare_exchange_strong(expected, uint64_t(failed_rank) + 1, std::memory_order_release);
  });
}

}  // extern "C"
