// walk_testing.cpp — weft_testing_attention_walk: the engine's tile order and key blocks for a
// described launch, listed on the host (cuda/attention/walk_listing.cu), for the CPU tests.
#include <cmath>

#include "attention/attention.h"
#include "ring_layout.hpp"
#include "status.hpp"
#include "weft.h"

using namespace weft;

extern "C" {

WEFT_API int weft_testing_attention_walk(const int32_t* config, const int32_t* cu_q, const int32_t* cu_k,
                                         const int32_t* used_k, int32_t* out, int64_t capacity, int64_t* out_rows) {
  return guard([&] {
    WEFT_REQUIRE(config && out_rows && (out || capacity == 0), "config and out_rows must not be NULL");
    enum { kBatch, kHeads, kKvHeads, kHeadDim, kSeqQ, kSeqK, kCausal, kSection, kTotalQ, kTotalK, kWorld, kRank, kLayout,
           kGroupHeads, kKvRows, kMemoryKib, kReplayCtas, kReplayLimitCtas,
           kReplayLateCtas, kReplayLateAt, kL2ShareKib };
    const int32_t d = config[kHeadDim];
    WEFT_REQUIRE(attn::head_dim_supported(d), "head_dim must be 64 or 128");
    WEFT_REQUIRE(config[kBatch] >= 1 && config[kHeads] >= 1 && config[kKvHeads] >= 1 && config[kHeads] % config[kKvHeads] == 0,
                 "batch, heads, kv_heads must be >= 1, heads a multiple of kv_heads");
    WEFT_REQUIRE(config[kReplayCtas] >= 0 && config[kReplayLimitCtas] >= 0 && config[kReplayLateCtas] >= 0 &&
                 config[kReplayLateCtas] <= config[kReplayCtas] && config[kReplayLateAt] >= 0,
                 "replay CTAs must be >= 0, late CTAs at most the CTAs and late_at >= 0");
    const attn::WalkReplay replay{config[kReplayCtas], config[kReplayLimitCtas], config[kReplayLateCtas], config[kReplayLateAt]};
    const attn::TileShape t = attn::tile_shape(d);  // the one-GPU kernel's (the ring's: ring_tile_shape)
    WEFT_REQUIRE(!used_k || (cu_q && cu_k), "used_k needs cu_q and cu_k");
    if (config[kWorld] == 0) {
      attn::Problem q{};
      q.batch = config[kBatch];
      q.heads = config[kHeads];
      q.kv_heads = config[kKvHeads];
      q.seqlen_q = config[kSeqQ];
      q.seqlen_k = config[kSeqK];
      q.cu_q = cu_q;
      q.cu_k = cu_k ? cu_k : cu_q;
      q.used_k = used_k;
      q.m_blocks = (q.seqlen_q + t.block_m - 1) / t.block_m;
      q.tiles = q.batch * q.heads * q.m_blocks;
      q.section = config[kSection] > 0 ? config[kSection] : 1;
      q.causal = config[kCausal];
      q.lse_head_stride = cu_q ? config[kTotalQ] : q.seqlen_q;
      q.lse_batch_stride = int64_t(q.heads) * q.seqlen_q;
      q.rows_q = cu_q ? config[kTotalQ] : q.batch * q.seqlen_q;
      q.rows_k = cu_q ? config[kTotalK] : q.batch * q.seqlen_k;
      *out_rows = attn::list_walk_local(q, d, replay, out, capacity);
      return;
    }
    WEFT_REQUIRE(!used_k, "used_k: the ring reads no key counts");
    WeftRingAttentionParams p{};
    p.batch = config[kBatch];
    p.heads = config[kHeads];
    p.kv_heads = config[kKvHeads];
    p.head_dim = d;
    p.seqlen = config[kSeqQ];
    p.flags = config[kCausal] ? WEFT_ATTENTION_CAUSAL : 0;
    p.layout = config[kLayout];
    p.group_heads = config[kGroupHeads];
    p.kv_rows = config[kKvRows];
    p.memory_bytes = uint64_t(config[kMemoryKib]) * 1024;
    const int32_t world = config[kWorld], rank = config[kRank];
    WEFT_REQUIRE(world >= 1 && world <= attn::kRingMaxWorld && rank >= 0 && rank < world, "world in [1, 8], rank in [0, world)");
    // The walk does not depend on the mover; the tile order's bands depend on the L2 share.
    const attn_abi::Layout l = attn_abi::ring_layout(p, world, rank, false, int64_t(config[kL2ShareKib]) * 1024);
    const attn::RingState s = attn_abi::ring_state(p, l, world, rank, attn::ring_tile_shape(d).block_m);
    const attn::Problem q = attn_abi::ring_problem(p, l, rank, s);
    *out_rows = attn::list_walk_ring(q, s, d, replay, out, capacity);
  });
}

}  // extern "C"
