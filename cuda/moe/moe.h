// moe.h — the host-side face of the MoE kernels (cuda/moe/*.cu), included by ffi/src/moe (plain
// C++, no device code): the workspace layouts, the kernels' argument packs and their launchers.
//
// Dispatch, on rank s of W, one persistent kernel of G CTAs per launch (dispatch.cu):
//   1. (WEFT_MOE_ROUTE) each CTA routes its own slice of tokens (route.cuh);
//   2. each CTA counts its slice's items (token, k slot) per expert: hist[cta][E];
//   3. grid barrier; CTAs c < W sum the histograms and write this rank's counts row and descriptor
//      into rank c's workspace (counts[parity][s], desc[parity][s]; the descriptor's epoch word last,
//      st.release.sys);
//   4. every CTA waits for every rank's descriptor, checks that the plans agree (geometry, no bad
//      ids) and computes every owner's receive layout from the W x E counts (all ranks compute the
//      same, so a capacity overflow or a bad id fails every rank alike, before anything moves);
//   5. each CTA sorts its slice's items by destination (owner s first, then s + 1, ...; expert;
//      position) and pushes the rows: a warp copies up to `rows_per_signal` rows with 16-byte
//      stores into the owners' recv, then raises the owners' per-block arrival counters by the rows
//      it landed (red.release.sys after __syncwarp: the release is cumulative over the warp's stores);
//      the owner's own CTAs credit each block's padding rows;
//   6. every CTA waits for a share of this rank's used blocks to reach 128 x epoch, then the
//      kernel completes: the receive buffer is whole for whatever runs next on the stream.
//
// Receive layout on owner o: local expert le's rows start at expert_offsets[le] (multiple of 128)
// and are, in order, the rows from source o, o - 1, o - 2, ... (mod W), each source's rows in
// (token, k slot) order; pad128(count) rows per expert. Source s pushes to owners s, s + 1, ... in
// that order, so at step d every owner receives from source o - d, and owner o's blocks fill in
// source order: its own rows (local stores) first. A grouped GEMM tile (expert, 128-row block)
// waits for arrivals[block] >= 128 x epoch, the block's real rows having landed and its padding
// credited (dispatch_gemm.cu: the fused up-projection's producer polls that word before the tile's
// loads; grouped.cuh is the grouped GEMM on the engine's hooks).
//
// Epochs: each plan keeps its launch count in its own workspace (`epoch` word); every CTA reads it
// at its start, CTA 0 stores epoch + 1 after the grid barrier (every CTA has read it by then), so a
// replayed CUDA graph advances it like a host launch. Nothing is ever reset:
//   - descriptors and counts are double-buffered by epoch parity: rank s writes slot e % 2 of rank p
//     in launch e only after it saw p's descriptor of launch e - 1, which p wrote after it had read
//     its slot e % 2 of launch e - 2 (every rank reads all descriptors before it writes the next);
//   - arrivals[b] grows by exactly 128 per launch (real rows from the senders + the owner's padding
//     credit, or 128 from the owner alone when the launch failed alike everywhere), so launch e
//     waits for >= 128 e and cannot be fooled by launch e - 1's rows, nor by e + 1's (a sender
//     pushes into o only after it saw o's descriptor of that launch);
//   - the grid barrier words grow by G per launch; the combine's ready words take the epoch and its
//     returned-row counters grow by exactly tokens_in_block x topk per launch.
// recv and row_source are single-buffered: a sender writes them in launch e only after it saw the
// owner's descriptor of launch e, which the owner writes only after everything before that launch
// on its stream (the GEMMs that read recv of e - 1, the combine that read row_source) is done.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "weft.h"

namespace weft::moe {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBlockRows = WEFT_MOE_BLOCK_ROWS;
constexpr int kMaxExperts = WEFT_MOE_MAX_EXPERTS;
constexpr int kMaxCtas = 256;
// Items (token, k slot) one CTA ranks and sorts in shared memory per pass.
constexpr int kPiece = 1024;
// Tokens per returned-row arrival counter of the combine.
constexpr int kTokenBlock = 16;
// A warp raises the arrival counters after about this many bytes of rows: one release (a system
// fence, ~1-2 us on Hopper: bench/repro/fence-cost.cu) per 32 KiB keeps the fence under a fifth of
// the copy time even at the ~25 GB/s of one warp's NVLink stores, and the other 15 warps of the CTA
// keep storing while one waits.
constexpr uint64_t kSignalBytes = 32 << 10;

inline int rows_per_signal(int hidden) {
  const uint64_t row = uint64_t(hidden) * 2;
  const uint64_t r = kSignalBytes / row;
  return int(r < 1 ? 1 : r > 32 ? 32 : r);
}

inline uint64_t align_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

// Consecutive workspace regions, each starting on a 256-byte boundary.
struct Regions {
  uint64_t at = 0;
  uint64_t take(uint64_t bytes) {
    const uint64_t here = at;
    at = align_up(at + bytes, 256);
    return here;
  }
};

// The descriptor rank q writes into slot desc[parity][q] of every rank before any row moves; the
// reader compares it with its own plan. `epoch` (the last word) is written last, st.release.sys.
struct alignas(64) Desc {
  uint32_t experts, topk, hidden, world;
  uint32_t capacity_blocks, max_tokens, tokens, status;  // status: 0, or WEFT_MOE_FAIL_BAD_EXPERT
  uint32_t bad_item, bad_value, reserved0, reserved1;
  uint32_t reserved2, reserved3;
  uint64_t epoch;
};
static_assert(sizeof(Desc) == 64, "Desc is one 64-byte line: 3 vector stores + the epoch");

// Byte offsets in a dispatch plan's workspace. The regions peers write come first and their offsets
// depend only on what the descriptors check (world, capacity, hidden; counts rows are
// kMaxExperts long, so a mismatched E cannot push a peer's counts past its row). Local regions
// (written by this rank only) follow.
//   abort       u64                        highest epoch at which some rank gave up (peers stop waiting)
//   desc        Desc[2][W]                 [parity][source]
//   counts      int32[2][W][kMaxExperts]   [parity][source][expert]: rows the source routes to each expert
//   arrivals    u64[capacity / 128]        per receive block: landed rows + padding credit
//   row_source  int32[capacity][4]         source rank, token, k slot, 0 (-1s on padding rows)
//   recv        bf16[capacity][hidden]
//   epoch       u64                        this plan's launches so far
//   barrier     u64                        grid barrier: G per launch
//   pushed      u64                        a world-1 dispatch + GEMM's second grid barrier, after the
//                                          pushes: G per launch (dispatch_gemm.cu)
//   status      u64                        the latest launch's layout: epoch << 8 | WeftMoeFailure (0 ok)
//   hist        int32[kMaxCtas][E + 1]     per CTA: rows per expert of its slice, then its first bad item
//   source_counts  int32[W][E / W]
//   expert_offsets int32[E / W + 1]
//   expert_counts  int32[E / W]
//   positions   int32[items] (world 1; items = max_tokens x topk)   the receive row of item token x
//                                          topk + k, written beside its row_source: a GEMM + combine
//                                          reduces its rows in place by it (CombineArgs::positions)
struct DispatchLayout {
  uint64_t abort, desc, counts, arrivals, row_source, recv;
  uint64_t epoch, barrier, pushed, status, hist, source_counts, expert_offsets, expert_counts, positions;
  uint64_t total;
};

inline DispatchLayout dispatch_layout(int world, int experts, int64_t capacity, int hidden, int64_t items) {
  const uint64_t local = uint64_t(experts / world);
  DispatchLayout l{};
  Regions r;
  auto take = [&](uint64_t bytes) { return r.take(bytes); };
  l.abort = take(8);
  l.desc = take(2ull * world * sizeof(Desc));
  l.counts = take(2ull * world * kMaxExperts * 4);
  l.arrivals = take(uint64_t(capacity / kBlockRows) * 8);
  l.row_source = take(uint64_t(capacity) * 16);
  l.recv = take(uint64_t(capacity) * hidden * 2);
  l.epoch = take(8);
  l.barrier = take(8);
  l.pushed = take(8);
  l.status = take(8);
  l.hist = take(uint64_t(kMaxCtas) * (experts + 1) * 4);
  l.source_counts = take(uint64_t(world) * local * 4);
  l.expert_offsets = take((local + 1) * 4);
  l.expert_counts = take(local * 4);
  l.positions = take(world == 1 ? uint64_t(items) * 4 : 0);
  l.total = r.at;
  return l;
}

// A combine plan's workspace:
//   abort     u64
//   ready     u64[W]                       ready[q] = epoch: rank q has started launch `epoch` (its
//                                          returned rows of the launch before have been read)
//   arrived   u64[ceil(max_tokens / 16)]   per block of 16 tokens: rows returned here
//   returned  bf16[returned_rows][hidden]  row token * topk + k (max_tokens * topk rows); a GEMM +
//                                          combine at world 1: the dispatch's receive layout
//                                          (capacity rows), stored by the GEMM's epilogue
//   epoch     u64                          this plan's launches so far (local)
//   finished  u64                          CTAs that finished: G per launch (local)
//   gemm_failure  u64[3]                   a GEMM + combine's GEMM kernel reports here (untracked: its
//                                          completion words, [1] the reason, [2] the failed flag); the
//                                          reduction moves it into the launch's completion (local)
struct CombineLayout {
  uint64_t abort, ready, arrived, returned, epoch, finished, gemm_failure, total;
};

inline CombineLayout combine_layout(int world, int64_t max_tokens, int topk, int hidden, int64_t returned_rows) {
  CombineLayout l{};
  Regions r;
  auto take = [&](uint64_t bytes) { return r.take(bytes); };
  l.abort = take(8);
  l.ready = take(uint64_t(world) * 8);
  l.arrived = take(uint64_t((max_tokens + kTokenBlock - 1) / kTokenBlock) * 8);
  l.returned = take(uint64_t(returned_rows) * hidden * 2);
  l.epoch = take(8);
  l.finished = take(8);
  l.gemm_failure = take(24);
  l.total = r.at;
  return l;
}

// Completion words of one launch (cuda/primitives/completion.cuh); done == nullptr: untracked.
struct CompletionWords {
  uint64_t* done;
  uint64_t seq;
  uint32_t* arrivals;
};

// What every MoE kernel needs to reach its peers' workspaces and report.
struct PeerArgs {
  char* const* peers;   // device table [world]: every rank's arena base, as mapped here
  uint64_t ws_offset;   // the plan's workspace, from the arena base (the same on every rank)
  int32_t world, rank;
  uint64_t timeout_ns;
  CompletionWords completion;  // done == nullptr: untracked (graph capture)
  uint64_t* report;       // device alias of the plan's 4 host-mapped report words
  const volatile uint64_t* host_abort;  // the communicator's (weft_comm_abort): failed rank + 1, or 0
};

struct DispatchArgs {
  PeerArgs peer;
  DispatchLayout layout;
  const uint16_t* x;  // [tokens, hidden] bf16
  int32_t* ids;       // [tokens, topk]
  float* weights;     // [tokens, topk] (route only)
  const void* logits; // [tokens, experts] (route only)
  int32_t logits_dtype;
  int32_t route;      // 1: route from logits first
  int32_t normalize;
  int32_t experts, topk, hidden, local_experts;
  int32_t rows_per_signal;
  int32_t pull_local;  // 1: rows routed to this rank are not copied (the fused GEMM reads them from x)
  int64_t tokens, max_tokens, capacity;
};

struct CombineArgs {
  PeerArgs peer;
  CombineLayout layout;
  // The dispatch plan's local words and layout (this rank's workspace).
  const uint64_t* dispatch_status;
  const int32_t* expert_offsets;
  const int4* row_source;
  const uint16_t* hidden_rows;  // [capacity, hidden]
  const float* weights;         // [tokens, topk]
  uint16_t* out;                // [tokens, hidden]
  int32_t topk, hidden, local_experts;
  int32_t rows_per_signal;
  // 0: this kernel pushes the rows back itself. Else the down-projection's epilogue has (or will
  // have) delivered each returned row in `pieces` column tiles: this kernel only reduces.
  int32_t pieces;
  // nullptr: returned row token * topk + k, counted in `arrived`. Else (a GEMM + combine at world 1)
  // the GEMM kernel before this one on the stream stored its rows in the receive layout: item
  // token * topk + k is returned row positions[item] (DispatchLayout::positions), complete by stream
  // order, so nothing is counted or waited for.
  const int32_t* positions;
  int64_t tokens, max_tokens;
};

struct RouteArgs {
  const void* logits;
  int32_t logits_dtype;
  int32_t normalize;
  int64_t tokens;
  int32_t experts, topk;
  int32_t* ids;
  float* weights;
  CompletionWords completion;
};

// The groups of a grouped GEMM (cuda/moe/grouped.cuh has the contract): plain device pointers and
// counts the host fills once per plan.
struct Groups {
  const int32_t* starts;   // [count] first row of each group
  const int32_t* limits;   // [count] one past its last row, or its row count (limits_are_counts)
  const int32_t* local;    // nullptr, or [count] rows at each group's start that are the owner's own
  const uint64_t* status;  // nullptr, or a MoE layout's status word: a failed layout has no tiles
  int32_t count;
  int32_t rows;            // rows of A and of the output
  int32_t tiles_n;         // output tile columns
  int32_t tile_cols;       // output columns per tile (the tile width, half of it when paired)
  int32_t band;            // tile rows per band of the tile order
  int32_t limits_are_counts;
};

// One grouped GEMM launch (grouped_gemm.cu): out [rows, n] bf16 = a [rows, k] x b[group], b as a
// 3-D map (ffi/src/moe/maps.hpp), 128 x tile_n tiles on `ctas` persistent CTAs.
struct GroupedLaunch {
  CUtensorMap a, b, c;  // a box {64, a_box_rows}; c box {64, 64} over [rows, n]
  void* c_ptr;
  int64_t ldc;
  int32_t rows, n, k;
  int32_t a_box_rows;   // rows < 128: all of them (no box crosses A's end), else 128
  Groups groups;
  int32_t tile_n;       // 128 or 256
  bool b_n_major;       // b is [G, K, N]
  int32_t ctas;         // 0: only load the kernel (preload)
  CompletionWords completion;
  cudaStream_t stream;
};
cudaError_t launch_grouped(const GroupedLaunch& l);
// Pipeline stages of a grouped kernel of this tile width (the same as the plain GEMM's).
int grouped_stages(int tile_n);

// Dispatch + up-projection (dispatch_gemm.cu): the dispatch's arguments, then the GEMM's over
// this rank's receive layout: out [rows = capacity, n] = recv rows x w[expert] (paired gate | up
// halves and SwiGLU with `swiglu`; b_up the up half's map).
struct DispatchGemmLaunch {
  CUtensorMap recv_tile;                     // the receive buffer, box {64, 128} (PUSH's A)
  CUtensorMap b, b_up, c;                    // weights (grouped maps, maps.hpp); out, box {64, 64}
  void* c_ptr;
  int64_t ldc;
  int32_t rows, n, k;
  Groups groups;
  DispatchArgs dispatch;
  void* ws;              // this rank's workspace, as this process addresses it
  int32_t tile_n;
  bool b_n_major, swiglu;
  int32_t ctas;
  CompletionWords completion;
  cudaStream_t stream;
};
cudaError_t launch_dispatch_gemm(const DispatchGemmLaunch& l);

// Where the down-projection's epilogue sends its rows (routed_rows.cuh): the combine plan's
// workspace on every rank and its regions (CombineLayout).
struct RoutedRows {
  CompletionWords failure; // where the epilogue reports (CombineLayout::gemm_failure)
  const int4* row_source;  // the dispatch's layout, this rank
  char* const* peers;      // device table [world]: every rank's arena base
  uint64_t ws_offset;      // the combine plan's workspace, from the arena base
  uint64_t returned, arrived, ready, abort, epoch;
  uint64_t timeout_ns;
  const volatile uint64_t* host_abort;  // the communicator's (weft_comm_abort): failed rank + 1, or 0
  int32_t world, rank, topk, hidden;
};

// Down-projection + combine, the GEMM part (gemm_combine.cu): rows [capacity, k] of the hidden
// layout x w[expert] [k, n = hidden], each output row stored into its source's returned slot (or,
// local_rows, into the returned region in the receive layout). The reduction then runs as
// launch_combine with CombineArgs::pieces = the GEMM's tiles_n (and positions with local_rows).
struct GemmCombineLaunch {
  CUtensorMap a, b;  // a: hidden rows [capacity, k], box {64, 128}
  // local_rows (world 1): the grouped GEMM's own bounded TMA-store epilogue (grouped.cuh) writes the
  // rows in the receive layout into the combine workspace's returned region [capacity, n], c its
  // map (box {64, 64}) and c_ptr / ldc the same memory; else the routed-rows epilogue (`routed`).
  CUtensorMap c;
  void* c_ptr;
  int64_t ldc;
  bool local_rows;
  int32_t rows, n, k;
  Groups groups;
  RoutedRows routed;
  int32_t tile_n;
  bool b_n_major;
  int32_t ctas;
  CompletionWords completion;
  cudaStream_t stream;
};
cudaError_t launch_gemm_combine(const GemmCombineLaunch& l);

// Dynamic shared memory of the dispatch kernel for E experts and W ranks.
size_t dispatch_smem_bytes(int experts, int world);
size_t combine_smem_bytes(int world);

cudaError_t launch_dispatch(const DispatchArgs& a, int ctas, cudaStream_t stream);
cudaError_t launch_combine(const CombineArgs& a, int ctas, cudaStream_t stream);
cudaError_t launch_route(const RouteArgs& a, cudaStream_t stream);
// Loads every MoE kernel on the current device: dispatch and combine (the dispatch's shared memory
// set for E experts and W ranks), and every variant of dispatch + GEMM and GEMM + combine (SwiGLU or
// not, push or pull, tile 128 or 256, either B layout). Every MoE plan calls it at creation, before
// its setup barrier: with lazy module loading a kernel's first load may wait for the device to go
// idle, and a barrier or an MoE kernel of this rank that waits for a peer this thread has yet to
// serve never lets it (see build_and_preload() in ffi/src/tp/abi.cpp). Loading only the creating
// plan's own kernel was not enough: ranks sharing a process create their plans rank by rank, so
// rank 0's second plan (a layer's SwiGLU variant, never used before) loaded its kernel while rank
// 0's first plan's setup barrier spun on the device for rank 1, and the barrier gave up after 10 s
// (bench/moe.ts, config A at world 2 on one GPU, its first world-2 case).
cudaError_t preload_kernels(int experts, int world);
cudaError_t preload_dispatch(int experts, int world);
cudaError_t preload_combine();
cudaError_t preload_dispatch_gemm();  // dispatch_gemm.cu
cudaError_t preload_gemm_combine();   // gemm_combine.cu

// References (reference.cu), see weft.h.
cudaError_t reference_route(const void* logits, int dtype, int64_t tokens, int experts, int topk, bool normalize,
                            int32_t* ids, float* weights, cudaStream_t stream);
cudaError_t reference_gather(const void* src, int64_t src_rows, int64_t cols, const int32_t* index, int64_t rows,
                             void* out, cudaStream_t stream);
cudaError_t reference_combine(const void* rows, int dtype, int64_t nrows, int64_t hidden, const int32_t* index,
                              const float* weights, int64_t tokens, int topk, float* out, cudaStream_t stream);
cudaError_t reference_rows_gemm(const void* a, int a_dtype, int64_t lda, const int32_t* a_index, const void* b,
                                int64_t ldb, bool b_nk, float* c, int64_t ldc, const int32_t* c_index, int64_t m,
                                int64_t n, int64_t k, cudaStream_t stream);
cudaError_t reference_swiglu(const void* h, int h_dtype, int64_t rows, int64_t inter, void* out, int out_dtype,
                             cudaStream_t stream);

}  // namespace weft::moe
