// internode.hpp — tensor-parallel plans on a communicator that spans several nodes: the choice and
// the launch of cuda/fused/all_gather_gemm_internode.cu and gemm_reduce_scatter_internode.cu. weft_tp_choose / weft_tp_plan_create /
// weft_tp_plan_launch (plan.cpp) hand multi-node communicators to these functions.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "comm/comm.hpp"
#include "fused/internode.h"
#include "tp/choice.hpp"
#include "weft.h"

namespace weft::tp {

struct InterAg {
  bool scatter = false;        // gemmReduceScatter (rs), else allGatherGemm (ag)
  fused::InterAgLaunch ag[2];  // by the communicator's epoch parity (landing / partial slots, staging)
  fused::InterRsLaunch rs[2];
};

// Validates the call for the multi-node path (throws WEFT_E_UNSUPPORTED for what it cannot run,
// WEFT_E_INVALID naming a bad override) and chooses tile, chunks and the CTA split. Layout:
//   all-gather      flags u64 [world][chunks], then landing [2][world * m_shard][k] bf16
//   reduce-scatter  stored u64 [2 tiles_m][tiles_n], then partial [2][M][N] bf16
Choice internode_choose(const WeftComm& c, const WeftTpParams& p);
// Builds the launches (tensor maps, peer addresses) and loads the kernel.
std::unique_ptr<InterAg> internode_build(const WeftComm& c, const WeftTpParams& p, const Choice& choice, char* workspace,
                                         cudaStream_t stream);
// Takes the communicator's next epoch and launches (given back when the launch fails).
void internode_launch(InterAg& plan, WeftComm& c, const WeftTpLaunch& launch);

}  // namespace weft::tp
