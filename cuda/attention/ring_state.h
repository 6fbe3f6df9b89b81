// ring_state.h — the plain data of one rank's fused ring-attention launch (host fills it, ring.cuh
// reads it), and the sequence chunking every party must agree on.
#pragma once

#include <cstdint>

#include "../primitives/abort_words.h"

// Shared by host code (plain C++) and device code.
#if defined(__CUDACC__)
#define WEFT_ATTN_HD __host__ __device__
#else
#define WEFT_ATTN_HD
#endif

namespace weft::attn {

constexpr int kRingMaxWorld = 8;
static_assert(kRingMaxWorld <= kAbortMaxRanks, "AbortWords names every rank of a ring");
constexpr int kRingMaxChunks = 2 * kRingMaxWorld;

// The sequence of S tokens is cut into `chunks` chunks (zigzag: 2W, rank r holding chunks r and
// 2W − 1 − r; contiguous: W, rank r holding chunk r) of whole 128-token blocks, the last ending at S.
// Each chunk gets nb / chunks of the nb = ceil(S / 128) blocks; the nb % chunks left over go one per
// rank, in rank order, to its first chunk and then (zigzag, more than W left over) to its second:
// every rank's shard is within a block of the others' (rank 0's second zigzag chunk ends with the
// partial block). Needs S > 128 (chunks − 1), so that no chunk is empty. starts[chunks] = S.
WEFT_ATTN_HD inline bool ring_chunks(int32_t seqlen, int32_t world, bool zigzag, int32_t* starts) {
  const int32_t chunks = zigzag ? 2 * world : world;
  const int32_t blocks = (seqlen + 127) / 128;
  if (world < 1 || blocks < chunks) return false;
  const int32_t extra = blocks % chunks;
  int32_t at = 0;
  for (int32_t c = 0; c < chunks; ++c) {
    starts[c] = at;
    // Left-over block j goes to chunk j (j < W), then to chunk 2W - 1 - (j - W).
    const bool more = c < world ? c < extra : (zigzag && 2 * world - 1 - c < extra - world);
    at += 128 * (blocks / chunks + (more ? 1 : 0));
  }
  starts[chunks] = seqlen;
  return true;
}

// The chunk that is piece `piece` (0 or 1) of rank r's shard.
WEFT_ATTN_HD inline int32_t ring_chunk_of(int32_t rank, int32_t world, bool zigzag, int32_t piece) {
  return zigzag ? (piece == 0 ? rank : 2 * world - 1 - rank) : rank;
}

struct RingState {
  int32_t world, rank;
  int32_t zigzag;         // 1: zigzag (two chunks per rank), 0: contiguous (one)
  int32_t chunks;         // 2W or W
  int32_t starts[kRingMaxChunks + 1];  // ring_chunks()
  int32_t ratio;          // query heads per kv head
  int32_t group_heads;    // kv heads per receive group
  int32_t groups;         // ceil(kv_heads / group_heads)
  int32_t order_groups;   // groups per band of the tile order (ring.cuh, "Tile order"; 1: group by group)
  int32_t slots;          // receive slots; group g lands in slot g % slots
  int32_t slot_rows;      // rows of one slot: every peer's shard, batch x its tokens
  int32_t source_row[kRingMaxWorld];  // row of source s's region in a slot (this rank's own: unused)
  int32_t kv_rows;        // rows per sequence of the local k / v (>= this rank's shard)
  // The tile's key segments in walk order (this rank's chunks, then each upstream peer's), from
  // ring_state(): segment i reads rows seg_stride[i] x b + seg_base[i] (+ the group's slot for a
  // peer) of source seg_source[i]'s map, keys from position seg_pos[i], seg_len[i] of them. Kept
  // in parameter space so that the producer (40 registers) recomputes nothing per segment.
  int32_t segments;
  int32_t seg_source[kRingMaxChunks];
  int32_t seg_pos[kRingMaxChunks];
  int32_t seg_len[kRingMaxChunks];
  int32_t seg_base[kRingMaxChunks];
  int32_t seg_stride[kRingMaxChunks];
  // This rank's two pieces (zigzag; contiguous: one): first position, length, and the row offset of
  // piece 1 in the shard.
  int32_t piece_pos[2];
  int32_t piece_len[2];
  int32_t m_blocks;       // query tiles of this rank's shard per (sequence, head), its chunks together
  int32_t first_blocks;   // of those, the first chunk's
  int32_t tiles;          // groups-major tile count (= Problem::tiles)
  int32_t ctas;           // the CTAs past the movers: each adds 1 to each group_done word per launch
  uint64_t epoch;         // this launch (>= 1)
  uint64_t timeout_ns;
  // What every wait for a peer gives up on (primitives/abort_words.h): the communicator's host word
  // (weft_comm_abort) and the plan's abort word on every rank (abort.plan[rank]: this rank's), which
  // a rank raises when one of its own waits runs out.
  AbortWords abort;
  // abort.plan[rank], set apart: the waits' budget reads it in the producer, where indexing
  // abort.plan by rank in parameter space costs registers its 40 do not have (ptxas: spills).
  uint64_t* own_abort;
  // This rank's words (workspace, ring.cuh lists them): the copy engines raise flags[g * W + s] to
  // the epoch when group g of source s has landed; CTAs add to group_done[g] when done with group g.
  uint64_t* flags;
  uint64_t* group_done;
  uint32_t* tile_counter; // every CTA's tile scheduler, movers' too (scheduler.cuh; 0 between launches)
  uint64_t* entered;      // symmetric: this rank's, raised at kernel start
  uint64_t* go;           // this rank's side streams wait for it: every peer has entered
  // The CTA mover (mover_ctas > 0): CTAs [0, mover_ctas) copy the peers' groups themselves, in the
  // copy engines' order, every CTA a stripe of every item (ring.cuh, move()), from peer_k / peer_v
  // (each peer's k and v as this process maps them, its kv_rows rows per sequence), then compute
  // tiles like the rest. Each mover CTA adds 1 to arrivals[g * W + s] when its stripe of item (g, s)
  // is stored, and the one that completes the launch's count (epoch x mover_ctas) raises
  // flags[g * W + s]; each adds 1 to movers_done when all its items are done, and the one that
  // completes the launch's count raises pulled[s] for every peer s.
  int32_t mover_ctas;
  int32_t shard[kRingMaxWorld];         // tokens per sequence of every rank
  int32_t peer_kv_rows[kRingMaxWorld];
  char* recv_k;                         // the receive buffer: slots x slot_rows rows of group_heads x D
  char* recv_v;
  const char* peer_k[kRingMaxWorld];
  const char* peer_v[kRingMaxWorld];
  uint64_t* arrivals;     // [groups][W], this rank's (workspace)
  uint64_t* movers_done;
  uint64_t* pulled;       // this rank's pulled[W] (the copy engines raise them otherwise)
  // Peers' words as this process maps them: peer_entered[s] = rank s's entered; peer_pulled[s] =
  // rank s's pulled[this rank] (raised by s's side stream once it has copied this rank's shard).
  uint64_t* peer_entered[kRingMaxWorld];
  uint64_t* peer_pulled[kRingMaxWorld];
};

}  // namespace weft::attn
