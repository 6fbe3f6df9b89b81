#include "ring_layout.hpp"

#include <algorithm>
#include <cmath>

#include "status.hpp"

namespace weft::attn_abi {

namespace {

constexpr char kOp[] = "weft_ring_attention";
constexpr uint64_t kControlAlign = 4096;

int32_t shard_of(const Layout& l, int32_t rank, int32_t world, bool zigzag) {
  int32_t n = 0;
  for (int32_t piece = 0; piece < (zigzag ? 2 : 1); ++piece) {
    const int32_t c = attn::ring_chunk_of(rank, world, zigzag, piece);
    n += l.starts[c + 1] - l.starts[c];
  }
  return n;
}

}  // namespace

int64_t peer_tokens(const Layout& l, int32_t rank) {
  int64_t n = 0;
  for (size_t s = 0; s < l.shard.size(); ++s) {
    if (int32_t(s) != rank) n += l.shard[s];
  }
  return n;
}

Layout ring_layout(const WeftRingAttentionParams& p, int32_t world, int32_t rank, bool shares_device, int64_t l2_share_bytes) {
  Layout l{};
  const bool zigzag = p.layout == WEFT_RING_ZIGZAG;
  l.chunks = zigzag ? 2 * world : world;
  WEFT_REQUIRE(attn::ring_chunks(p.seqlen, world, zigzag, l.starts.data()),
               "%s: seqlen %d is too short for %d chunks of whole 128-token blocks (needs > %d)", kOp, p.seqlen, l.chunks,
               128 * (l.chunks - 1));
  for (int32_t r = 0; r < world; ++r) l.shard.push_back(shard_of(l, r, world, zigzag));
  // Mover: the copy engines unless the caller asks for CTAs. The model (bench/model-ring-attention.ts)
  // has them hide every peer's shard under the math at 32k and 128k tokens on 2 and 8 GPUs without
  // taking an SM; copy CTAs run at ~60 GB/s each, so matching 300 GB/s would take 5 SMs (4% of the
  // math) (bench/DECISIONS.md, "Ring attention's peers' K and V come by copy engine unless asked
  // otherwise"). Where ranks share a GPU, "auto" takes the CTAs: a copy between two buffers of one
  // device runs on its SMs, which the ranks' kernels hold (the same rule as the TP ops' copy engines).
  if (world == 1) l.mover = WEFT_RING_MOVER_AUTO;
  else if (p.mover == WEFT_RING_MOVER_AUTO) l.mover = shares_device ? WEFT_RING_MOVER_CTAS : WEFT_RING_MOVER_COPY_ENGINE;
  else l.mover = p.mover == WEFT_RING_MOVER_CTAS ? WEFT_RING_MOVER_CTAS : WEFT_RING_MOVER_COPY_ENGINE;
  l.mover_ctas = l.mover == WEFT_RING_MOVER_CTAS ? (p.comm_ctas > 0 ? p.comm_ctas : 4) : 0;
  // Receive groups: small enough that the first group lands early (the first tiles need only their
  // own group). For the copy engines an eighth of the kv heads, so that each 2-D copy row is 1 KiB at
  // D 128 with 32 kv heads; the CTA mover, whose copies have no row size to keep, one kv head: the
  // first group lands 4x sooner, the tile order's groups are short enough that the snake's pairing
  // does not drift within one, and each rank's working set in L2 is a quarter (bench/DECISIONS.md,
  // "The CTA mover moves one kv head per group"). The caller may force it.
  const int32_t default_heads = l.mover == WEFT_RING_MOVER_CTAS ? 1 : std::max(1, p.kv_heads / 8);
  l.group_heads = p.group_heads > 0 ? p.group_heads : default_heads;
  l.groups = (p.kv_heads + l.group_heads - 1) / l.group_heads;
  int64_t most = 0;
  for (int32_t r = 0; r < world; ++r) most = std::max(most, peer_tokens(l, r));
  l.slot_bytes = 2ull * p.batch * uint64_t(most) * l.group_heads * p.head_dim * 2;
  const uint64_t shard_kv = 2ull * p.batch * uint64_t(l.shard[rank]) * p.kv_heads * p.head_dim * 2;
  const uint64_t budget = p.memory_bytes ? p.memory_bytes : 2 * shard_kv;
  if (world == 1) {
    l.slots = 1;
    l.receive_bytes = 0;
  } else {
    // As many slots as the budget holds, at most one per group (then nothing waits for slot reuse:
    // an all-gather of K and V). The same on every rank: sized for the rank whose peers hold most.
    const uint64_t fit = l.slot_bytes > 0 ? budget / l.slot_bytes : 0;
    WEFT_REQUIRE(fit >= 1, "%s: memory_bytes (%llu) holds no receive slot: one kv-head group of every peer's shard needs %llu bytes "
                 "(raise memory_bytes or lower group_heads)", kOp, (unsigned long long)budget, (unsigned long long)l.slot_bytes);
    l.slots = int32_t(std::min<uint64_t>(fit, uint64_t(l.groups)));
    l.receive_bytes = uint64_t(l.slots) * l.slot_bytes;
  }
  // Tile order bands (ring.cuh, "Tile order"). Under a causal mask a tile's keys grow with its
  // position, so the order goes longest first inside each band. Group by group (bands of one 1-head
  // group, the CTA mover's default), the last group's long tiles start near the end and the CTAs run
  // out unevenly: a replay of the schedule (S 8k, zigzag, 132 / W CTAs, 1-head groups) leaves the
  // busiest CTA 2.3-4.6% over an even split per rank at W 2-4; bands of 4 kv heads 0.3-1.0%, of 2
  // 0.6-2.3%; a band that does not divide the heads (3, 6) ends on a short band and loses it all
  // again. A band's heads are read together, so their K and V over the whole sequence (every rank
  // reads every key) must stay in L2: within 2/3 of this rank's share (at S 32k one head is 16 MiB,
  // and bands of 4 there measured 1.062 of the plain kernel against 1.027 by group). A band mixes
  // its groups' tiles, which breaks the group-by-group order that slot reuse waits on (group_done),
  // so only where every group has its own slot.
  l.order_groups = 1;
  if (world > 1 && (p.flags & WEFT_ATTENTION_CAUSAL) != 0 && l.slots == l.groups) {
    const int64_t head_kv = 2ll * p.batch * p.seqlen * p.head_dim * 2;
    const int64_t fit = head_kv > 0 ? l2_share_bytes * 2 / 3 / head_kv : 0;
    int32_t band = 4;
    while (band > 1 && (band > fit || p.kv_heads % band != 0 || band % l.group_heads != 0)) band /= 2;
    l.order_groups = std::max(1, band / l.group_heads);
  }
  // pulled[W], flags[groups][W], group_done[groups], arrivals[groups][W], abort, the tile counter
  // (ring_plan.cpp's layout).
  l.abort_offset = 64 + 8ull * world + 8ull * l.groups * world + 8ull * l.groups + 8ull * l.groups * world;
  l.tile_counter_offset = l.abort_offset + 8;
  l.control_bytes = (l.tile_counter_offset + 8 + kControlAlign - 1) / kControlAlign * kControlAlign;
  l.workspace_bytes = l.control_bytes + (l.receive_bytes + 511) / 512 * 512;
  return l;
}

attn::RingState ring_state(const WeftRingAttentionParams& p, const Layout& l, int32_t world, int32_t rank, int32_t block_m) {
  attn::RingState s{};
  const bool zigzag = p.layout == WEFT_RING_ZIGZAG;
  s.world = world;
  s.rank = rank;
  s.zigzag = zigzag;
  s.chunks = l.chunks;
  std::copy(l.starts.begin(), l.starts.end(), s.starts);
  s.ratio = p.heads / p.kv_heads;
  s.group_heads = l.group_heads;
  s.groups = l.groups;
  s.order_groups = l.order_groups;
  s.slots = l.slots;
  s.slot_rows = int32_t(int64_t(p.batch) * peer_tokens(l, rank));
  int32_t at = 0;
  for (int32_t q = 0; q < world; ++q) {
    s.source_row[q] = at;
    if (q != rank) at += p.batch * l.shard[q];
  }
  s.m_blocks = 0;
  for (int32_t piece = 0; piece < (zigzag ? 2 : 1); ++piece) {
    const int32_t ch = attn::ring_chunk_of(rank, world, zigzag, piece);
    const int32_t blocks = (l.starts[ch + 1] - l.starts[ch] + block_m - 1) / block_m;
    if (piece == 0) s.first_blocks = blocks;
    s.m_blocks += blocks;
  }
  s.tiles = p.batch * p.heads * s.m_blocks;
  s.kv_rows = p.kv_rows;
  s.mover_ctas = l.mover_ctas;
  for (int32_t q = 0; q < world; ++q) s.shard[q] = l.shard[q];
  const int32_t pieces = zigzag ? 2 : 1;
  for (int32_t piece = 0; piece < pieces; ++piece) {
    const int32_t ch = attn::ring_chunk_of(rank, world, zigzag, piece);
    s.piece_pos[piece] = l.starts[ch];
    s.piece_len[piece] = l.starts[ch + 1] - l.starts[ch];
  }
  // Segments: this rank first, then the upstream peers r - 1, r - 2, ... (the copies' order), each
  // rank's pieces in its shard's order.
  s.segments = world * pieces;
  for (int32_t i = 0; i < s.segments; ++i) {
    const int32_t nth = i / pieces, piece = i % pieces;
    const int32_t src = (rank - nth + world) % world;
    const int32_t ch = attn::ring_chunk_of(src, world, zigzag, piece);
    const int32_t offset = piece == 0 ? 0 : l.starts[attn::ring_chunk_of(src, world, zigzag, 0) + 1] -
                                                l.starts[attn::ring_chunk_of(src, world, zigzag, 0)];
    s.seg_source[i] = src;
    s.seg_pos[i] = l.starts[ch];
    s.seg_len[i] = l.starts[ch + 1] - l.starts[ch];
    s.seg_stride[i] = src == rank ? p.kv_rows : l.shard[src];
    s.seg_base[i] = (src == rank ? 0 : s.source_row[src]) + offset;
  }
  return s;
}

attn::Problem ring_problem(const WeftRingAttentionParams& p, const Layout& l, int32_t rank, const attn::RingState& s) {
  attn::Problem q{};
  const int32_t shard = l.shard[rank];
  q.batch = p.batch;
  q.heads = p.heads;
  q.kv_heads = p.kv_heads;
  q.seqlen_q = shard;
  q.seqlen_k = p.seqlen;
  q.m_blocks = s.m_blocks;
  q.tiles = s.tiles;
  q.causal = (p.flags & WEFT_ATTENTION_CAUSAL) != 0;
  const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(float(p.head_dim));
  q.scale_log2 = scale * 1.4426950408889634f;
  q.lse = reinterpret_cast<float*>(p.lse);
  q.lse_head_stride = shard;
  q.lse_batch_stride = int64_t(p.heads) * shard;
  q.o = reinterpret_cast<void*>(p.out);
  q.o_row_stride = int64_t(p.heads) * p.head_dim;
  q.rows_q = int32_t(int64_t(p.batch) * shard);
  q.rows_k = int32_t(int64_t(p.batch) * p.kv_rows);
  return q;
}

}  // namespace weft::attn_abi
