// plan.hpp — a tensor-parallel plan: WeftTpPlan, the ABI's opaque handle (weft.h), and the pieces
// that build and launch one, one file per path:
//   plan.cpp          the extern "C" entry points, validation, preload, the launch dispatch
//   all_gather.cpp    all-gather + GEMM: its launch state, its copy-engine side streams
//   scatter.cpp       GEMM + reduce-scatter / all-reduce: the state every mover shares (the CTA
//                     mover needs nothing else), the kernel's launch and the copies after it
//   copy_engine.cpp   the copy-engine mover: its state, its side streams' copies and their graphs
//   exchange.cpp      the exchange mover (decode all-reduce): its state, its first wave by copy engine
//   sequential.cpp    the sequential path: our GEMM and our collective, with padded copies
//   side_streams.cpp  side streams, stream memory operations and completion words, shared by all
// The choice of path and mover and the workspace layout are computed before any of this, in
// choice.cpp (tp::choose); the inter-node path is internode.cpp.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "fused/fused.h"
#include "gemm/gemm.h"
#include "tp/choice.hpp"
#include "tp/internode.hpp"
#include "weft.h"

struct WeftTpPlan {
  WeftComm* comm = nullptr;
  WeftTpParams params{};
  weft::tp::Problem problem{};
  weft::tp::Choice choice{};
  cudaStream_t stream = nullptr;
  char* workspace = nullptr;
  uint64_t epoch = 0;  // last launch; the first launch is epoch 1 (flags start at 0)
  // Fused.
  weft::fused::AgLaunch ag[2]{};  // by epoch parity (the landing slot)
  weft::fused::ScatterLaunch scatter{};
  std::vector<cudaStream_t> side;  // copy-engine mover: one stream per peer
  // Copy-engine reduce-scatter / all-reduce: the side streams' work per launch class (epoch mod 4),
  // captured once (nullptr: enqueued call by call at every launch), and the capture's fork/join events.
  cudaGraphExec_t copies[4] = {};
  std::vector<cudaEvent_t> capture_events;
  // Completion words for the first kernel of a multi-step launch (publish.cu carries them over).
  uint64_t* scratch_host = nullptr;
  uint64_t* scratch_dev = nullptr;
  uint32_t* scratch_arrivals = nullptr;
  // A communicator over several nodes: the proxy path (tp/internode.cpp) instead of all of the above.
  std::unique_ptr<weft::tp::InterAg> inter;
};

namespace weft::tp {

// side_streams.cpp
gemm::TileConfig tile_of(int tile_n);
void create_side_streams(WeftTpPlan& plan);
void stream_wait(cudaStream_t st, const uint64_t* word, uint64_t value, unsigned flags);
void stream_write(cudaStream_t st, uint64_t* word, uint64_t value);
gemm::CompletionWords scratch_words(const WeftTpPlan& plan);
gemm::CompletionWords launch_words(const WeftTpLaunch& l);

// all_gather.cpp
void build_all_gather(WeftTpPlan& plan);
void launch_all_gather_fused(WeftTpPlan& plan, const WeftTpLaunch& launch);
void enqueue_all_gather_copies(WeftTpPlan& plan);

// scatter.cpp
void build_scatter(WeftTpPlan& plan);
void launch_scatter_fused(WeftTpPlan& plan, const WeftTpLaunch& launch);
void launch_scatter_copies(WeftTpPlan& plan);

// copy_engine.cpp
void build_copy_engine(WeftTpPlan& plan, const gemm::Boxes& boxes);
void capture_scatter_copies(WeftTpPlan& plan);
void enqueue_scatter_copies(WeftTpPlan& plan, uint64_t epoch);

// exchange.cpp
void build_exchange(WeftTpPlan& plan, const gemm::Boxes& boxes);
void enqueue_first_wave_copies(WeftTpPlan& plan);

// sequential.cpp
WeftGemmParams sequential_gemm(const WeftTpPlan& plan);
void launch_sequential(WeftTpPlan& plan, const WeftTpLaunch& launch);

}  // namespace weft::tp
