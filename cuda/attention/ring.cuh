// ring.cuh — the fused ring's KV source: one persistent kernel per rank computes attention of its
// shard of the queries over every rank's keys, each query tile's online-softmax state staying in
// registers from the first key block to the last (no partial outputs, no merge kernel).
//
// Sharding (ring_state.h): the sequence's chunks, zigzag (rank r: chunks r and 2W − 1 − r, which
// balances causal work) or contiguous. Causal masks compare global positions (RingState::starts).
//
// Where a tile's keys come from, in order (KvWalk segments): this rank's own shard first (its local
// k / v tensors: Params::k[0], v[0]; nothing to wait for), then every peer's, nearest upstream first
// (r − 1, r − 2, ...), each read from this rank's receive buffer (Params::k[1], v[1]) once it has
// landed. The copy engines fill the buffer (ffi/src/attention/ring_mover.cpp: for each kv-head
// group g and source s, a 2-D copy of s's K and V heads of the group from s's symmetric k / v), or
// the kernel's first mover_ctas CTAs do (move() below); either raises flags[g * W + s] = epoch
// after the group's data. The producer waits for that flag (bounded) before a block's first load.
//
// Memory: the buffer has `slots` slots, each one kv-head group of every peer's shard; group g uses
// slot g % slots. Tiles come group by group (tile order below), and each CTA adds 1 to
// group_done[g] once its consumers have started a tile of a later group (every load of group g's
// blocks has then landed) or finished; a copy into a slot that held group g waits (stream-ordered,
// cuStreamWaitValue64) until group_done[g] reaches epoch x ctas. With slots == groups (the
// caller allowed the memory: an all-gather of K and V) nothing waits.
//
// Start and end of a launch (CTA 0): thread 0 raises this rank's symmetric `entered` word, waits
// until every peer has entered the same launch (their shards are final: each kernel starts after
// its stream's earlier writes), then raises `go`, which this rank's side streams wait for before
// their first copy. At the end, CTA 0 waits until every peer has copied this rank's shard
// (peer_pulled), so the caller may overwrite k and v once the launch completes.
//
// Failure: every wait for a peer (or for this kernel's other CTAs) is bounded by the communicator's
// timeout and polls the host's abort word (weft_comm_abort) and the plan's (primitives/abort.cuh): a
// role whose wait gave up calls on_wait_failed, which reports the declared rank or the peer that gave
// up (WEFT_E_PEER), or else this rank's own timeout (kFailPeerWait) and raises every rank's plan
// abort word, so that the peers stop at their next poll instead of at their own timeout.
//
// Tile order: kv-head groups one after the other; inside a group, query block by query block
// (under a causal mask the last positions first: a later local block is a later global position,
// in both layouts), then (sequence, head) pairs of the group. So group g's slot is released as
// early as the schedule allows, and L2 holds the few heads the running CTAs share. The compute CTAs
// take tiles in that order from the workspace's tile counter (scheduler.cuh), so each CTA's tiles
// still come group by group (group_done below) and a group's tiles start as its peers' data lands.
#pragma once

#include "../collectives/move.cuh"
#include "../primitives/abort.cuh"
#include "../primitives/signal.cuh"
#include "../primitives/tma.cuh"
#include "params.cuh"
#include "ring_state.h"

namespace weft::attn {

struct RingPolicy {
  using State = RingState;
  struct ProducerCache {
    int32_t gate = -1;  // the last gate seen open: the next blocks behind it need no poll
  };
  struct ConsumerCache {
    int32_t group = 0;  // groups before this one are done (group_done raised)
  };

  static constexpr bool kMovers = true;
  static __device__ int32_t first_tile_cta(const Params<State>& p) { return p.state.mover_ctas; }
  static __device__ uint32_t* tile_counter(const Params<State>& p) { return p.state.tile_counter; }
  static __device__ bool is_mover(const Params<State>& p) { return int32_t(blockIdx.x) < p.state.mover_ctas; }

  // primitives/abort.cuh's abort_budget, with this rank's plan word read from own_abort.
  static __device__ __forceinline__ sys::WaitBudget budget(const RingState& r) {
    return sys::WaitBudget{r.timeout_ns, r.abort.host, r.own_abort, r.epoch << 16};
  }

  // Every thread of the CTA; false (in thread 0) when a wait ran out or was aborted.
  static __device__ bool wait_all(const uint64_t* word, uint64_t value, const RingState& r) {
    bool ok = true;
    if (threadIdx.x == 0) ok = sys::wait_at_least(word, value, budget(r)) == sys::WaitResult::kOk;
    return __syncthreads_and(ok) != 0;
  }

  // Once per role whose wait gave up (see "Failure" above).
  static __device__ void on_wait_failed(const Params<State>& p, uint32_t stage) {
    const RingState& r = p.state;
    sys::report_wait_failure(r.abort, r.rank, r.world, r.epoch, p.completion, kFailPeerWait, stage);
  }

  // The CTA mover: item i = (group i / (W - 1), the (1 + i % (W - 1))-th upstream peer), the copy
  // engines' order; mover CTA c takes items c, c + mover_ctas, ... Rows of group_heads x D bf16
  // move as 16-byte vectors (ld.global.cg from the peer over NVLink, st.global here), then thread 0
  // raises the item's flag with a system-scope release, cumulative over the CTA's stores after the
  // barrier (as the all-gather's CTA mover does).
  static __device__ bool move(const Params<State>& p) {
    const RingState& r = p.state;
    bool ok = wait_all(r.go, r.epoch, r);  // every peer has entered: their shards are final
    const int32_t peers = r.world - 1;
    const int32_t d = int32_t(p.problem.o_row_stride / p.problem.heads);
    const uint64_t row = uint64_t(r.group_heads) * d * 2;
    const uint64_t pitch = uint64_t(p.problem.kv_heads) * d * 2;
    for (int32_t i = blockIdx.x; i < r.groups * peers; i += r.mover_ctas) {
      const int32_t g = i / peers;
      const int32_t src = (r.rank - (1 + i % peers) + r.world) % r.world;
      if (g >= r.slots) ok = wait_all(r.group_done + (g - r.slots), r.epoch * uint64_t(r.ctas), r) && ok;
      const uint64_t vectors = uint64_t(imin(r.group_heads, p.problem.kv_heads - g * r.group_heads)) * d * 2 / 16;
      const uint64_t total = uint64_t(p.problem.batch) * r.shard[src] * vectors;
      // kInFlight vectors of K and of V per thread between the loads and the stores: an NVLink load
      // takes ~1 us, so one at a time would leave a CTA at ~10 GB/s.
      constexpr int kInFlight = 4;
      const auto at = [&](uint64_t v, uint64_t& from, uint64_t& to) {
        const uint64_t line = v / vectors, c = v - line * vectors;
        const uint64_t b = line / r.shard[src], t = line - b * r.shard[src];
        from = (b * r.peer_kv_rows[src] + t) * pitch + uint64_t(g) * r.group_heads * d * 2 + c * 16;
        to = (uint64_t(g % r.slots) * r.slot_rows + r.source_row[src] + b * r.shard[src] + t) * row + c * 16;
      };
      for (uint64_t v0 = threadIdx.x; v0 < total; v0 += uint64_t(kInFlight) * blockDim.x) {
        uint4 kv[2 * kInFlight];
        uint64_t to[kInFlight];
#pragma unroll
        for (int j = 0; j < kInFlight; ++j) {
          const uint64_t v = v0 + uint64_t(j) * blockDim.x;
          if (v < total) {
            uint64_t from;
            at(v, from, to[j]);
            kv[2 * j] = coll::mem::ld16(r.peer_k[src] + from);
            kv[2 * j + 1] = coll::mem::ld16(r.peer_v[src] + from);
          }
        }
#pragma unroll
        for (int j = 0; j < kInFlight; ++j) {
          if (v0 + uint64_t(j) * blockDim.x < total) {
            coll::mem::st16(r.recv_k + to[j], kv[2 * j]);
            coll::mem::st16(r.recv_v + to[j], kv[2 * j + 1]);
          }
        }
      }
      __syncthreads();
      if (threadIdx.x == 0) sys::signal_store(r.flags + int64_t(g) * r.world + src, r.epoch);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // The last mover CTA of this launch: every peer's shard has been read, so the peers may finish.
      const uint64_t done = sys::device_signal_fetch_add(r.movers_done, 1) + 1;
      if (done == r.epoch * uint64_t(r.mover_ctas)) {
        for (int32_t s = 0; s < r.world; ++s) {
          if (s != r.rank) sys::signal_store(r.pulled + s, r.epoch);
        }
      }
    }
    return ok;
  }

  static __device__ void on_kernel_start(const Params<State>& p) {
    const RingState& r = p.state;
    if (blockIdx.x != 0) return;
    sys::signal_store(r.entered, r.epoch);
    bool ok = true;
    for (int32_t s = 0; s < r.world; ++s) {
      if (s == r.rank) continue;
      ok = ok && sys::wait_at_least(r.peer_entered[s], r.epoch, budget(r)) == sys::WaitResult::kOk;
    }
    // Raised even after a failed wait, so that the side streams drain instead of waiting forever.
    sys::signal_store(r.go, r.epoch);
    if (!ok) on_wait_failed(p, kStageProducer);
  }

  template <class Cfg>
  static WEFT_ATTN_WALK TileStatus decode(const Params<State>& p, int32_t index, QTile& t) {
    const RingState& r = p.state;
    const Problem& q = p.problem;
    const int32_t group_q_heads = r.group_heads * r.ratio;
    const int32_t per_group = group_q_heads * q.batch * r.m_blocks;
    const int32_t g = index / per_group;
    const int32_t rest = index - g * per_group;
    const int32_t heads_g = imin(r.group_heads, q.kv_heads - g * r.group_heads) * r.ratio;
    const int32_t pairs = heads_g * q.batch;
    const int32_t m_rev = rest / pairs;
    const int32_t pair = rest - m_rev * pairs;
    const int32_t m = q.causal ? r.m_blocks - 1 - m_rev : m_rev;
    t.b = pair / heads_g;
    t.h = g * group_q_heads + (pair - t.b * heads_g);
    t.hk = t.h / r.ratio;
    t.group = g;
    const int32_t piece = m < r.first_blocks ? 0 : 1;
    const int32_t block = piece == 0 ? m : m - r.first_blocks;
    const int32_t offset = (piece == 0 ? 0 : r.piece_len[0]) + block * Cfg::kBlockM;
    t.row = t.b * q.seqlen_q + offset;
    t.rows = r.piece_len[piece] - block * Cfg::kBlockM;
    t.pos = r.piece_pos[piece] + block * Cfg::kBlockM;
    t.lse = int64_t(t.b) * q.lse_batch_stride + int64_t(t.h) * q.lse_head_stride + offset;
    return TileStatus::kOk;
  }

  static WEFT_ATTN_WALK int32_t segments(const Params<State>& p, const QTile&) { return p.state.segments; }

  template <class Cfg>
  static WEFT_ATTN_WALK KvSegment segment(const Params<State>& p, const QTile& t, int32_t i) {
    const RingState& r = p.state;
    KvSegment seg;
    const int32_t s = r.seg_source[i];
    seg.pos = r.seg_pos[i];
    seg.len = r.seg_len[i];
    seg.row = r.seg_stride[i] * t.b + r.seg_base[i];
    if (s == r.rank) {
      seg.source = 0;
      seg.col = t.hk * Cfg::kHeadDim;
      seg.gate = -1;
    } else {
      seg.source = 1;
      seg.row += (t.group % r.slots) * r.slot_rows;
      seg.col = (t.hk - t.group * r.group_heads) * Cfg::kHeadDim;
      seg.gate = t.group * r.world + s;
    }
    return seg;
  }

  static __device__ bool wait_gate(const Params<State>& p, ProducerCache& cache, int32_t gate) {
    if (gate == cache.gate) return true;
    const RingState& r = p.state;
    const bool ok = sys::wait_at_least(r.flags + gate, r.epoch, budget(r)) == sys::WaitResult::kOk;
    // The copy engine wrote the data; TMA (the async proxy) reads it next.
    cta::fence_proxy_async_global();
    cache.gate = gate;
    return ok;
  }

  // Consumer 0's leader, before a tile's first wait: every earlier group's loads have landed.
  static __device__ void tile_started(const Params<State>& p, ConsumerCache& cache, const QTile& t) {
    for (; cache.group < t.group; ++cache.group) sys::device_signal_add(p.state.group_done + cache.group, 1);
  }

  static __device__ void consumers_done(const Params<State>& p, ConsumerCache& cache) {
    for (; cache.group < p.state.groups; ++cache.group) sys::device_signal_add(p.state.group_done + cache.group, 1);
  }

  static __device__ bool before_finish(const Params<State>& p) {
    const RingState& r = p.state;
    if (blockIdx.x != 0) return true;
    bool ok = true;
    for (int32_t s = 0; s < r.world; ++s) {
      if (s == r.rank) continue;
      ok = ok && sys::wait_at_least(r.peer_pulled[s], r.epoch, budget(r)) == sys::WaitResult::kOk;
    }
    return ok;
  }
};

}  // namespace weft::attn
