// ring_layout.hpp — the pure part of a ring-attention plan: the sequence's chunks and every rank's
// shard, the receive groups and slots (the memory budget), the workspace sizes, and the kernel's
// RingState for one rank (without addresses). ring_plan.cpp builds plans from it; the walk listing
// (weft_testing_attention_walk) uses it without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "attention/problem.h"
#include "attention/ring_state.h"
#include "weft.h"

namespace weft::attn_abi {

struct Layout {
  int32_t chunks;
  std::array<int32_t, attn::kRingMaxChunks + 1> starts{};
  std::vector<int32_t> shard;  // tokens per sequence, per rank
  int32_t group_heads, groups, slots;
  int32_t order_groups;        // groups per band of the tile order (RingState::order_groups)
  int32_t mover;               // WeftRingMover chosen (AUTO: world 1, nothing to move)
  int32_t mover_ctas;          // WEFT_RING_MOVER_CTAS: CTAs [0, mover_ctas) copy
  int32_t ctas;                // CTAs that compute; set by the plan (needs the device)
  uint64_t slot_bytes;         // K and V of one group of every peer's shard, for the rank whose peers hold the most
  uint64_t abort_offset;  // the plan's abort word in the control region (ring_plan.cpp's layout)
  uint64_t tile_counter_offset;  // the compute CTAs' tile scheduler word (cuda/attention/scheduler.cuh)
  uint64_t control_bytes, receive_bytes, workspace_bytes;  // receive_bytes: K and V together
  double predicted_us;
};

// Tokens of every rank but `rank`, per sequence.
int64_t peer_tokens(const Layout& l, int32_t rank);

// Throws WEFT_E_INVALID when the sequence cannot be chunked or the budget holds no slot.
// l2_share_bytes: the L2 this rank's kernel may count on (the device's, divided among the ranks that
// share it); it sizes the tile order's bands.
Layout ring_layout(const WeftRingAttentionParams& p, int32_t world, int32_t rank, bool shares_device, int64_t l2_share_bytes);

// The kernel's state for `rank` (every pointer null, epoch 0, ctas and timeout unset).
attn::RingState ring_state(const WeftRingAttentionParams& p, const Layout& l, int32_t world, int32_t rank, int32_t block_m);

// The problem the ring kernel reads for `rank`'s shard (problem.h; lse and out from the params).
attn::Problem ring_problem(const WeftRingAttentionParams& p, const Layout& l, int32_t rank, const attn::RingState& s);

}  // namespace weft::attn_abi
