// common.cpp — see common.hpp.
#include "moe/common.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "comm/call_checks.hpp"
#include "device_guard.hpp"
#include "gemm/gemm.h"
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

void release_plan(PlanBase& plan) {
  DeviceGuard g(plan.comm->device);
  const cudaError_t e = cudaStreamSynchronize(plan.stream);
  plan.report.release();
  WEFT_CUDA(e);
}

int plan_report(const PlanBase* plan, const uint64_t** out_words, const char* op) {
  return guard([&] {
    WEFT_REQUIRE(plan && out_words, "%s: plan and out_words must not be NULL", op);
    *out_words = plan->report.host;
  });
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

void require_combine_tensors(const WeftComm& c, const WeftMoeCombineParams& p, const DispatchArgs& d, const char* op) {
  if (d.tokens > 0) {
    comm::require_on_device(c, p.weights, "weights", op);
    comm::require_on_device(c, p.out, "out", op);
    WEFT_REQUIRE((p.out & 15) == 0 && (p.weights & 3) == 0, "%s: out must be 16-byte and weights 4-byte aligned", op);
  }
  comm::require_on_device(c, p.hidden, "hidden", op);
  WEFT_REQUIRE((p.hidden & 15) == 0, "%s: hidden must be 16-byte aligned", op);
}

Groups layout_groups(const DispatchArgs& d, const char* ws, int tile_n, int tile_cols, int64_t n_out, int ctas) {
  Groups g{};
  g.starts = reinterpret_cast<const int32_t*>(ws + d.layout.expert_offsets);
  g.limits = reinterpret_cast<const int32_t*>(ws + d.layout.expert_counts);
  g.limits_are_counts = 1;
  // Own rows first only when there are other sources to wait for: at world 1 a second pass would
  // split each expert's last tile row from the rest and read its weights from HBM twice.
  g.local = d.peer.world > 1 ? reinterpret_cast<const int32_t*>(ws + d.layout.source_counts) + int64_t(d.peer.rank) * d.local_experts
                             : nullptr;
  g.status = reinterpret_cast<const uint64_t*>(ws + d.layout.status);
  g.count = d.local_experts;
  g.rows = int32_t(d.capacity);
  g.tile_cols = tile_cols;
  g.tiles_n = int32_t((n_out + tile_cols - 1) / tile_cols);
  g.band = gemm::default_band(tile_n, ctas);
  return g;
}

void require_expert_gemm(const WeftMoeExpertGemmParams* g, uint32_t flags_allowed, const char* op) {
  WEFT_REQUIRE(g, "%s: gemm params must not be NULL", op);
  WEFT_REQUIRE(g->size == sizeof(WeftMoeExpertGemmParams) && g->version == 1,
               "%s: gemm->size/version must be sizeof(WeftMoeExpertGemmParams) (%zu) and 1 (got %u, %u)", op,
               sizeof(WeftMoeExpertGemmParams), g->size, g->version);
  WEFT_REQUIRE((g->flags & ~flags_allowed) == 0, "%s: gemm->flags has bits this op does not take (0x%x)", op, g->flags);
  WEFT_REQUIRE(g->tile_n == 0 || g->tile_n == 128 || g->tile_n == 256, "%s: gemm->tile_n must be 0 (chosen), 128 or 256 (got %d)",
               op, g->tile_n);
  WEFT_REQUIRE(g->ctas >= 0, "%s: gemm->ctas must be >= 0 (got %d)", op, g->ctas);
  WEFT_REQUIRE(g->n >= 8 && g->n % 8 == 0, "%s: gemm->n must be a positive multiple of 8 (16-byte rows; got %d)", op, g->n);
  WEFT_REQUIRE(g->w != 0 && (g->w & 15) == 0, "%s: gemm->w must be a 16-byte aligned device address", op);
}

void write_gemm_choice(WeftMoeExpertGemmChoice* out, int ctas, int tile_n, int mover, const char* op) {
  if (!out) return;
  WEFT_REQUIRE(out->size == sizeof(WeftMoeExpertGemmChoice) && out->version == 1,
               "%s: out_gemm must be a WeftMoeExpertGemmChoice with size %zu and version 1", op, sizeof(WeftMoeExpertGemmChoice));
  out->ctas = ctas;
  out->tile_n = tile_n;
  out->mover = mover;
  out->stages = grouped_stages(tile_n);
}

}  // namespace weft::moe
