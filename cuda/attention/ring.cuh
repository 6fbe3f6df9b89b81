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
// the kernel's first mover_ctas CTAs do (move() below; then they compute); either raises
// flags[g * W + s] = epoch after the group's data. The producer waits for that flag (bounded)
// before a block's first load.
//
// Memory: the buffer has `slots` slots, each one kv-head group of every peer's shard; group g uses
// slot g % slots. Tiles come group by group (tile order below), and each CTA that is not a mover
// adds 1 to group_done[g] once its consumers have started a tile of a later group (every load of
// group g's blocks has then landed) or finished; a copy into a slot that held group g waits
// (stream-ordered, cuStreamWaitValue64, or in move()) until group_done[g] reaches epoch x ctas. With
// slots == groups (the caller allowed the memory: an all-gather of K and V) nothing waits.
//
// A mover CTA computes too, but only after all of its copies (kernel.cuh), and it adds nothing to
// group_done: it never reads a slot that a later copy overwrites. Its copy of group g + slots came
// after its own wait saw group_done[g] complete, i.e. after every CTA that is not a mover had
// fetched a tile past group g (or the end); indices only grow (scheduler.cuh), so every tile of
// group g had been handed out before any mover's first fetch, and none of them to a mover.
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
// Tile order: bands of RingState::order_groups kv-head groups one after the other; inside a band,
// query block by query block (under a causal mask the last positions first: a later local block is
// a later global position, in both layouts), then (sequence, head) pairs of the band. The CTAs take
// tiles in that order from the workspace's tile counter (scheduler.cuh; the movers once their copies
// are done), so a band's tiles start as its groups' data lands, and L2 holds the few heads the
// running CTAs share. With bands of one group (the rule wherever slots are reused) each CTA's tiles
// come group by group, which group_done below relies on, and group g's slot is released as early as
// the schedule allows. Wider bands (a causal mask with a slot per group: ring_layout.cpp says why)
// mix their groups' tiles; group_done then still gets its one add per CTA and group, and no copy
// waits for it.
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

  // The CTA mover. Item i = (group i / (W - 1), the (1 + i % (W - 1))-th upstream peer), the copy
  // engines' order. Every mover CTA copies every item, item after item, each a stripe of its rows:
  // for each sequence, CTA c of n takes token rows [shard c / n, shard (c + 1) / n). So group 0,
  // which every compute CTA needs first, lands after item / (n R) instead of item / R (R: one CTA's
  // copy rate; bench/DECISIONS.md, "The CTA mover stripes every group across its CTAs").
  //
  // Memory ordering of an item's flag (flags[g * W + s], read by this rank's producers with
  // ld.acquire.sys, then TMA after a proxy fence: wait_gate):
  //   1. each thread's st.global of its stripe comes before the __syncthreads() that ends the item;
  //   2. thread 0 then arrives on arrivals[g * W + s] with atom.acq_rel.gpu: the release is
  //      cumulative over what the barrier ordered before it, so it carries the CTA's whole stripe;
  //   3. the atomic adds on one word form a release sequence, so the CTA whose add completes the
  //      launch's count (epoch x mover_ctas) acquires every earlier CTA's stripe;
  //   4. that CTA raises the flag with st.release.sys, cumulative over everything it acquired.
  // A producer whose acquire sees the flag therefore sees every CTA's stripe, not only the last
  // CTA's (bench/DECISIONS.md, "The last CTA publishes with one st.release.sys after GPU-scope
  // arrivals": one system-scope release per item, not one per CTA).
  // The counts grow by mover_ctas per launch and are never reset: every mover CTA arrives on every
  // item exactly once per launch, a failed wait included (it copies and arrives anyway, and reports).
  static __device__ bool move(const Params<State>& p) {
    const RingState& r = p.state;
    bool ok = wait_all(r.go, r.epoch, r);  // every peer has entered: their shards are final
    const int32_t peers = r.world - 1;
    const int32_t d = int32_t(p.problem.o_row_stride / p.problem.heads);
    const uint64_t head_bytes = uint64_t(d) * 2;
    const uint64_t row = uint64_t(r.group_heads) * head_bytes;       // a receive row: the group's heads
    const uint64_t pitch = uint64_t(p.problem.kv_heads) * head_bytes;  // a peer's k / v row: every head
    // A group row is cut into blocks of whole heads no wider than the CTA (one block up to 24 heads
    // at D 128, 48 at D 64), so that each thread keeps one column of a block (copy_kv_rows).
    const int32_t head_vectors = d / 8;
    const int32_t block_heads = imax(1, int32_t(blockDim.x) / head_vectors);
    const uint64_t arrived = r.epoch * uint64_t(r.mover_ctas);
    for (int32_t i = 0; i < r.groups * peers; ++i) {
      const int32_t g = i / peers;
      const int32_t src = (r.rank - (1 + i % peers) + r.world) % r.world;
      if (g >= r.slots) ok = wait_all(r.group_done + (g - r.slots), r.epoch * uint64_t(r.ctas), r) && ok;
      const int32_t heads = imin(r.group_heads, p.problem.kv_heads - g * r.group_heads);
      const uint32_t tokens = uint32_t(r.shard[src]);
      const uint32_t lo = uint32_t(uint64_t(tokens) * blockIdx.x / r.mover_ctas);
      const uint32_t hi = uint32_t(uint64_t(tokens) * (blockIdx.x + 1) / r.mover_ctas);
      for (int32_t b = 0; b < p.problem.batch; ++b) {
        const uint64_t from_row = uint64_t(b) * r.peer_kv_rows[src] + lo;
        const uint64_t to_row = uint64_t(g % r.slots) * r.slot_rows + r.source_row[src] + uint64_t(b) * tokens + lo;
        for (int32_t h = 0; h < heads; h += block_heads) {
          const uint64_t from = from_row * pitch + (uint64_t(g) * r.group_heads + h) * head_bytes;
          const uint64_t to = to_row * row + uint64_t(h) * head_bytes;
          copy_kv_rows(r.peer_k[src] + from, r.peer_v[src] + from, pitch, r.recv_k + to, r.recv_v + to, row,
                       uint32_t(imin(block_heads, heads - h) * head_vectors), hi - lo);
        }
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        const int64_t item = int64_t(g) * r.world + src;
        if (sys::device_signal_fetch_add(r.arrivals + item, 1) + 1 == arrived) sys::signal_store(r.flags + item, r.epoch);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // The last mover CTA of this launch: every peer's shard has been read, so the peers may finish.
      const uint64_t done = sys::device_signal_fetch_add(r.movers_done, 1) + 1;
      if (done == arrived) {
        for (int32_t s = 0; s < r.world; ++s) {
          if (s != r.rank) sys::signal_store(r.pulled + s, r.epoch);
        }
      }
    }
    return ok;
  }

  // One CTA's part of a 2-D copy of K and V: `rows` rows of `width` 16-byte vectors (width <= the
  // CTA's threads), source rows `from_pitch` bytes apart, destination rows `to_pitch` apart, the
  // pointers at the first row's first vector. Each thread keeps one column and steps its rows by
  // blockDim / width rows, so a vector costs a load, a store and two 64-bit adds: the only divisions
  // are the few below, once per call (an integer divide is a ~20-instruction sequence: at ~60
  // instructions a vector, issue alone would cap an SM near 128 / 60 x 16 B x 1.8 GHz = 60 GB/s).
  //
  // kInFlight rows of K and of V per thread are loaded before the first store: 2 x 8 x 16 B x 384
  // threads = 96 KiB in flight per CTA, so at ~1 us a load a CTA can move ~90 GB/s; the 64 data
  // registers fit the mover's 168 (the kernel's budget before setmaxnreg).
  static __device__ __forceinline__ void copy_kv_rows(const char* from_k, const char* from_v, uint64_t from_pitch,
                                                      char* to_k, char* to_v, uint64_t to_pitch, uint32_t width,
                                                      uint32_t rows) {
    constexpr uint32_t kInFlight = 8;
    const uint32_t per_pass = blockDim.x / width;
    const uint32_t first = threadIdx.x / width;
    if (first >= per_pass || first >= rows) return;  // threads past the last whole row of a pass idle
    const uint32_t column = threadIdx.x - first * width;
    uint32_t left = (rows - first + per_pass - 1) / per_pass;  // this thread's rows
    from_k += first * from_pitch + column * 16;
    from_v += first * from_pitch + column * 16;
    to_k += first * to_pitch + column * 16;
    to_v += first * to_pitch + column * 16;
    const uint64_t from_step = uint64_t(per_pass) * from_pitch, to_step = uint64_t(per_pass) * to_pitch;
    // All kInFlight rows (whole) or the first `left` of them (the tail): the same code, predicated.
    const auto pass = [&](bool whole) {
      uint4 kv[2 * kInFlight];
#pragma unroll
      for (uint32_t j = 0; j < kInFlight; ++j) {
        if (whole || j < left) {
          kv[2 * j] = coll::mem::ld16(from_k);
          kv[2 * j + 1] = coll::mem::ld16(from_v);
          from_k += from_step;
          from_v += from_step;
        }
      }
#pragma unroll
      for (uint32_t j = 0; j < kInFlight; ++j) {
        if (whole || j < left) {
          coll::mem::st16(to_k, kv[2 * j]);
          coll::mem::st16(to_v, kv[2 * j + 1]);
          to_k += to_step;
          to_v += to_step;
        }
      }
    };
    for (; left >= kInFlight; left -= kInFlight) pass(true);
    if (left > 0) pass(false);
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
    // A band: order_groups groups' kv heads (fewer in the last band), and their query heads.
    const int32_t band_kv_heads = r.order_groups * r.group_heads;
    const int32_t per_band = band_kv_heads * r.ratio * q.batch * r.m_blocks;
    const int32_t band = index / per_band;
    const int32_t rest = index - band * per_band;
    const int32_t heads_b = imin(band_kv_heads, q.kv_heads - band * band_kv_heads) * r.ratio;
    const int32_t pairs = heads_b * q.batch;
    const int32_t m_rev = rest / pairs;
    const int32_t pair = rest - m_rev * pairs;
    const int32_t m = q.causal ? r.m_blocks - 1 - m_rev : m_rev;
    t.b = pair / heads_b;
    t.h = band * band_kv_heads * r.ratio + (pair - t.b * heads_b);
    t.hk = t.h / r.ratio;
    t.group = t.hk / r.group_heads;
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

  // Consumer 0's leader, before a tile's first wait: every earlier group's loads have landed. Mover
  // CTAs count nothing (the Memory note above says why they need not; group_done counts ctas CTAs).
  static __device__ void tile_started(const Params<State>& p, ConsumerCache& cache, const QTile& t) {
    if (is_mover(p)) return;
    for (; cache.group < t.group; ++cache.group) sys::device_signal_add(p.state.group_done + cache.group, 1);
  }

  static __device__ void consumers_done(const Params<State>& p, ConsumerCache& cache) {
    if (is_mover(p)) return;
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
