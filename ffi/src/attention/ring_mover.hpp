// ring_mover.hpp — who fills a ring-attention rank's receive buffer, behind one interface so that
// another mover (comm CTAs, the inter-node proxy) can feed the same kernel later: for every launch
// it must, per kv-head group g (in order) and peer s, put s's K and V heads of group g into slot
// g % slots at s's region, never before the rank's `go` word reaches the epoch (every peer has
// entered the launch, so their shards are final) and, for g >= slots, never before group_done[g -
// slots] reaches epoch x ctas (the kernel is done with the slot's previous group); then raise
// flags[g * W + s] to the epoch; and once all of s's groups are in, raise pulled[s] (s's kernel
// waits for it before its launch completes). Stream-ordered: nothing on the host waits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace weft::attn_abi {

// Where everything lives, for one rank (ring_plan.cpp fills it).
struct RingBuffers {
  int32_t world, rank;
  int32_t batch, kv_heads, head_dim;
  int32_t group_heads, groups, slots, slot_rows;
  std::vector<int32_t> shard;       // tokens per sequence of each rank
  std::vector<int32_t> kv_rows;     // rows per sequence of each rank's k and v
  std::vector<int32_t> source_row;  // row of each peer's region in a slot
  std::vector<const char*> peer_k;  // each peer's k and v as this process maps them
  std::vector<const char*> peer_v;
  char* recv_k = nullptr;
  char* recv_v = nullptr;
  uint64_t* go = nullptr;
  uint64_t* flags = nullptr;
  uint64_t* group_done = nullptr;
  uint64_t* pulled = nullptr;  // [world]
  int32_t ctas = 0;
};

class RingMover {
 public:
  virtual ~RingMover() = default;
  // Enqueues launch `epoch`'s moves (after the launch's kernel was enqueued).
  virtual void enqueue(uint64_t epoch) = 0;
  // Waits for everything enqueued; returns the first error.
  virtual cudaError_t drain() = 0;
};

// One side stream per peer: cudaMemcpy2DAsync of each group's K and V heads (rows of group_heads x
// head_dim out of every token row of the peer's k / v), then cuStreamWriteValue64 of the flag.
std::unique_ptr<RingMover> copy_engine_mover(const RingBuffers& b);

}  // namespace weft::attn_abi
