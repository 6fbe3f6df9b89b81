// abi.cpp — weft_tp_choose / weft_tp_plan_create / weft_tp_plan_launch / weft_tp_plan_destroy:
// validates a tensor-parallel call, chooses once (tp::choose, picker.cpp), has the chosen candidate
// build the launch (tp/plan.hpp lists the files: tensor maps on this rank's and the peers' memory,
// the epoch patched per launch), and launches it: every plan's kernels first, then their
// side-stream work. weft_testing_tp_choose runs the same choice on a described machine.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "comm/call_checks.hpp"
#include "comm/comm.hpp"
#include "device_guard.hpp"
#include "out_struct.hpp"
#include "status.hpp"
#include "tp/choice.hpp"
#include "tp/plan.hpp"
#include "weft.h"

using namespace weft;
using namespace weft::tp;

namespace {

constexpr char kOp[] = "weft_tp";

bool aligned16(uint64_t p) { return (p & 15u) == 0; }

using comm::on_rank;

// TMA needs every operand 16-byte aligned; the rest is what every communicator call checks.
void require_device_ptr(const WeftComm& c, uint64_t ptr, const char* name) {
  comm::require_on_device(c, ptr, name, kOp);
  WEFT_REQUIRE(aligned16(ptr), "%s: %s (%#llx) must be 16-byte aligned", kOp, name, (unsigned long long)ptr);
}

void require_symmetric(const WeftComm& c, uint64_t ptr, uint64_t bytes, const char* name) {
  comm::require_symmetric(c, ptr, bytes, name, kOp);
}

void validate(const WeftComm& c, const WeftTpParams* p) {
  WEFT_REQUIRE(p, "params must not be NULL");
  WEFT_REQUIRE(p->size == sizeof(WeftTpParams) && p->version == 1,
               "params->size/version must be sizeof(WeftTpParams) (%zu) and 1 (got %u, %u)", sizeof(WeftTpParams), p->size,
               p->version);
  WEFT_REQUIRE(p->op >= WEFT_TP_ALL_GATHER_GEMM && p->op <= WEFT_TP_GEMM_ALL_REDUCE, "op %d is not a WeftTpOp", p->op);
  WEFT_REQUIRE((p->flags & ~uint32_t(WEFT_GEMM_B_NK)) == 0, "flags has unknown bits (0x%x); only WEFT_GEMM_B_NK", p->flags);
  constexpr int64_t kMax = (int64_t(1) << 31) - 1;
  WEFT_REQUIRE(p->m >= 1 && p->n >= 1 && p->k >= 1 && p->m <= kMax && p->n <= kMax && p->k <= kMax,
               "m, n and k must be in [1, 2^31) (got %lld, %lld, %lld)", (long long)p->m, (long long)p->n, (long long)p->k);
  WEFT_REQUIRE(p->gathered == 0 || p->op == WEFT_TP_ALL_GATHER_GEMM, "gathered is an all-gather output");
}

void validate_tensors(const WeftComm& c, const WeftTpParams& p) {
  require_device_ptr(c, p.a, "a");
  require_device_ptr(c, p.b, "b");
  require_device_ptr(c, p.out, "out");
  if (p.gathered) require_device_ptr(c, p.gathered, "gathered");
  const int64_t m_shard = (p.m + c.world - 1) / c.world;
  if (p.op == WEFT_TP_GEMM_REDUCE_SCATTER) require_symmetric(c, p.out, uint64_t(m_shard) * p.n * 2, "out");
  if (p.op == WEFT_TP_GEMM_ALL_REDUCE) require_symmetric(c, p.out, uint64_t(p.m) * p.n * 2, "out");
}

void fill_choice(const tp::Choice& c, WeftTpChoice* out) {
  out->path = c.path;
  out->mover = c.mover;
  out->comm_ctas = c.comm_ctas;
  out->gemm_ctas = c.gemm_ctas;
  out->tile_n = c.tile_n;
  out->group_m = c.group_m;
  out->chunk_rows = c.chunk_rows;
  out->fused_available = c.fused_available ? 1 : 0;
  out->workspace_bytes = c.layout.total;
  out->predicted_fused_us = c.fused_available ? c.fused_us : 0;
  out->predicted_sequential_us = c.sequential_us;
  std::memset(out->reason, 0, sizeof out->reason);
  std::strncpy(out->reason, c.reason.c_str(), sizeof out->reason - 1);
}

// Loads every kernel a launch of this plan will start, now, while none of them is running: the
// publisher here, each candidate's own kernel in its build.
// NOTES: with CUDA's lazy module loading (the default since 12.2) the first launch of a kernel loads
// its module and may first wait for the device to go idle. If a kernel launched just before waits
// for another GPU (a collective, a fused op) whose part this same host thread has yet to launch,
// that wait never ends: on the 2 x H200 host the first sequential all-gather + GEMM hung exactly so
// (the all-gather ran, the GEMM's first launch waited for it, the peer's all-gather was never
// launched) until the GPU-side timeout. CUDA documents this caveat for kernels that rely on running
// concurrently. The collectives' modules are loaded by the collective that plan creation runs
// (lib/ops/tp.ts: all-reduce) or, for the sequential path's own collective, at its first launch,
// which comes first in the launch (all-gather) or after our GEMM (the others), so nothing of this
// launch is running yet when it loads.
void build_and_preload(WeftTpPlan& plan) {
  WEFT_CUDA(fused::preload_publish());
  plan.choice.candidate->build(plan);
}

// A launch is its kernels (and the sequential path's steps) on the plan's stream, then the
// candidate's side-stream work. A launch that fails part-way leaves this rank out of step with its
// peers; the error says so through the status, and the peers' waits for it are bounded.
void launch_kernels(WeftTpPlan& plan, const WeftOpLaunch& launch) { plan.choice.candidate->launch(plan, launch); }

void launch_copies(WeftTpPlan& plan) {
  if (plan.choice.candidate->copies && !plan.side.empty()) plan.choice.candidate->copies(plan);
}

void release(WeftTpPlan& plan) {
  for (cudaGraphExec_t& g : plan.copies) {
    if (g) (void)cudaGraphExecDestroy(g);
    g = nullptr;
  }
  for (cudaEvent_t e : plan.capture_events) (void)cudaEventDestroy(e);
  plan.capture_events.clear();
  for (cudaStream_t s : plan.side) (void)cudaStreamDestroy(s);
  plan.side.clear();
  if (plan.scratch_arrivals) (void)cudaFree(plan.scratch_arrivals);
  plan.scratch_arrivals = nullptr;
  if (plan.scratch_host) (void)cudaFreeHost(plan.scratch_host);
  plan.scratch_host = nullptr;
}

// The configuration beside the reported choice, as text (weft_testing_tp_choose): the split tail,
// the ownership and lag, the copy-engine chunking, the sequential path's padding, every region.
std::string detail_of(const tp::Choice& ch, const tp::Placement& place, int op) {
  std::string d;
  char b[256];
  if (ch.path == WEFT_TP_PATH_FUSED && place.nodes == 1) {
    if (op == WEFT_TP_ALL_GATHER_GEMM) {
      std::snprintf(b, sizeof b, " tail=%d/%d/%d/%d/%d", ch.tail.first_unit, ch.tail.tiles, ch.tail.pieces, ch.tail.k_blocks, ch.tail.ctas);
    } else {
      std::snprintf(b, sizeof b, " shard=%d lag=%d", ch.shard_tiles, ch.lag);
    }
    d += b;
    if (op != WEFT_TP_ALL_GATHER_GEMM && ch.mover == WEFT_TP_MOVER_COPY_ENGINE) {
      std::snprintf(b, sizeof b, " slab=%d slabs=%d chunks=%d", ch.slab_tiles, ch.slabs, ch.chunks);
      d += b;
    }
  }
  if (ch.path == WEFT_TP_PATH_SEQUENTIAL) {
    std::snprintf(b, sizeof b, " kp=%lld np=%lld pad=%d%d%d", (long long)ch.kp, (long long)ch.np, ch.pad_a, ch.pad_b, ch.pad_out);
    d += b;
  }
  const tp::Layout& l = ch.layout;
  const std::pair<const char*, const tp::Region*> regions[] = {
      {"flags", &l.flags}, {"landing", &l.landing}, {"stored", &l.stored}, {"done", &l.done},
      {"entered", &l.entered}, {"counts", &l.counts}, {"ready", &l.ready}, {"progress", &l.progress},
      {"staging_ce", &l.staging_ce}, {"recv", &l.recv}, {"staging", &l.staging}, {"a_pad", &l.a_pad},
      {"b_pad", &l.b_pad}, {"out_pad", &l.out_pad}, {"tail_partials", &l.tail_partials}, {"tail_counts", &l.tail_counts},
      {"abort", &l.abort}};
  for (const auto& [name, r] : regions) {
    if (r->bytes == 0 && r->offset == 0) continue;
    std::snprintf(b, sizeof b, " %s=%llu+%llu", name, (unsigned long long)r->offset, (unsigned long long)r->bytes);
    d += b;
  }
  return d + " | " + ch.reason;
}

}  // namespace

namespace weft::tp {

Placement placement_of(const WeftComm& c) {
  Placement p;
  p.world = int(c.world);
  p.rank = int(c.rank);
  p.sm_count = c.sm_count;
  p.nodes = c.inter.nodes > 1 ? int(c.inter.nodes) : 1;
  p.global_world = c.inter.nodes > 1 ? int(c.inter.world) : int(c.world);
  p.slot_bytes = c.inter.slot_bytes;
  p.shares_device = c.shares_device;
  return p;
}

}  // namespace weft::tp

extern "C" {

WEFT_API int weft_testing_tp_choose(const WeftTestingTpMachine* machine, const WeftTpParams* params, WeftTpChoice* out,
                                    const char** out_detail) {
  return guard([&] {
    WEFT_REQUIRE(machine && machine->size == sizeof(WeftTestingTpMachine) && machine->version == 1,
                 "machine must be a WeftTestingTpMachine with size %zu and version 1", sizeof(WeftTestingTpMachine));
    WEFT_REQUIRE(machine->world >= 1 && machine->world <= 64 && machine->rank >= 0 && machine->rank < machine->world,
                 "machine: world must be in [1, 64] and rank in [0, world) (got %d, %d)", machine->world, machine->rank);
    WEFT_REQUIRE(machine->sm_count >= 1 && machine->sm_budget >= 0 && machine->nodes >= 1,
                 "machine: sm_count >= 1, sm_budget >= 0 and nodes >= 1 (got %d, %d, %d)", machine->sm_count, machine->sm_budget,
                 machine->nodes);
    WEFT_REQUIRE(params && params->size == sizeof(WeftTpParams) && params->version == 1,
                 "params must be a WeftTpParams with size %zu and version 1", sizeof(WeftTpParams));
    require_out_struct(out, "WeftTpChoice");
    tp::Placement place;
    place.world = machine->world;
    place.rank = machine->rank;
    place.sm_count = machine->sm_budget > 0 ? std::min(machine->sm_count, machine->sm_budget) : machine->sm_count;
    place.nodes = machine->nodes;
    place.global_world = machine->nodes * machine->world;
    place.slot_bytes = machine->slot_bytes;
    place.shares_device = machine->shares_device != 0;
    const tp::Choice choice = tp::choose(*params, place);
    fill_choice(choice, out);
    static thread_local std::string detail;
    detail = detail_of(choice, place, params->op);
    if (out_detail) *out_detail = detail.c_str();
  });
}

WEFT_API int weft_tp_choose(WeftComm* comm, const WeftTpParams* params, WeftTpChoice* out) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    validate(c, params);
    require_out_struct(out, "WeftTpChoice");
    fill_choice(tp::choose(*params, tp::placement_of(c)), out);
  });
}

WEFT_API int weft_tp_plan_create(WeftComm* comm, const WeftTpParams* params, WeftTpPlan** out_plan) {
  return guard([&] {
    WeftComm& c = comm::require(comm, true);
    validate(c, params);
    WEFT_REQUIRE(out_plan, "out_plan must not be NULL");
    validate_tensors(c, *params);
    const tp::Placement place = tp::placement_of(c);
    const tp::Choice choice = tp::choose(*params, place);
    WEFT_REQUIRE(params->workspace_bytes >= choice.layout.total,
                 "workspace_bytes (%llu) is smaller than the plan needs (%llu, weft_tp_choose)",
                 (unsigned long long)params->workspace_bytes, (unsigned long long)choice.layout.total);
    require_symmetric(c, params->workspace, params->workspace_bytes, "workspace");
    DeviceGuard g(c.device);
    auto plan = std::make_unique<WeftTpPlan>();
    plan->comm = comm;
    plan->params = *params;
    plan->place = place;
    plan->problem = tp::problem_of(*params, place);
    plan->choice = choice;
    plan->stream = reinterpret_cast<cudaStream_t>(params->stream);
    if (plan->stream) {
      int sd = -1;
      WEFT_CUDA(cudaStreamGetDevice(plan->stream, &sd));
      WEFT_REQUIRE(sd == c.device, "stream belongs to device %d but the communicator's rank is on device %d", sd, c.device);
    }
    plan->workspace = reinterpret_cast<char*>(params->workspace);
    try {
      void* host = nullptr;
      WEFT_CUDA(cudaHostAlloc(&host, 16, cudaHostAllocMapped | cudaHostAllocPortable));
      plan->scratch_host = static_cast<uint64_t*>(host);
      plan->scratch_host[0] = plan->scratch_host[1] = 0;
      void* dev = nullptr;
      WEFT_CUDA(cudaHostGetDevicePointer(&dev, host, 0));
      plan->scratch_dev = static_cast<uint64_t*>(dev);
      WEFT_CUDA(cudaMalloc(reinterpret_cast<void**>(&plan->scratch_arrivals), 8));
      WEFT_CUDA(cudaMemsetAsync(plan->scratch_arrivals, 0, 8, plan->stream));
      // Flags start at 0 and padding stays 0 (stream-ordered; the caller orders it before any peer's
      // first launch with a barrier on the same stream).
      WEFT_CUDA(cudaMemsetAsync(plan->workspace, 0, choice.layout.total, plan->stream));
      build_and_preload(*plan);
    } catch (...) {
      release(*plan);
      throw;
    }
    *out_plan = plan.release();
  });
}

WEFT_API int weft_tp_plan_launch(WeftTpPlan* plan, const WeftOpLaunch* launch) {
  return weft_tp_plans_launch(&plan, launch, 1);
}

WEFT_API int weft_tp_plans_launch(WeftTpPlan* const* plans, const WeftOpLaunch* launches, int32_t count) {
  return guard([&] {
    WEFT_REQUIRE(plans && count > 0, "plans must hold count > 0 entries");
    WEFT_REQUIRE(launches, "launch must not be NULL");
    for (int32_t i = 0; i < count; ++i) {
      WEFT_REQUIRE(plans[i], "plan %d must not be NULL", i);
      WEFT_REQUIRE(launches[i].size == sizeof(WeftOpLaunch) && launches[i].version == 1,
                   "launch %d must be a WeftOpLaunch with size %zu and version 1", i, sizeof(WeftOpLaunch));
      WEFT_REQUIRE(launches[i].done != 0 && launches[i].arrivals != 0, "launch %d: done and arrivals are required", i);
      comm::require(plans[i]->comm, true);
      for (int32_t j = 0; j < i; ++j) WEFT_REQUIRE(plans[j] != plans[i], "plans %d and %d are the same plan", j, i);
    }
    // Every kernel first, then every plan's copy-engine work: a rank's kernel is never queued behind
    // another rank's host-side enqueue (bench/DECISIONS.md, "Every rank's kernel is queued before any
    // plan's copies"). Plans whose kernels were launched get
    // their copies even if a later kernel launch fails (their kernels wait for them).
    int32_t launched = 0;
    try {
      for (; launched < count; ++launched) {
        DeviceGuard g(plans[launched]->comm->device);
        launch_kernels(*plans[launched], launches[launched]);
      }
    } catch (...) {
      for (int32_t i = 0; i < launched; ++i) {
        try {
          DeviceGuard g(plans[i]->comm->device);
          launch_copies(*plans[i]);
        } catch (...) {
          // the first failure is the one to report
        }
      }
      throw;
    }
    for (int32_t i = 0; i < count; ++i) {
      DeviceGuard g(plans[i]->comm->device);
      launch_copies(*plans[i]);
    }
  });
}

WEFT_API int weft_tp_plan_destroy(WeftTpPlan* plan) {
  return guard([&] {
    if (!plan) return;
    std::unique_ptr<WeftTpPlan> owned(plan);
    DeviceGuard g(plan->comm->device);
    cudaError_t e = cudaStreamSynchronize(plan->stream);
    for (cudaStream_t s : plan->side) {
      const cudaError_t se = cudaStreamSynchronize(s);
      if (e == cudaSuccess) e = se;
    }
    release(*plan);
    WEFT_CUDA(e);
  });
}

}  // extern "C"
