// attention.h — the host-side face of the attention engine, included by ffi/src (plain C++, no
// device code).
//
// The engine computes out = softmax(q·kᵀ·scale)·v per (sequence, head), bf16 in and out, fp32
// accumulation and softmax, optionally the fp32 log-sum-exp (problem.h has the shapes and masks).
// Operands travel as CUtensorMaps over the (rows x heads·D) view of each tensor, encoded with the
// boxes box_rows() gives (128-byte inner boxes: 64 bf16 of one head).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "problem.h"
#include "ring_state.h"

namespace weft::attn {

// The instantiated tile shape for a head dim (launch.cuh), two consumers each: 128 x 160 at D 128
// (two stages, both kernels); at D 64, 128 x 192 for the one-GPU kernel and 128 x 128 for the ring.
struct TileShape {
  int32_t block_m;
  int32_t block_n;
  int32_t stages;
  int32_t threads;
  int32_t smem_bytes;
};

bool head_dim_supported(int32_t head_dim);
TileShape tile_shape(int32_t head_dim);       // the one-GPU kernel's
TileShape ring_tile_shape(int32_t head_dim);  // the ring kernel's

// TMA box heights (rows) of each map; every box is 64 elements wide.
struct BoxRows {
  uint32_t q, kv, o;
};
inline BoxRows box_rows(const TileShape& t) { return {uint32_t(t.block_m), uint32_t(t.block_n), 64u}; }

// (sequence, head) pairs per section of the tile order (local.cuh): kv heads of len_k x D bf16 K
// and V each, shared by `group` query heads. Under a causal mask as many kv heads as fit about half
// of L2, so that the longest-first order inside a section has tiles of many heads to spread over
// the grid. Without a mask every tile is as long as the next, and one kv head per section keeps the
// running CTAs on the fewest heads: at S 8k, H 32, D 128 a section of 7 kv heads (half of 60 MiB)
// read 535 MB from DRAM against cuDNN's 202 (Q, K and V once: ncu), and one kv head reads 202 and
// runs 2.3% faster under the card's power cap (bench/DECISIONS.md, "Attention without a causal mask
// takes sections of one kv head").
inline int32_t section_pairs(int64_t len_k, int32_t head_dim, int32_t group, int64_t l2_bytes, int32_t pairs, bool causal) {
  const int64_t per_kv_head = 2 * len_k * head_dim * 2;
  int64_t kv_heads = !causal ? 1 : per_kv_head > 0 ? (l2_bytes / 2) / per_kv_head : 1;
  if (kv_heads < 1) kv_heads = 1;
  int64_t section = kv_heads * group;
  if (section > pairs) section = pairs;
  return section < 1 ? 1 : int32_t(section);
}

struct CompletionWords {
  uint64_t* done;
  uint64_t seq;
  uint32_t* arrivals;
};

struct LocalLaunch {
  CUtensorMap q, o, k, v;
  Problem problem;
  int32_t head_dim;
  int32_t ctas;  // persistent grid: at most one CTA per SM, at most problem.tiles
  CompletionWords completion;
  // The tile scheduler's word (scheduler.cuh): device memory that is 0 between launches and that no
  // other launch uses while this one runs; nullptr: the static tile order.
  uint32_t* tile_counter;
  cudaStream_t stream;
};

// Sets the kernel's shared-memory opt-in (once per device) and launches on the current device.
cudaError_t launch_local(const LocalLaunch& l);
// How many CTAs of the head dim's kernel fit on the current device at once (one per SM when the
// shared memory allows one, which config.cuh guarantees).
cudaError_t resident_ctas(int32_t head_dim, int* ctas);

// One rank's fused ring-attention launch (ring.cuh): its shard's q / out and its local k / v, the
// receive buffer's K and V (k_recv, v_recv: slots x slot_rows rows of group_heads x D), the ring.
struct RingLaunch {
  CUtensorMap q, o, k, v, k_recv, v_recv;
  Problem problem;
  RingState state;
  int32_t head_dim;
  int32_t ctas;
  CompletionWords completion;
  cudaStream_t stream;
};

cudaError_t launch_ring(const RingLaunch& l);
cudaError_t resident_ring_ctas(int32_t head_dim, int* ctas);

// Test support (walk_listing.cu): the tiles and key blocks of a launch, listed on the host by the
// kernel's own decode and walk, kWalkFields int32 per block (a tile without blocks: one row with
// source -1): tile index, status (TileStatus), b, h, hk, q row, q rows, q pos, source, kv row,
// kv col, kv pos, valid, gate, masked, lse offset, and from a replay of the tile scheduler with
// WalkReplay::ctas simulated CTAs over two launches (ctas 0: none, -1 -1) the CTA that took the tile
// in the second launch (-2: two did) and its fetch position; the first late_ctas of them take their
// first tile only at time late_at (in blocks: the ring's mover CTAs, which compute after their copies). A replay ends with one row of status
// kWalkReplayRow: index -1, then the counter word after each launch and the tiles nobody took.
// Returns the rows (writes at most `capacity`).
constexpr int kWalkFields = 18;
constexpr int32_t kWalkReplayRow = 3;
struct WalkReplay {
  int32_t ctas;        // simulated CTAs (0: no replay)
  int32_t limit_ctas;  // the CTAs the counter's limit assumes (0: ctas; another value: a fault)
  int32_t late_ctas;   // of the ctas, how many start late (movers)
  int32_t late_at;     // and when, in blocks
};
int64_t list_walk_local(const Problem& problem, int32_t head_dim, const WalkReplay& r, int32_t* out, int64_t capacity);
int64_t list_walk_ring(const Problem& problem, const RingState& state, int32_t head_dim, const WalkReplay& r, int32_t* out,
                       int64_t capacity);

// The deliberately simple fp32 reference (one warp per query, two passes over the keys, CUDA
// cores only): out [rows, heads * D] fp32 in the q layout, lse as the engine writes it. For tests.
cudaError_t reference_attention(const Problem& problem, int32_t head_dim, const void* q, const void* k,
                                const void* v, float* out, cudaStream_t stream);

}  // namespace weft::attn
