// plan.hpp — a tensor-parallel plan: WeftTpPlan, the ABI's opaque handle (weft.h), and what the
// candidates' files share to build and launch one. The files, one per candidate (candidate.hpp):
//   abi.cpp           the extern "C" entry points: validation, the plan's life, launches in order
//   picker.cpp        tp::choose: every candidate's estimate, the forced or cheapest one
//   cost_model.hpp    the machine numbers and helpers the estimates share
//   all_gather.cpp    all-gather + GEMM: rows moved by the copy engines, or by CTAs of the kernel
//   scatter.cpp       GEMM + reduce-scatter / all-reduce: the state every mover shares, and the CTA mover
//   copy_engine.cpp   GEMM + reduce-scatter / all-reduce: partials moved by the copy engines
//   exchange.cpp      GEMM + all-reduce at decode sizes: every partial tile exchanged
//   sequential.cpp    our GEMM and our collective, with padded copies
//   node_plan.cpp     allGatherGemm / gemmReduceScatter across nodes (NVLink, then the proxy)
//   side_streams.cpp  side streams, stream memory operations and completion words
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "fused/across_nodes.h"
#include "fused/fused.h"
#include "gemm/gemm.h"
#include "tp/candidate.hpp"
#include "tp/choice.hpp"
#include "weft.h"

namespace weft::tp {

// The inter-node TP plan's launch state (node_plan.cpp), by the communicator's epoch parity.
struct NodePlanLaunch {
  bool scatter = false;        // gemmReduceScatter, else allGatherGemm
  fused::InterAgLaunch ag[2];  // landing / partial slots and staging by parity
  fused::InterRsLaunch rs[2];
};

}  // namespace weft::tp

struct WeftTpPlan {
  WeftComm* comm = nullptr;
  WeftTpParams params{};
  weft::tp::Placement place{};
  weft::tp::Problem problem{};
  weft::tp::Choice choice{};  // computed once, at creation; choice.candidate builds and launches
  cudaStream_t stream = nullptr;
  char* workspace = nullptr;
  uint64_t epoch = 0;  // last launch; the first launch is epoch 1 (flags start at 0)
  // One node, fused.
  weft::fused::AgLaunch ag[2]{};  // by epoch parity (the landing slot)
  weft::fused::ScatterLaunch scatter{};
  std::vector<cudaStream_t> side;  // copy-engine movers: one stream per peer
  // Copy-engine reduce-scatter / all-reduce: the side streams' work per launch class (epoch mod 4),
  // captured once (nullptr: enqueued call by call at every launch), and the capture's fork/join events.
  cudaGraphExec_t copies[4] = {};
  std::vector<cudaEvent_t> capture_events;
  // Completion words for the first kernel of a multi-step launch (publish.cu carries them over).
  uint64_t* scratch_host = nullptr;
  uint64_t* scratch_dev = nullptr;
  uint32_t* scratch_arrivals = nullptr;
  // Several nodes (node_plan.cpp).
  std::unique_ptr<weft::tp::NodePlanLaunch> nodes;
};

namespace weft::tp {

// The placement of this rank's communicator, as the cost model sees it.
Placement placement_of(const WeftComm& c);

// The GEMM's shape and grid in a fused launch struct, every plan's the same way.
inline void set_gemm_shape(fused::GemmLaunchShape& l, int64_t m, int64_t n, int64_t k, bool b_nk, const Choice& ch,
                           cudaStream_t stream) {
  l.m = int32_t(m);
  l.n = int32_t(n);
  l.k = int32_t(k);
  l.tile_n = ch.tile_n;
  l.b_n_major = !b_nk;
  l.gemm_ctas = ch.gemm_ctas;
  l.stream = stream;
}

// A single-node fused state's bounds on its waits (fused/abort.cuh): the communicator's timeout and
// host abort word, every rank's plan abort word (the workspace's, as this process maps it); and the
// rank's place in the plan.
template <class State>
void set_waits_and_rank(State& s, const WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  s.timeout_ns = c.timeout_ns;
  s.abort.host = c.abort_dev;
  for (int q = 0; q < plan.problem.world; ++q)
    s.abort.plan[q] = reinterpret_cast<uint64_t*>(comm::on_rank(c, q, plan.workspace + plan.choice.layout.abort.offset));
  s.rank = plan.problem.rank;
  s.world = plan.problem.world;
}

// side_streams.cpp
gemm::TileConfig tile_of(int tile_n);
void create_side_streams(WeftTpPlan& plan);
void stream_wait(cudaStream_t st, const uint64_t* word, uint64_t value, unsigned flags);
void stream_write(cudaStream_t st, uint64_t* word, uint64_t value);
gemm::CompletionWords scratch_words(const WeftTpPlan& plan);
gemm::CompletionWords launch_words(const WeftOpLaunch& l);

// scatter.cpp: what the CTA, copy-engine and exchange movers of the scatter ops share.
// The configuration on `sms` SMs (tile, ownership, band, grid, lag) and the GEMM's estimate.
Estimate scatter_config(const Call& call, Choice& c, int sms);
void build_scatter(WeftTpPlan& plan);  // the launch state; the movers add their parts
void load_scatter(const WeftTpPlan& plan);
void launch_scatter(WeftTpPlan& plan, const WeftOpLaunch& launch);

// sequential.cpp
WeftGemmParams sequential_gemm(const WeftTpPlan& plan);

}  // namespace weft::tp
