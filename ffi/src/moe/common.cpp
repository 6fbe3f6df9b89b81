// common.cpp — see common.hpp.
#include "moe/common.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "comm/call_checks.hpp"
#include "device_guard.hpp"
#include "status.hpp"

namespace weft::moe {

void Report::allocate() {
  void* h = nullptr;
  WEFT_CUDA(cudaHostAlloc(&h, 4 * sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
  host = static_cast<uint64_t*>(h);
  for (int i = 0; i < 4; ++i) host[i] = 0;
  void* d = nullptr;
  WEFT_CUDA(cudaHostGetDevicePointer(&d, h, 0));
  device = static_cast<uint64_t*>(d);
}

void Report::release() {
  if (host) (void)cudaFreeHost(host);
  host = device = nullptr;
}

PeerArgs peer_args(const WeftComm& c, uint64_t workspace, const Report& report) {
  PeerArgs p{};
  p.peers = c.peer_table;
  p.ws_offset = workspace - reinterpret_cast<uint64_t>(c.arena);
  p.world = int32_t(c.world);
  p.rank = int32_t(c.rank);
  p.timeout_ns = c.timeout_ns;
  p.report = report.device;
  p.host_abort = c.abort_dev;
  return p;
}

CompletionWords completion_of(const WeftOpLaunch* launch) {
  return CompletionWords{reinterpret_cast<uint64_t*>(launch->done), launch->seq,
                         launch->done ? reinterpret_cast<uint32_t*>(launch->arrivals) : nullptr};
}

void require_launch(const WeftComm* comm, const WeftOpLaunch* launch) {
  WEFT_REQUIRE(launch && launch->size == sizeof(WeftOpLaunch) && launch->version == 1,
               "launch must be a WeftOpLaunch with size %zu and version 1", sizeof(WeftOpLaunch));
  WEFT_REQUIRE(launch->done == 0 || launch->arrivals != 0, "launch: arrivals is required when done is set");
  comm::require(const_cast<WeftComm*>(comm), true);
}

WeftComm& require_comm(WeftComm* comm) {
  WeftComm& c = comm::require(comm, true);
  if (c.inter.nodes > 1)
    WEFT_FAIL(WEFT_E_UNSUPPORTED, "the MoE ops are single-node for now: this communicator spans %d nodes", c.inter.nodes);
  return c;
}

cudaStream_t plan_stream(const WeftComm& c, uint64_t stream, const char* op) {
  auto s = reinterpret_cast<cudaStream_t>(stream);
  if (s) {
    int sd = -1;
    WEFT_CUDA(cudaStreamGetDevice(s, &sd));
    WEFT_REQUIRE(sd == c.device, "%s: stream belongs to device %d but the communicator's rank is on device %d", op, sd, c.device);
  }
  return s;
}

void check_workspace(const WeftComm& c, uint64_t workspace, uint64_t workspace_bytes, uint64_t need, const char* op) {
  WEFT_REQUIRE(workspace_bytes >= need, "%s: workspace_bytes (%llu) is smaller than the plan needs (%llu)", op,
               (unsigned long long)workspace_bytes, (unsigned long long)need);
  comm::require_symmetric(c, workspace, workspace_bytes, "workspace", op);
  WEFT_REQUIRE((workspace & 255) == 0, "%s: workspace must be 256-byte aligned", op);
}

void destroy_plan(PlanBase& plan) {
  DeviceGuard g(plan.comm->device);
  const cudaError_t e = cudaStreamSynchronize(plan.stream);
  plan.report.release();
  WEFT_CUDA(e);
}

int choose_ctas(const WeftComm& c, int32_t requested, int64_t work, const char* op) {
  const int max_ctas = int(std::min<uint32_t>(c.max_ctas, uint32_t(kMaxCtas)));
  if (requested != 0) {
    WEFT_REQUIRE(requested >= 1 && requested <= max_ctas, "%s: ctas must be in [1, %d] (the communicator's SMs; got %d)", op,
                 max_ctas, requested);
    return requested;
  }
  return int(std::clamp<int64_t>(work, 1, max_ctas));
}

}  // namespace weft::moe
