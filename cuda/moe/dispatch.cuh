// dispatch.cuh — the steps of a MoE dispatch (moe.h lists them) as device functions that every
// thread of every CTA of a kernel runs, whatever the CTA's width (blockDim.x, a multiple of 32):
// the dispatch kernel (dispatch.cu, 512 threads) and the dispatch followed by the up-projection in
// the same kernel (dispatch_gemm.cu, the GEMM engine's 384).
//
// Work split: CTA c owns tokens [c * per_cta, (c + 1) * per_cta) and their items (token, k slot), in
// item order. Its position of item i among this rank's items of expert e (what fixes the row at the
// owner) is base[e] (items of e in CTAs before c) + the items of e before i in c's own slice, so the
// layout is the same as a serial stable counting sort by expert, whatever the grid size.
//
// Shared memory (dispatch_smem_bytes): peers[W], owner_total[W], then per expert hist, base, run,
// pc, tot, eoff, dst (int32 [E] each), then per item of a piece rank, item_e, sorted_item, sorted_e,
// sorted_row (int32 [kPiece] each): ~45 KiB at E = 1024.
#pragma once

#include <cuda_runtime.h>

#include "moe/moe.h"
#include "moe/peer.cuh"
#include "moe/route.cuh"

namespace weft::moe::steps {


struct Shared {
  char** peers;
  int* owner_total;
  int *hist, *base, *run, *pc, *tot, *eoff, *dst;
  int *rank, *item_e, *sorted_item, *sorted_e, *sorted_row;
  Failures* fail;
  uint64_t* epoch;
  int* scalars;  // [0] bad item of this rank (-1: none), [1] its id, [2] overflowing owner needs rows
};

__device__ inline Shared carve(unsigned char* smem, int experts, int world) {
  Shared s;
  auto take = [&](size_t bytes) {
    unsigned char* p = smem;
    smem += (bytes + 15) / 16 * 16;
    return p;
  };
  s.peers = reinterpret_cast<char**>(take(size_t(world) * 8));
  s.epoch = reinterpret_cast<uint64_t*>(take(8));
  s.fail = reinterpret_cast<Failures*>(take(sizeof(Failures)));
  s.scalars = reinterpret_cast<int*>(take(4 * 4));
  s.owner_total = reinterpret_cast<int*>(take(size_t(world) * 4));
  int** per_expert[] = {&s.hist, &s.base, &s.run, &s.pc, &s.tot, &s.eoff, &s.dst};
  for (int** a : per_expert) *a = reinterpret_cast<int*>(take(size_t(experts) * 4));
  int** per_item[] = {&s.rank, &s.item_e, &s.sorted_item, &s.sorted_e, &s.sorted_row};
  for (int** a : per_item) *a = reinterpret_cast<int*>(take(size_t(kPiece) * 4));
  return s;
}

__device__ __forceinline__ int pad_rows(int n) { return (n + kBlockRows - 1) / kBlockRows * kBlockRows; }

template <class T>
__device__ __forceinline__ T* at(char* base, uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

// Grid barrier on a word (workspace offset `word_at`) that grows by gridDim.x per launch: launch
// `epoch` waits for epoch * G. Every CTA arrives, whatever its own failures, so the count stays G per
// launch and the next launch's target holds.
__device__ inline void cta_grid_barrier(const DispatchArgs& a, const Shared& s, uint64_t word_at, uint64_t epoch) {
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t* word = at<uint64_t>(s.peers[a.peer.rank], word_at);
    asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(word) : "memory");
    const uint64_t target = epoch * gridDim.x;
    const uint64_t start = sys::globaltimer_ns();
    for (uint32_t spins = 0;; ++spins) {
      uint64_t v;
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory");
      if (v >= target) break;
      // Only this kernel's own CTAs feed it (all resident: one per SM, within the rank's SM budget).
      if ((spins & 63) == 63 && sys::globaltimer_ns() - start > a.peer.timeout_ns) {
        record(s.fail, WEFT_MOE_FAIL_TIMEOUT, WEFT_MOE_STAGE_BARRIER, 0, a.peer.rank);
        break;
      }
    }
  }
  __syncthreads();
}

// Steps 1-2: route (optionally) and count this CTA's items; hist row [E] then its first bad item.
__device__ inline void count_items(const DispatchArgs& a, const Shared& s, int64_t t0, int64_t t1) {
  const int E = a.experts;
  for (int e = threadIdx.x; e < E; e += blockDim.x) s.hist[e] = 0;
  if (threadIdx.x == 0) s.scalars[0] = 0x7fffffff;
  if (a.route) {
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int64_t t = t0 + warp; t < t1; t += warps)
      warp::route_token(a.logits, a.logits_dtype, t, E, a.topk, a.normalize != 0, a.ids, a.weights);
  }
  __syncthreads();  // the ids this CTA routed are visible to all of its threads
  for (int64_t i = t0 * a.topk + threadIdx.x; i < t1 * a.topk; i += blockDim.x) {
    const int e = a.ids[i];
    if (e < 0 || e >= E) atomicMin(&s.scalars[0], int(i));
    else atomicAdd(&s.hist[e], 1);
  }
  __syncthreads();
  int* row = at<int>(s.peers[a.peer.rank], a.layout.hist) + uint64_t(blockIdx.x) * (E + 1);
  for (int e = threadIdx.x; e < E; e += blockDim.x) row[e] = s.hist[e];
  if (threadIdx.x == 0) row[E] = s.scalars[0];
}

// sums[e] = the sum of hist[c][e] over the CTAs c < rows, and *bad = the least hist[c][E] (0x7fffffff:
// none), by every thread of the CTA: one load per (CTA, expert) pair into shared atomics, so the
// latency is a few L2 round trips, not `rows` serial ones per expert (132 of them at 132 CTAs).
__device__ inline void sum_hist_rows(const int* hist, int E, int rows, int* sums, int* bad) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) sums[e] = 0;
  if (threadIdx.x == 0) *bad = 0x7fffffff;
  __syncthreads();
  const int per_row = E + 1;
  for (int i = threadIdx.x; i < rows * per_row; i += blockDim.x) {
    const int c = i / per_row, e = i - c * per_row;
    const int v = mem::ld_cg(hist + uint64_t(c) * per_row + e);
    if (e < E) {
      if (v != 0) atomicAdd(&sums[e], v);
    } else if (v != 0x7fffffff) {
      atomicMin(bad, v);
    }
  }
  __syncthreads();
}

// Step 3: CTAs c < W send this rank's counts and descriptor to ranks c, c + G, ...
__device__ inline void publish_counts(const DispatchArgs& a, const Shared& s, uint64_t epoch) {
  if (int(blockIdx.x) >= a.peer.world) return;
  const int E = a.experts, G = gridDim.x;
  const int* hist = at<int>(s.peers[a.peer.rank], a.layout.hist);
  // The rank's totals: hist rows of all G CTAs, E + 1 words each (the last: its first bad item).
  // This CTA's own row is in global memory already, so its shared copy is reused as the sums.
  sum_hist_rows(hist, E, G, s.hist, &s.scalars[0]);
  if (threadIdx.x == 0) {
    const int bad = s.scalars[0];
    s.scalars[0] = bad == 0x7fffffff ? -1 : bad;
    s.scalars[1] = bad == 0x7fffffff ? 0 : a.ids[bad];
  }
  __syncthreads();
  const int parity = int(epoch & 1);
  Desc d{};
  d.experts = uint32_t(E);
  d.topk = uint32_t(a.topk);
  d.hidden = uint32_t(a.hidden);
  d.world = uint32_t(a.peer.world);
  d.capacity_blocks = uint32_t(a.capacity / kBlockRows);
  d.max_tokens = uint32_t(a.max_tokens);
  d.tokens = uint32_t(a.tokens);
  d.status = s.scalars[0] >= 0 ? WEFT_MOE_FAIL_BAD_EXPERT : 0;
  d.bad_item = uint32_t(s.scalars[0]);
  d.bad_value = uint32_t(s.scalars[1]);
  for (int q = blockIdx.x; q < a.peer.world; q += G) {
    int* counts = at<int>(s.peers[q], a.layout.counts) + (uint64_t(parity) * a.peer.world + a.peer.rank) * kMaxExperts;
    for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = s.hist[e];
    __syncthreads();  // every thread's counts stores come before thread 0's release below
    if (threadIdx.x == 0) {
      Desc* slot = at<Desc>(s.peers[q], a.layout.desc) + parity * a.peer.world + a.peer.rank;
      const uint4* src = reinterpret_cast<const uint4*>(&d);
      uint4* dst = reinterpret_cast<uint4*>(slot);
      sys::store_volatile16(dst + 0, src[0]);
      sys::store_volatile16(dst + 1, src[1]);
      sys::store_volatile16(dst + 2, src[2]);
      sys::signal_store(&slot->epoch, epoch);  // release: cumulative over the counts and the payload
    }
  }
}

// The first field in which a peer's descriptor differs from this rank's plan (WeftMoeField), or 0.
__device__ inline int differs(const DispatchArgs& a, const Desc& t, uint64_t their_epoch, uint64_t epoch) {
  if (their_epoch != epoch) return WEFT_MOE_FIELD_EPOCH;
  if (t.world != uint32_t(a.peer.world)) return WEFT_MOE_FIELD_WORLD;
  if (t.experts != uint32_t(a.experts)) return WEFT_MOE_FIELD_EXPERTS;
  if (t.topk != uint32_t(a.topk)) return WEFT_MOE_FIELD_TOPK;
  if (t.hidden != uint32_t(a.hidden)) return WEFT_MOE_FIELD_HIDDEN;
  if (t.capacity_blocks != uint32_t(a.capacity / kBlockRows)) return WEFT_MOE_FIELD_CAPACITY;
  if (t.max_tokens != uint32_t(a.max_tokens)) return WEFT_MOE_FIELD_MAX_TOKENS;
  return 0;
}

// Step 4a: wait for every rank's descriptor of this launch and check it.
__device__ inline void await_descriptors(const DispatchArgs& a, const Shared& s, uint64_t epoch) {
  const int parity = int(epoch & 1);
  const uint64_t* abort_word = at<uint64_t>(s.peers[a.peer.rank], a.layout.abort);
  for (int q = threadIdx.x; q < a.peer.world; q += blockDim.x) {
    const Desc* slot = at<Desc>(s.peers[a.peer.rank], a.layout.desc) + parity * a.peer.world + q;
    const Waited w = wait_at_least(&slot->epoch, epoch, abort_word, epoch, a.peer);
    if (w != Waited::kOk) {
      wait_failed(s.fail, w, WEFT_MOE_STAGE_ENTRY, q, a.peer);
      continue;
    }
    // Acquired the epoch word: the payload and counts the same peer thread released are visible.
    const uint64_t their_epoch = sys::signal_load(&slot->epoch);
    Desc t;
    uint4* raw = reinterpret_cast<uint4*>(&t);
    raw[0] = sys::load_volatile16(reinterpret_cast<const uint4*>(slot) + 0);
    raw[1] = sys::load_volatile16(reinterpret_cast<const uint4*>(slot) + 1);
    raw[2] = sys::load_volatile16(reinterpret_cast<const uint4*>(slot) + 2);
    const int field = differs(a, t, their_epoch, epoch);
    if (field != 0) record(s.fail, WEFT_MOE_FAIL_MISMATCH, WEFT_MOE_STAGE_LAYOUT, field, q);
    else if (t.status != 0) record(s.fail, q == a.peer.rank ? WEFT_MOE_FAIL_BAD_EXPERT : WEFT_MOE_FAIL_PEER_BAD_EXPERT,
                                   WEFT_MOE_STAGE_LAYOUT, 0, q);
  }
  __syncthreads();
}

// Step 4b: every owner's layout from the W x E counts (the same on every rank), and this rank's
// destination row base per expert: dst[e] = eoff[e] + the rows of expert e from the sources that
// come before this rank in e's owner's source order (o, o - 1, o - 2, ...).
__device__ inline void compute_layout(const DispatchArgs& a, const Shared& s, uint64_t epoch) {
  const int E = a.experts, W = a.peer.world, El = a.local_experts, me = a.peer.rank;
  const int* counts = at<int>(s.peers[me], a.layout.counts) + uint64_t(epoch & 1) * W * kMaxExperts;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int o = e / El;
    const int my_pos = (o - me + W) % W;
    int total = 0, before = 0;
    for (int q = 0; q < W; ++q) {
      const int v = mem::ld_cg(counts + uint64_t(q) * kMaxExperts + e);
      total += v;
      if ((o - q + W) % W < my_pos) before += v;
    }
    s.tot[e] = total;
    s.dst[e] = before;
  }
  __syncthreads();
  // Exclusive scan of the padded counts within each owner's experts: a warp per owner.
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int o = warp; o < W; o += warps) {
    int carry = 0;
    for (int le0 = 0; le0 < El; le0 += 32) {
      const int le = le0 + lane;
      const int v = le < El ? pad_rows(s.tot[o * El + le]) : 0;
      int x = v;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, off);
        if (lane >= off) x += y;
      }
      if (le < El) s.eoff[o * El + le] = carry + x - v;
      carry += __shfl_sync(0xffffffffu, x, 31);
    }
    if (lane == 0) s.owner_total[o] = carry;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) s.dst[e] += s.eoff[e];
  if (threadIdx.x == 0 && s.fail->code == 0) {
    for (int o = 0; o < W; ++o) {
      if (int64_t(s.owner_total[o]) > a.capacity) {
        record(s.fail, WEFT_MOE_FAIL_CAPACITY, WEFT_MOE_STAGE_LAYOUT, 0, o);
        s.scalars[2] = s.owner_total[o];
        break;
      }
    }
  }
  __syncthreads();
}

// Every block of this rank's receive buffer gets 128 from this launch in total: the owner credits
// padding rows and unused blocks (all blocks, when the launch failed alike on every rank and no row
// moves), the senders add their real rows.
__device__ inline void credit_blocks(const DispatchArgs& a, const Shared& s, bool everything) {
  char* me = s.peers[a.peer.rank];
  uint64_t* arrivals = at<uint64_t>(me, a.layout.arrivals);
  const int blocks = int(a.capacity / kBlockRows);
  const int first_unused = everything ? 0 : s.owner_total[a.peer.rank] / kBlockRows;
  for (int b = first_unused + blockIdx.x * blockDim.x + threadIdx.x; b < blocks; b += gridDim.x * blockDim.x)
    mem::red_relaxed_add(arrivals + b, kBlockRows);
  if (everything) return;
  // Each own expert's last block: its padding rows. And the padding rows' row_source (-1s).
  const int El = a.local_experts;
  int4* row_source = at<int4>(me, a.layout.row_source);
  for (int le = blockIdx.x; le < El; le += gridDim.x) {
    const int e = a.peer.rank * El + le;
    const int count = s.tot[e], first = s.eoff[e] + count, end = s.eoff[e] + pad_rows(count);
    if (threadIdx.x == 0 && first < end) mem::red_relaxed_add(arrivals + (end / kBlockRows - 1), uint64_t(end - first));
    for (int r = first + threadIdx.x; r < end; r += blockDim.x) row_source[r] = make_int4(-1, -1, -1, 0);
  }
}

__device__ inline void write_layout(const DispatchArgs& a, const Shared& s, uint64_t epoch) {
  char* me = s.peers[a.peer.rank];
  const int El = a.local_experts, W = a.peer.world, e0 = a.peer.rank * El;
  int* offsets = at<int>(me, a.layout.expert_offsets);
  int* expert_counts = at<int>(me, a.layout.expert_counts);
  int* source_counts = at<int>(me, a.layout.source_counts);
  const int* counts = at<int>(me, a.layout.counts) + uint64_t(epoch & 1) * W * kMaxExperts;
  for (int le = threadIdx.x; le < El; le += blockDim.x) {
    offsets[le] = s.eoff[e0 + le];
    expert_counts[le] = s.tot[e0 + le];
  }
  if (threadIdx.x == 0) offsets[El] = s.owner_total[a.peer.rank];
  for (int i = threadIdx.x; i < W * El; i += blockDim.x)
    source_counts[i] = mem::ld_cg(counts + uint64_t(i / El) * kMaxExperts + e0 + i % El);
}

// This rank's layout outputs, then the status the combine (and a fused GEMM's CTAs) check, released
// after them at device scope (CTA 0).
__device__ inline void write_outputs(const DispatchArgs& a, const Shared& s, uint64_t epoch, int code) {
  char* me = s.peers[a.peer.rank];
  if (code == 0) write_layout(a, s, epoch);
  __syncthreads();  // every thread's layout stores come before thread 0's release
  if (threadIdx.x == 0) sys::device_signal_store(at<uint64_t>(me, a.layout.status), (epoch << 8) | uint64_t(code));
}

// A warp's chunk of push_piece: slots [c0, c0 + cnt), cnt <= 32: the rows copied by the whole warp
// (`copy`: false for a chunk of pulled rows, a.pull_local's own ones, which the owner's GEMM reads
// from x), lane i's row_source word for slot c0 + i, then one arrival per block.
__device__ inline void push_chunk(const DispatchArgs& a, const Shared& s, int c0, int cnt, uint32_t row_bytes,
                                  bool copy) {
  const int El = a.local_experts, me = a.peer.rank, lane = threadIdx.x & 31;
  for (int i = 0; copy && i < cnt; ++i) {
    const int slot = c0 + i;
    const int item = s.sorted_item[slot], e = s.sorted_e[slot], row = s.sorted_row[slot];
    warp_copy_row(reinterpret_cast<const char*>(a.x) + uint64_t(item / a.topk) * row_bytes,
                  s.peers[e / El] + a.layout.recv + uint64_t(row) * row_bytes, row_bytes);
  }
  if (lane < cnt) {
    const int item = s.sorted_item[c0 + lane], e = s.sorted_e[c0 + lane], row = s.sorted_row[c0 + lane];
    const int t = item / a.topk;
    const int4 src = make_int4(me, t, item - t * a.topk, 0);
    mem::st16(s.peers[e / El] + a.layout.row_source + uint64_t(row) * 16, *reinterpret_cast<const uint4*>(&src));
    // World 1: the item's row, for a GEMM + combine that reduces the rows where its GEMM left them.
    if (a.peer.world == 1) at<int32_t>(s.peers[me], a.layout.positions)[item] = row;
  }
  __syncwarp();  // every lane's row stores come before the releases below
  const bool valid = lane < cnt;
  uint64_t key = 0;
  uint64_t* counter = nullptr;
  if (valid) {
    const int e = s.sorted_e[c0 + lane], row = s.sorted_row[c0 + lane];
    const int o = e / El;
    key = (uint64_t(o) << 32) | uint32_t(row / kBlockRows);
    counter = at<uint64_t>(s.peers[o], a.layout.arrivals) + row / kBlockRows;
  }
  warp_arrive(counter, key, valid, a.peer.world == 1);
}

// Step 5: rank, sort and push the items [p0, p1) of this CTA's slice (one piece).
__device__ inline void push_piece(const DispatchArgs& a, const Shared& s, int64_t p0, int64_t p1) {
  const int E = a.experts, El = a.local_experts, me = a.peer.rank;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int n = int(p1 - p0);
  // The piece's expert ids into shared memory first, by every thread: warp 0's rounds below are
  // serial, and a load of ids in each of them put a global round trip behind every 32 items (the
  // ranking took 4.4 us per CTA at config A's 248 items, 7.4 us at B's 496).
  for (int i = threadIdx.x; i < n; i += blockDim.x) s.item_e[i] = a.ids[p0 + i];
  __syncthreads();
  // Pass A, warp 0 in item order: each item's rank among the piece's items of its expert.
  if (warp == 0) {
    for (int i0 = 0; i0 < n; i0 += 32) {
      const int i = i0 + lane;
      const bool valid = i < n;
      const int e = valid ? s.item_e[i] : -1 - lane;  // distinct keys for the idle lanes
      const uint32_t same = __match_any_sync(0xffffffffu, e);
      const int leader = __ffs(same) - 1;
      int first = 0;
      if (valid && lane == leader) {
        first = s.pc[e];
        s.pc[e] = first + __popc(same);
      }
      first = __shfl_sync(0xffffffffu, first, leader);
      if (valid) s.rank[i] = first + __popc(same & ((1u << lane) - 1));
      __syncwarp();  // pc[] written by this round's leaders is read by the next round's
    }
    // Slots of the piece by destination: experts in push order (this rank's first, then rank + 1's,
    // ...), each expert's items in position order. Exclusive scan of pc in that order, into hist.
    int carry = 0;
    for (int r0 = 0; r0 < E; r0 += 32) {
      const int r = r0 + lane;
      const int e = (me * El + r) % E;
      const int v = r < E ? s.pc[e] : 0;
      int x = v;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, off);
        if (lane >= off) x += y;
      }
      if (r < E) s.hist[e] = carry + x - v;
      carry += __shfl_sync(0xffffffffu, x, 31);
    }
  }
  __syncthreads();
  // Pass B: each item's slot and destination row.
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int e = s.item_e[i];
    const int slot = s.hist[e] + s.rank[i];
    s.sorted_item[slot] = int(p0) + i;
    s.sorted_e[slot] = e;
    s.sorted_row[slot] = s.dst[e] + s.base[e] + s.run[e] + s.rank[i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    s.run[e] += s.pc[e];
    s.pc[e] = 0;
  }
  // Pushes: warp chunks of rows_per_signal consecutive slots (consecutive destination rows, mostly).
  // The slots of this rank's own experts come first (push order); when they are pulled, no bytes
  // move and a chunk is only row_source words and an arrival, so it takes 32 rows per release (the
  // lanes of one warp_arrive): at rows_per_signal (2-8 rows at H 7168-2048) a release fenced every
  // few hundred nanoseconds of work.
  const uint32_t row_bytes = uint32_t(a.hidden) * 2;
  const int own_n = a.peer.world == 1 ? n : s.hist[((me + 1) * El) % E];
  const int R = a.rows_per_signal, own_R = a.pull_local ? 32 : R;
  for (int c0 = warp * own_R; c0 < own_n; c0 += warps * own_R)
    push_chunk(a, s, c0, min(own_R, own_n - c0), row_bytes, !a.pull_local);
  for (int c0 = own_n + warp * R; c0 < n; c0 += warps * R) push_chunk(a, s, c0, min(R, n - c0), row_bytes, true);
  __syncthreads();  // the piece's arrays are rewritten by the next piece
}

// Step 6: this CTA's share of the rank's used blocks, each waited for until it holds 128 x epoch.
__device__ inline void await_rows(const DispatchArgs& a, const Shared& s, uint64_t epoch) {
  char* me = s.peers[a.peer.rank];
  const uint64_t* arrivals = at<uint64_t>(me, a.layout.arrivals);
  const uint64_t* abort_word = at<uint64_t>(me, a.layout.abort);
  const int used = s.owner_total[a.peer.rank] / kBlockRows;
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < used; b += gridDim.x * blockDim.x) {
    const Waited w = wait_at_least(arrivals + b, epoch * kBlockRows, abort_word, epoch, a.peer);
    if (w != Waited::kOk) {
      wait_failed(s.fail, w, WEFT_MOE_STAGE_ARRIVALS, 0xffff, a.peer);
      break;
    }
  }
  __syncthreads();
}

// Steps 1-5 by every thread of every CTA: returns whether this CTA's layout is valid and its rows
// are pushed (or, pulled, announced); a failure is recorded in s.fail, the launch's epoch is in
// *s.epoch either way. The caller then waits for the rows (step 6) or hands them to its GEMM.
__device__ inline bool run_steps(const DispatchArgs& a, const Shared& s) {
  const int E = a.experts;
  if (threadIdx.x == 0) {
    *s.fail = Failures{0, 0, 0, 0};
    s.scalars[2] = 0;
  }
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    s.run[e] = 0;
    s.pc[e] = 0;
  }
  cta_peers(a.peer, s.peers);
  char* me = s.peers[a.peer.rank];
  // The launch count written by the previous launch's CTA 0 (stream order: its kernel is over).
  if (threadIdx.x == 0) *s.epoch = *at<const uint64_t>(me, a.layout.epoch) + 1;
  const int64_t per_cta = (a.tokens + gridDim.x - 1) / gridDim.x;
  const int64_t t0 = min(a.tokens, int64_t(blockIdx.x) * per_cta), t1 = min(a.tokens, t0 + per_cta);
  count_items(a, s, t0, t1);
  const uint64_t epoch = *s.epoch;
  cta_grid_barrier(a, s, a.layout.barrier, epoch);
  // Every CTA has read the launch count: the next launch's may be published.
  if (blockIdx.x == 0 && threadIdx.x == 0) *at<uint64_t>(me, a.layout.epoch) = epoch;
  // A CTA whose barrier wait ran out does not know that the histograms are complete: it sends
  // nothing, and the peers time out on its counts.
  if (s.fail->code == 0) publish_counts(a, s, epoch);
  // This CTA's base positions (the items of each expert in the CTAs before it), while the peers'
  // counts are on their way. scalars[3] takes the bad-item minimum, which is not needed here.
  sum_hist_rows(at<int>(me, a.layout.hist), E, int(blockIdx.x), s.base, &s.scalars[3]);
  await_descriptors(a, s, epoch);
  const bool entered = s.fail->code == 0;
  if (entered) compute_layout(a, s, epoch);
  const int code = s.fail->code;
  if (code == WEFT_MOE_FAIL_TIMEOUT && threadIdx.x == 0) raise_abort(s.peers, a.peer.world, a.layout.abort, epoch);
  // A failure every rank sees alike (mismatch, bad id, capacity) moves nothing anywhere; this rank
  // then credits all of its blocks, so the arrival counters stay at 128 x launches.
  credit_blocks(a, s, code != 0);
  if (blockIdx.x == 0) write_outputs(a, s, epoch, code);
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.peer.report != nullptr && code != 0) {
    a.peer.report[0] = epoch;
    if (code == WEFT_MOE_FAIL_CAPACITY) {
      a.peer.report[1] = uint64_t(s.scalars[2]);
      a.peer.report[2] = uint64_t(a.capacity);
    } else if (code == WEFT_MOE_FAIL_BAD_EXPERT) {
      a.peer.report[1] = uint64_t(s.scalars[0]);
      a.peer.report[2] = uint64_t(uint32_t(s.scalars[1]));
    }
  }
  if (code != 0) return false;
  const int64_t i0 = t0 * a.topk, i1 = t1 * a.topk;
  for (int64_t p0 = i0; p0 < i1; p0 += kPiece) push_piece(a, s, p0, min(i1, p0 + kPiece));
  return true;
}

}  // namespace weft::moe::steps
