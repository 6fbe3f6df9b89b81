// ring_plan.cpp — weft_ring_attention_*: validates a fused ring-attention call, chooses its
// receive layout (cost model below), builds the kernel's launch (tensor maps on the shard and on
// the receive buffer) and the copy-engine mover once, and per launch patches the epoch.
//
// Workspace (symmetric, the same size on every rank, zeroed at plan creation):
//   [control, 4 KiB multiple] entered @0 | go @8 | what the peers read at connect @16: a tag, this
//                             workspace's own heap offset, k's and v's, kv_rows |
//                             movers_done @56 | pulled[W] @64 | flags[groups][W] | group_done[groups] |
//                             arrivals[groups][W] (the CTA mover's per-item counts) |
//                             abort (Layout::abort_offset: raised by a rank whose own wait ran out) |
//                             tile counter (Layout::tile_counter_offset: this rank's scheduler word,
//                             0 between launches: cuda/attention/scheduler.cuh)
//   [receive K: slots x slot_rows rows of group_heads x D bf16][receive V: the same]
// entered and pulled are read by the peers and abort is raised by them (same offsets everywhere); the
// receive buffers are sized for the rank whose peers hold the most tokens.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <vector>

#include "attention/attention.h"
#include "attention_params.hpp"
#include "comm/call_checks.hpp"
#include "comm/comm.hpp"
#include "device_guard.hpp"
#include "op_launch.hpp"
#include "out_struct.hpp"
#include "ring_layout.hpp"
#include "ring_mover.hpp"
#include "status.hpp"
#include "tensor_map.hpp"
#include "weft.h"

using namespace weft;
using attn_abi::Layout;
using attn_abi::peer_tokens;

namespace {

constexpr char kOp[] = "weft_ring_attention";
// Marks the words a plan publishes at creation (ASCII "weftring"): a peer that finds anything else
// at this workspace's offset has its workspace elsewhere.
constexpr uint64_t kTag = 0x676e697274666577ull;

void validate(const WeftComm& c, const WeftRingAttentionParams* p) {
  WEFT_REQUIRE(p, "params must not be NULL");
  WEFT_REQUIRE(p->size == sizeof(WeftRingAttentionParams) && p->version == 1,
               "params->size/version must be sizeof(WeftRingAttentionParams) (%zu) and 1 (got %u, %u)",
               sizeof(WeftRingAttentionParams), p->size, p->version);
  WEFT_REQUIRE(c.world <= uint32_t(attn::kRingMaxWorld), "%s: world size %u is above the %d this build supports", kOp, c.world,
               attn::kRingMaxWorld);
  WEFT_REQUIRE(c.inter.nodes == 0, "%s: communicators over several nodes are not supported yet", kOp);
  WEFT_REQUIRE(p->q && p->k && p->v && p->out, "q, k, v and out must not be 0");
  WEFT_REQUIRE((p->flags & ~uint32_t(WEFT_ATTENTION_CAUSAL)) == 0, "flags has unknown bits (0x%x)", p->flags);
  WEFT_REQUIRE(attn::head_dim_supported(p->head_dim), "head_dim must be 64 or 128 (got %d)", p->head_dim);
  WEFT_REQUIRE(p->batch >= 1 && p->heads >= 1 && p->kv_heads >= 1 && p->heads % p->kv_heads == 0,
               "batch, heads, kv_heads must be >= 1 with heads a multiple of kv_heads (got %d, %d, %d)", p->batch, p->heads,
               p->kv_heads);
  WEFT_REQUIRE(p->layout == WEFT_RING_ZIGZAG || p->layout == WEFT_RING_CONTIGUOUS, "layout must be WEFT_RING_ZIGZAG or "
               "WEFT_RING_CONTIGUOUS (got %d)", p->layout);
  WEFT_REQUIRE(p->mover >= WEFT_RING_MOVER_AUTO && p->mover <= WEFT_RING_MOVER_CTAS,
               "mover must be WEFT_RING_MOVER_AUTO, _COPY_ENGINE or _CTAS (got %d)", p->mover);
  WEFT_REQUIRE(p->comm_ctas >= 0 && (p->comm_ctas == 0 || p->mover == WEFT_RING_MOVER_CTAS),
               "comm_ctas (%d) applies to WEFT_RING_MOVER_CTAS only and must be >= 0", p->comm_ctas);
  WEFT_REQUIRE(p->group_heads >= 0 && p->group_heads <= p->kv_heads, "group_heads must be in [0, kv_heads = %d] (got %d)",
               p->kv_heads, p->group_heads);
  WEFT_REQUIRE(std::isfinite(p->scale) && p->scale >= 0.0f, "scale must be > 0, or 0 for 1 / sqrt(head_dim)");
  for (uint64_t a : {p->q, p->k, p->v, p->out}) WEFT_REQUIRE(a % 16 == 0, "q, k, v and out must be 16-byte aligned (TMA)");
  WEFT_REQUIRE(p->lse % 4 == 0, "lse must be 4-byte aligned");
}

Layout choose(const WeftComm& c, const WeftRingAttentionParams& p) {
  // The L2 this rank may count on: the device's, shared with every rank that runs on the same GPU.
  int l2 = 0;
  WEFT_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, c.device));
  int64_t ranks_here = 0;
  for (int32_t d : c.peer_device) ranks_here += d == c.device ? 1 : 0;
  const int64_t l2_share = int64_t(l2) / std::max<int64_t>(1, c.shares_device ? ranks_here : 1);
  Layout l = attn_abi::ring_layout(p, int32_t(c.world), int32_t(c.rank), c.shares_device, l2_share);
  const int32_t world = int32_t(c.world);
  const bool zigzag = p.layout == WEFT_RING_ZIGZAG;
  const attn::TileShape t = attn::ring_tile_shape(p.head_dim);
  int resident = 0;
  WEFT_CUDA(attn::resident_ring_ctas(p.head_dim, &resident));  // also loads the kernel (before any ring kernel runs)
  int32_t m_blocks = 0;
  for (int32_t piece = 0; piece < (zigzag ? 2 : 1); ++piece) {
    const int32_t ch = attn::ring_chunk_of(int32_t(c.rank), world, zigzag, piece);
    m_blocks += (l.starts[ch + 1] - l.starts[ch] + t.block_m - 1) / t.block_m;
  }
  const int64_t tiles = int64_t(p.batch) * p.heads * m_blocks;
  WEFT_REQUIRE(l.mover_ctas < std::min(resident, c.sm_count), "%s: comm_ctas (%d) leaves no CTA to compute (%d SMs)", kOp,
               l.mover_ctas, std::min(resident, c.sm_count));
  l.ctas = int32_t(std::max<int64_t>(1, std::min<int64_t>({int64_t(resident) - l.mover_ctas, int64_t(c.sm_count) - l.mover_ctas, tiles})));
  // Cost model: the engine at ~550 TFLOP/s on 132 SMs (scaled by the CTAs), this rank's share of
  // the work; the copies at ~300 GB/s per peer link (bench/model-ring-attention.ts), overlapped but
  // for the first group. Mover CTAs compute too once their copies (every group of every peer, a
  // stripe each) are done: the work spreads over all the CTAs, less the movers' copy time.
  const double flops = 4.0 * p.batch * p.heads * double(l.shard[c.rank]) * p.seqlen * p.head_dim *
                       ((p.flags & WEFT_ATTENTION_CAUSAL) ? 0.5 : 1.0);
  const double rate_mbps = l.mover == WEFT_RING_MOVER_CTAS ? 60e3 * l.mover_ctas : 300e3;  // bytes per us
  const double copy_us = world > 1 ? double(l.slot_bytes) * l.groups / rate_mbps : 0.0;
  const double cta_us = flops / (550e6 / 132.0);  // the work, in one CTA's microseconds
  const double compute_us = (cta_us + l.mover_ctas * copy_us) / double(l.ctas + l.mover_ctas);
  const double first_group_us = world > 1 ? double(l.slot_bytes) / double(world - 1) / rate_mbps : 0.0;
  l.predicted_us = compute_us + first_group_us;
  return l;
}

}  // namespace

struct WeftRingAttentionPlan {
  WeftComm* comm = nullptr;
  WeftRingAttentionParams params{};
  Layout layout{};
  attn::RingLaunch launch{};
  attn_abi::RingBuffers buffers{};
  std::unique_ptr<attn_abi::RingMover> mover;
  // World 1: the one-GPU kernel's launch instead of the ring's (build() says when and why).
  bool one_gpu = false;
  attn::LocalLaunch one_gpu_launch{};
  std::array<uint64_t, 5> published{};  // tag, workspace, k and v heap offsets, kv_rows (connect reads the peers')
  char* workspace = nullptr;
  uint64_t epoch = 0;
  bool connected = false;
};

namespace {

uint64_t* word(char* workspace, uint64_t offset) { return reinterpret_cast<uint64_t*>(workspace + offset); }

void build(WeftRingAttentionPlan& plan) {
  const WeftComm& c = *plan.comm;
  const WeftRingAttentionParams& p = plan.params;
  const Layout& l = plan.layout;
  const int32_t world = int32_t(c.world), rank = int32_t(c.rank);
  const int32_t shard = l.shard[rank];
  attn::RingLaunch& x = plan.launch;
  const attn::TileShape t = attn::ring_tile_shape(p.head_dim);
  const attn::BoxRows rows = attn::box_rows(t);
  const uint64_t q_cols = uint64_t(p.heads) * p.head_dim, kv_cols = uint64_t(p.kv_heads) * p.head_dim;
  const uint64_t rows_q = uint64_t(p.batch) * shard;
  const uint32_t q_box[2] = {64, rows.q}, o_box[2] = {64, rows.o}, kv_box[2] = {64, rows.kv};
  encode_bf16(&x.q, reinterpret_cast<const void*>(p.q), q_cols, rows_q, q_cols, q_box, "q");
  encode_bf16(&x.o, reinterpret_cast<const void*>(p.out), q_cols, rows_q, q_cols, o_box, "out");
  const uint64_t rows_kv = uint64_t(p.batch) * p.kv_rows;
  encode_bf16(&x.k, reinterpret_cast<const void*>(p.k), kv_cols, rows_kv, kv_cols, kv_box, "k");
  encode_bf16(&x.v, reinterpret_cast<const void*>(p.v), kv_cols, rows_kv, kv_cols, kv_box, "v");
  char* ws = plan.workspace;
  attn::RingState& s = x.state;
  s = attn_abi::ring_state(p, l, world, rank, t.block_m);
  s.ctas = l.ctas;
  s.timeout_ns = c.timeout_ns;
  s.abort.host = c.abort_dev;  // abort.plan: every rank's, at connect
  s.own_abort = word(ws, l.abort_offset);
  s.entered = word(ws, 0);
  s.go = word(ws, 8);
  s.movers_done = word(ws, 56);
  uint64_t* pulled = word(ws, 64);
  s.pulled = pulled;
  s.flags = pulled + world;
  s.group_done = s.flags + int64_t(l.groups) * world;
  s.arrivals = s.group_done + l.groups;
  s.tile_counter = reinterpret_cast<uint32_t*>(ws + l.tile_counter_offset);
  char* recv_k = ws + l.control_bytes;
  char* recv_v = recv_k + l.receive_bytes / 2;
  s.recv_k = recv_k;
  s.recv_v = recv_v;
  const uint64_t recv_cols = uint64_t(l.group_heads) * p.head_dim;
  const uint64_t recv_rows = std::max<uint64_t>(1, uint64_t(l.slots) * s.slot_rows);
  if (world > 1) {
    encode_bf16(&x.k_recv, recv_k, recv_cols, recv_rows, recv_cols, kv_box, "receive K");
    encode_bf16(&x.v_recv, recv_v, recv_cols, recv_rows, recv_cols, kv_box, "receive V");
  } else {
    x.k_recv = x.k;
    x.v_recv = x.v;
  }
  x.problem = attn_abi::ring_problem(p, l, rank, s);
  x.head_dim = p.head_dim;
  x.ctas = l.ctas + l.mover_ctas;
  x.stream = reinterpret_cast<cudaStream_t>(p.stream);

  attn_abi::RingBuffers& b = plan.buffers;
  b.world = world;
  b.rank = rank;
  b.batch = p.batch;
  b.kv_heads = p.kv_heads;
  b.head_dim = p.head_dim;
  b.group_heads = l.group_heads;
  b.groups = l.groups;
  b.slots = l.slots;
  b.slot_rows = s.slot_rows;
  b.shard = l.shard;
  b.kv_rows.assign(world, p.kv_rows);  // the peers' own, from connect
  b.source_row.assign(s.source_row, s.source_row + world);
  b.recv_k = recv_k;
  b.recv_v = recv_v;
  b.go = s.go;
  b.flags = s.flags;
  b.group_done = s.group_done;
  b.pulled = pulled;
  b.ctas = l.ctas;

  // World 1 has no peer to wait for, and its shard is the whole sequence in order (zigzag's two
  // chunks are 0 and 1), so the one-GPU kernel computes the same result without the ring's per-stage
  // bookkeeping (the ring kernel took 1.48x the one-GPU kernel at S 8k causal on one H200,
  // bench/results/attention.md). It reads k and v as [batch, seqlen, kv_heads, head_dim]: kv_rows ==
  // seqlen, or one sequence (then the rows past the shard are simply not read).
  plan.one_gpu = world == 1 && (p.batch == 1 || p.kv_rows == p.seqlen);
  if (plan.one_gpu) {
    WeftAttentionParams a = WEFT_ATTENTION_PARAMS_INIT;
    a.q = p.q, a.k = p.k, a.v = p.v, a.out = p.out, a.lse = p.lse;
    a.batch = p.batch, a.heads = p.heads, a.kv_heads = p.kv_heads, a.head_dim = p.head_dim;
    a.seqlen_q = a.seqlen_k = p.seqlen;
    a.flags = p.flags;
    a.scale = p.scale;
    a.max_ctas = c.sm_count;  // the communicator's SM budget
    a.stream = p.stream;
    plan.one_gpu_launch = attn_abi::local_launch(a, attn_abi::validate(&a));
    plan.one_gpu_launch.tile_counter = s.tile_counter;  // the plan's, with or without a completion
  }
}

void launch_kernel(WeftRingAttentionPlan& plan, const WeftOpLaunch* l) {
  WEFT_REQUIRE(plan.connected, "%s: launch before weft_ring_attention_plan_connect", kOp);
  comm::require(plan.comm, true);  // a communicator with a rank declared failed runs nothing more
  WEFT_REQUIRE(l, "launch must not be NULL (a WeftOpLaunch; done = 0 for no completion)");
  const attn::CompletionWords completion = completion_words<attn::CompletionWords>(l);
  plan.launch.state.epoch = ++plan.epoch;
  if (plan.one_gpu) {
    plan.one_gpu_launch.completion = completion;
    WEFT_CUDA(attn::launch_local(plan.one_gpu_launch));
    return;
  }
  plan.launch.completion = completion;
  WEFT_CUDA(attn::launch_ring(plan.launch));
}

void launch_moves(WeftRingAttentionPlan& plan) {
  if (plan.mover) plan.mover->enqueue(plan.epoch);
}

}  // namespace

extern "C" {

WEFT_API int weft_ring_chunks(int32_t seqlen, int32_t world, int32_t layout, int32_t* starts, int32_t* out_chunks) {
  return guard([&] {
    WEFT_REQUIRE(starts && out_chunks, "starts and out_chunks must not be NULL");
    WEFT_REQUIRE(world >= 1 && world <= attn::kRingMaxWorld, "world must be in [1, %d] (got %d)", attn::kRingMaxWorld, world);
    WEFT_REQUIRE(layout == WEFT_RING_ZIGZAG || layout == WEFT_RING_CONTIGUOUS, "layout must be zigzag (0) or contiguous (1)");
    const int32_t chunks = layout == WEFT_RING_ZIGZAG ? 2 * world : world;
    WEFT_REQUIRE(attn::ring_chunks(seqlen, world, layout == WEFT_RING_ZIGZAG, starts), "seqlen %d is too short for %d chunks of whole 128-token blocks "
                 "(needs > %d)", seqlen, chunks, 128 * (chunks - 1));
    *out_chunks = chunks;
  });
}

WEFT_API int weft_ring_attention_choose(WeftComm* comm, const WeftRingAttentionParams* params, WeftRingAttentionChoice* out) {
  return guard([&] {
    WeftComm& c = comm::require(comm, true);
    require_out_struct(out, "WeftRingAttentionChoice");
    validate(c, params);
    DeviceGuard g(c.device);
    const Layout l = choose(c, *params);
    out->mover = l.mover;
    out->comm_ctas = l.mover_ctas;
    out->group_heads = l.group_heads;
    out->groups = l.groups;
    out->slots = l.slots;
    out->ctas = l.ctas;
    out->shard = l.shard[c.rank];
    out->workspace_bytes = l.workspace_bytes;
    out->receive_bytes = l.receive_bytes;
    out->predicted_us = l.predicted_us;
  });
}

WEFT_API int weft_ring_attention_plan_create(WeftComm* comm, const WeftRingAttentionParams* params, WeftRingAttentionPlan** out_plan) {
  return guard([&] {
    WEFT_REQUIRE(out_plan, "out_plan must not be NULL");
    *out_plan = nullptr;
    WeftComm& c = comm::require(comm, true);
    validate(c, params);
    DeviceGuard g(c.device);
    auto plan = std::make_unique<WeftRingAttentionPlan>();
    plan->comm = &c;
    plan->params = *params;
    plan->layout = choose(c, *params);
    const WeftRingAttentionParams& p = plan->params;
    const Layout& l = plan->layout;
    WEFT_REQUIRE(p.kv_rows >= l.shard[c.rank], "%s: kv_rows (%d) must hold this rank's shard of %d tokens", kOp, p.kv_rows,
                 l.shard[c.rank]);
    const uint64_t shard_bytes = uint64_t(p.batch) * p.kv_rows * p.kv_heads * p.head_dim * 2;
    comm::require_symmetric(c, p.k, shard_bytes, "k", kOp);
    comm::require_symmetric(c, p.v, shard_bytes, "v", kOp);
    comm::require_on_device(c, p.q, "q", kOp);
    comm::require_on_device(c, p.out, "out", kOp);
    if (p.lse) comm::require_on_device(c, p.lse, "lse", kOp);
    WEFT_REQUIRE(p.workspace_bytes >= l.workspace_bytes, "%s: workspace_bytes (%llu) must be at least %llu (weft_ring_attention_choose)",
                 kOp, (unsigned long long)p.workspace_bytes, (unsigned long long)l.workspace_bytes);
    comm::require_symmetric(c, p.workspace, l.workspace_bytes, "workspace", kOp);
    plan->workspace = reinterpret_cast<char*>(p.workspace);
    build(*plan);
    auto st = reinterpret_cast<cudaStream_t>(p.stream);
    WEFT_CUDA(cudaMemsetAsync(plan->workspace, 0, l.workspace_bytes, st));
    plan->published = {kTag, uint64_t(plan->workspace - c.arena), uint64_t(reinterpret_cast<char*>(p.k) - c.arena),
                       uint64_t(reinterpret_cast<char*>(p.v) - c.arena), uint64_t(p.kv_rows)};
    WEFT_CUDA(cudaMemcpyAsync(plan->workspace + 16, plan->published.data(), sizeof(plan->published), cudaMemcpyHostToDevice, st));
    WEFT_CUDA(cudaStreamSynchronize(st));  // the offsets' host copy may go away after this call
    *out_plan = plan.release();
  });
}

WEFT_API int weft_ring_attention_plan_connect(WeftRingAttentionPlan* plan) {
  return guard([&] {
    WEFT_REQUIRE(plan, "plan must not be NULL");
    if (plan->connected) return;
    const WeftComm& c = *plan->comm;
    DeviceGuard g(c.device);
    attn::RingState& s = plan->launch.state;
    attn_abi::RingBuffers& b = plan->buffers;
    b.peer_k.assign(c.world, nullptr);
    b.peer_v.assign(c.world, nullptr);
    for (uint32_t q = 0; q < c.world; ++q) {
      s.peer_entered[q] = reinterpret_cast<uint64_t*>(comm::on_rank(c, q, s.entered));
      s.peer_pulled[q] = reinterpret_cast<uint64_t*>(comm::on_rank(c, q, b.pulled + c.rank));
      s.abort.plan[q] = reinterpret_cast<uint64_t*>(comm::on_rank(c, q, plan->workspace + plan->layout.abort_offset));
      if (q == c.rank) continue;
      std::array<uint64_t, 5> w{};
      WEFT_CUDA(cudaMemcpy(w.data(), comm::on_rank(c, q, plan->workspace + 16), sizeof(w), cudaMemcpyDefault));
      // The peers find each other's words at this workspace's offset: symmetric allocations must
      // agree, which they do only when every rank allocated the same sizes in the same order.
      WEFT_REQUIRE(w[0] == kTag && w[1] == uint64_t(plan->workspace - c.arena),
                   "%s: rank %u's plan workspace is not at this rank's heap offset: every rank must allocate the same "
                   "symmetric sizes in the same order (k and v of the same shape everywhere: [batch, the largest shard, "
                   "kv_heads, head_dim] when the shards differ; ringShardCapacity) and create its plans in the same order",
                   kOp, q);
      // (Rank q checked at its own plan_create that its k and v lie in its heap.)
      b.peer_k[q] = c.peer_base[q] + w[2];
      b.peer_v[q] = c.peer_base[q] + w[3];
      b.kv_rows[q] = int32_t(w[4]);
      s.peer_k[q] = b.peer_k[q];
      s.peer_v[q] = b.peer_v[q];
      s.peer_kv_rows[q] = b.kv_rows[q];
    }
    if (plan->layout.mover == WEFT_RING_MOVER_COPY_ENGINE) plan->mover = attn_abi::copy_engine_mover(b);
    plan->connected = true;
  });
}

WEFT_API int weft_ring_attention_plan_launch(WeftRingAttentionPlan* plan, const WeftOpLaunch* launch) {
  return guard([&] {
    WEFT_REQUIRE(plan, "plan must not be NULL");
    DeviceGuard g(plan->comm->device);
    launch_kernel(*plan, launch);
    launch_moves(*plan);
  });
}

WEFT_API int weft_ring_attention_plans_launch(WeftRingAttentionPlan* const* plans, const WeftOpLaunch* launches, int32_t count) {
  return guard([&] {
    WEFT_REQUIRE(plans && launches && count >= 1, "plans and launches must hold count >= 1 entries");
    for (int32_t i = 0; i < count; ++i) {
      WEFT_REQUIRE(plans[i], "plans[%d] must not be NULL", i);
      DeviceGuard g(plans[i]->comm->device);
      launch_kernel(*plans[i], launches + i);
    }
    for (int32_t i = 0; i < count; ++i) {
      DeviceGuard g(plans[i]->comm->device);
      launch_moves(*plans[i]);
    }
  });
}

WEFT_API int weft_ring_attention_plan_destroy(WeftRingAttentionPlan* plan) {
  return guard([&] {
    if (!plan) return;
    std::unique_ptr<WeftRingAttentionPlan> owned(plan);
    DeviceGuard g(plan->comm->device);
    cudaError_t e = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(plan->params.stream));
    if (plan->mover) {
      const cudaError_t m = plan->mover->drain();
      if (e == cudaSuccess) e = m;
    }
    WEFT_CUDA(e);
  });
}

}  // extern "C"
