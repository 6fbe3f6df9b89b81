#include "attention_params.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "device_guard.hpp"
#include "status.hpp"
#include "tensor_map.hpp"

namespace weft::attn_abi {

namespace {

constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;

int device_of(const char* name, uint64_t address) {
  const int dev = pointer_device(reinterpret_cast<const void*>(address));
  WEFT_REQUIRE(dev >= 0, "%s (0x%llx) must be device memory", name, static_cast<unsigned long long>(address));
  return dev;
}

void same_device(const char* name, uint64_t address, int device) {
  const int d = device_of(name, address);
  WEFT_REQUIRE(d == device, "%s is on device %d but q is on device %d: every tensor must be on one device", name, d,
               device);
}

}  // namespace

Validated validate(const WeftAttentionParams* p) {
  WEFT_REQUIRE(p, "params must not be NULL");
  WEFT_REQUIRE(p->size == sizeof(WeftAttentionParams),
               "params->size is %u but this library's WeftAttentionParams has %zu bytes", p->size,
               sizeof(WeftAttentionParams));
  WEFT_REQUIRE(p->version == 3, "params->version is %u; this library reads version 3 (seqused_k at the end)", p->version);
  WEFT_REQUIRE(p->q && p->k && p->v && p->out, "q, k, v and out must not be 0");
  WEFT_REQUIRE((p->flags & ~uint32_t(WEFT_ATTENTION_CAUSAL)) == 0, "flags has unknown bits (0x%x)", p->flags);
  WEFT_REQUIRE(p->reserved == 0, "reserved must be 0");
  WEFT_REQUIRE(attn::head_dim_supported(p->head_dim), "head_dim must be 64 or 128 (got %d)", p->head_dim);
  WEFT_REQUIRE(p->batch >= 1 && p->heads >= 1 && p->kv_heads >= 1, "batch, heads and kv_heads must be >= 1 (got %d, %d, %d)",
               p->batch, p->heads, p->kv_heads);
  WEFT_REQUIRE(p->heads % p->kv_heads == 0, "heads (%d) must be a multiple of kv_heads (%d)", p->heads, p->kv_heads);
  WEFT_REQUIRE(p->seqlen_q >= 1 && p->seqlen_k >= 1, "seqlen_q and seqlen_k must be >= 1 (got %d, %d)", p->seqlen_q,
               p->seqlen_k);
  WEFT_REQUIRE(std::isfinite(p->scale) && p->scale >= 0.0f, "scale must be > 0, or 0 for 1 / sqrt(head_dim) (got %g)",
               double(p->scale));
  WEFT_REQUIRE(p->max_ctas >= 0, "max_ctas must be >= 0 (got %d)", p->max_ctas);
  for (const auto& [name, address] : {std::pair{"q", p->q}, {"k", p->k}, {"v", p->v}, {"out", p->out}}) {
    WEFT_REQUIRE(address % 16 == 0, "%s (0x%llx) must be 16-byte aligned (TMA)", name, static_cast<unsigned long long>(address));
  }
  WEFT_REQUIRE(p->lse % 4 == 0, "lse must be 4-byte aligned");
  Validated v{};
  v.varlen = p->cu_seqlens_q != 0;
  WEFT_REQUIRE(v.varlen || p->cu_seqlens_k == 0, "cu_seqlens_k needs cu_seqlens_q (varlen)");
  WEFT_REQUIRE(p->seqused_k == 0 || p->cu_seqlens_k != 0,
               "seqused_k needs cu_seqlens_k (each sequence's first key row) and cu_seqlens_q (varlen)");
  WEFT_REQUIRE(p->seqused_k % 4 == 0, "seqused_k must be a 4-byte aligned int32 array");
  if (v.varlen) {
    WEFT_REQUIRE(p->total_q >= 1 && p->total_k >= 1, "varlen: total_q and total_k (rows of q and k) must be >= 1");
    WEFT_REQUIRE(p->cu_seqlens_q % 4 == 0 && p->cu_seqlens_k % 4 == 0, "cu_seqlens must be 4-byte aligned int32 arrays");
    v.rows_q = p->total_q;
    v.rows_k = p->total_k;
  } else {
    v.rows_q = int64_t(p->batch) * p->seqlen_q;
    v.rows_k = int64_t(p->batch) * p->seqlen_k;
  }
  WEFT_REQUIRE(v.rows_q <= kMaxDim && v.rows_k <= kMaxDim, "rows of q and k must be below 2^31");
  WEFT_REQUIRE(int64_t(p->heads) * p->head_dim <= kMaxDim, "heads x head_dim must be below 2^31");
  v.device = device_of("q", p->q);
  same_device("k", p->k, v.device);
  same_device("v", p->v, v.device);
  same_device("out", p->out, v.device);
  if (p->lse) same_device("lse", p->lse, v.device);
  if (p->cu_seqlens_q) same_device("cu_seqlens_q", p->cu_seqlens_q, v.device);
  if (p->cu_seqlens_k) same_device("cu_seqlens_k", p->cu_seqlens_k, v.device);
  if (p->seqused_k) same_device("seqused_k", p->seqused_k, v.device);
  if (p->stream) {
    int sd = -1;
    WEFT_CUDA(cudaStreamGetDevice(reinterpret_cast<cudaStream_t>(p->stream), &sd));
    WEFT_REQUIRE(sd == v.device, "stream belongs to device %d but the tensors are on device %d", sd, v.device);
  }
  return v;
}

attn::Problem problem(const WeftAttentionParams& p, const Validated& v, const attn::TileShape& t) {
  attn::Problem q{};
  q.batch = p.batch;
  q.heads = p.heads;
  q.kv_heads = p.kv_heads;
  q.seqlen_q = p.seqlen_q;
  q.seqlen_k = p.seqlen_k;
  if (v.varlen) {
    q.cu_q = reinterpret_cast<const int32_t*>(p.cu_seqlens_q);
    q.cu_k = reinterpret_cast<const int32_t*>(p.cu_seqlens_k ? p.cu_seqlens_k : p.cu_seqlens_q);
    q.used_k = reinterpret_cast<const int32_t*>(p.seqused_k);
  }
  q.m_blocks = (p.seqlen_q + t.block_m - 1) / t.block_m;
  const int64_t tiles = int64_t(p.batch) * p.heads * q.m_blocks;
  WEFT_REQUIRE(tiles <= kMaxDim, "batch x heads x ceil(seqlen_q / %d) must be below 2^31 tiles", t.block_m);
  q.tiles = int32_t(tiles);
  int l2 = 0;
  WEFT_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, v.device));
  q.causal = (p.flags & WEFT_ATTENTION_CAUSAL) != 0;
  q.section = attn::section_pairs(p.seqlen_k, p.head_dim, p.heads / p.kv_heads, l2, p.batch * p.heads, q.causal);
  const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(float(p.head_dim));
  q.scale_log2 = scale * 1.4426950408889634f;
  q.lse = reinterpret_cast<float*>(p.lse);
  q.lse_head_stride = v.varlen ? v.rows_q : p.seqlen_q;
  q.lse_batch_stride = int64_t(p.heads) * p.seqlen_q;
  q.o = reinterpret_cast<void*>(p.out);
  q.o_row_stride = int64_t(p.heads) * p.head_dim;
  q.rows_q = int32_t(v.rows_q);
  q.rows_k = int32_t(v.rows_k);
  return q;
}

int grid_ctas(const WeftAttentionParams& p, const attn::Problem& problem) {
  int resident = 0;
  WEFT_CUDA(attn::resident_ctas(p.head_dim, &resident));
  int ctas = std::min(resident, problem.tiles);
  if (p.max_ctas > 0) ctas = std::min(ctas, p.max_ctas);
  return std::max(ctas, 1);
}

attn::LocalLaunch local_launch(const WeftAttentionParams& p, const Validated& v) {
  const attn::TileShape t = attn::tile_shape(p.head_dim);
  const attn::BoxRows rows = attn::box_rows(t);
  attn::LocalLaunch l{};
  l.problem = problem(p, v, t);
  l.head_dim = p.head_dim;
  const uint64_t q_cols = uint64_t(p.heads) * p.head_dim, kv_cols = uint64_t(p.kv_heads) * p.head_dim;
  const uint32_t q_box[2] = {64, rows.q}, o_box[2] = {64, rows.o}, kv_box[2] = {64, rows.kv};
  encode_bf16(&l.q, reinterpret_cast<const void*>(p.q), q_cols, v.rows_q, q_cols, q_box, "q");
  encode_bf16(&l.o, reinterpret_cast<const void*>(p.out), q_cols, v.rows_q, q_cols, o_box, "out");
  encode_bf16(&l.k, reinterpret_cast<const void*>(p.k), kv_cols, v.rows_k, kv_cols, kv_box, "k");
  encode_bf16(&l.v, reinterpret_cast<const void*>(p.v), kv_cols, v.rows_k, kv_cols, kv_box, "v");
  l.ctas = grid_ctas(p, l.problem);
  l.completion = attn::CompletionWords{nullptr, 0, nullptr};  // weft_attention sets the launch's
  l.tile_counter = nullptr;                                   // and its scheduler word
  l.stream = reinterpret_cast<cudaStream_t>(p.stream);
  return l;
}

}  // namespace weft::attn_abi
