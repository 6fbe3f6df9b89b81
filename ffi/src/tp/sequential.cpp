// sequential.cpp — the sequential path of a tensor-parallel op: our GEMM and our collective on the
// plan's stream, with padded copies where TMA needs 16-byte rows. Its cost, its workspace (the
// collective's symmetric buffer and the padded operands) and its launch; one candidate per op.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "comm/tuning.hpp"
#include "status.hpp"
#include "tp/candidate.hpp"
#include "tp/cost_model.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

namespace {

// Our GEMM over every SM, then (or after) our collective as weft_collective would pick it.
double sequential_us(const Problem& p, int sms, const Choice& c) {
  double us = 0;
  const int copies = int(c.pad_a) + int(c.pad_b) + int(c.pad_out);
  us += copies * kMachine.step_us;
  const int W = p.world;
  const int64_t m_gemm = p.m;
  us += gemm_us(m_gemm, p.n, p.k, gemm_tile(m_gemm, p.n, sms, true), sms);
  double coll_bytes = 0;
  switch (p.op) {
    case WEFT_TP_ALL_GATHER_GEMM:
      coll_bytes = double(W - 1) * p.m_shard * c.kp * 2;
      us += kMachine.collective_us + transfer_us(coll_bytes, kMachine.nvlink_gbs) + kMachine.step_us;  // + publish
      break;
    case WEFT_TP_GEMM_REDUCE_SCATTER:
      coll_bytes = double(W - 1) * p.m_shard * c.np * 2;
      us += kMachine.collective_us + transfer_us(coll_bytes, kMachine.nvlink_gbs);
      break;
    default: {
      const double bytes = double(p.m) * c.np * 2;
      const bool staged = bytes <= double(comm::tuning().staged_auto_bytes);  // as weft_collective picks it
      us += kMachine.collective_us + transfer_us(staged ? (W - 1) * bytes : 2.0 * (W - 1) / W * bytes, kMachine.nvlink_gbs);
    }
  }
  return us + kMachine.step_us;
}

Estimate cost(const Call& call, Choice& c) {
  if (call.place.nodes > 1) return Estimate::not_here("there is no sequential path across nodes (path 'fused' or 'auto')");
  validate_overrides(call);
  const Problem& p = call.problem;
  c.kp = (p.k + 7) / 8 * 8;
  c.np = (p.n + 7) / 8 * 8;
  c.pad_a = c.kp != p.k;
  c.pad_b = p.b_nk ? c.kp != p.k : c.np != p.n;
  c.pad_out = c.np != p.n;
  c.comm_ctas = 0;
  c.gemm_ctas = call.place.sm_count;
  c.tile_n = call.params.tile_n;  // 0: the GEMM's own heuristic
  c.group_m = call.params.group_m;
  return Estimate::of(sequential_us(p, call.place.sm_count, c));
}

// gathered (all-gather: the gathered rows of A) or partial (reduce-scatter: the GEMM's sums; the
// all-reduce's padded buffer), then the padded copies of operands whose rows are not a multiple of
// 16 bytes, zeroed once so that padding columns add nothing to a dot product.
void layout(const Call& call, Choice& c) {
  const Problem& p = call.problem;
  Layout& l = c.layout;
  const int W = p.world;
  const int64_t a_rows = p.op == WEFT_TP_ALL_GATHER_GEMM ? p.m_shard : p.m;
  switch (p.op) {
    case WEFT_TP_ALL_GATHER_GEMM: add(l, l.staging, uint64_t(W) * p.m_shard * c.kp * 2); break;   // gathered A
    case WEFT_TP_GEMM_REDUCE_SCATTER: add(l, l.staging, uint64_t(W) * p.m_shard * c.np * 2); break;  // partial
    default:
      if (c.pad_out) add(l, l.staging, uint64_t(p.m) * c.np * 2);  // the padded all-reduce buffer
  }
  if (c.pad_a) add(l, l.a_pad, uint64_t(a_rows) * c.kp * 2);
  if (c.pad_b) add(l, l.b_pad, p.b_nk ? uint64_t(p.n) * c.kp * 2 : uint64_t(p.k) * c.np * 2);
  if (c.pad_out && p.op != WEFT_TP_GEMM_ALL_REDUCE) {
    const int64_t rows = p.op == WEFT_TP_ALL_GATHER_GEMM ? p.m : p.m_shard;
    add(l, l.out_pad, uint64_t(rows) * c.np * 2);
  }
}

// dst [rows, dst_ld] <- src [rows, src_ld], `cols` bf16 each, on the plan's stream.
void copy_rows(const WeftTpPlan& plan, void* dst, int64_t dst_ld, const void* src, int64_t src_ld, int64_t cols,
               int64_t rows) {
  WEFT_CUDA(cudaMemcpy2DAsync(dst, size_t(dst_ld) * 2, src, size_t(src_ld) * 2, size_t(cols) * 2, size_t(rows),
                              cudaMemcpyDeviceToDevice, plan.stream));
}

// Our collective on the plan's stream; `last` = nothing follows it, so it publishes the launch's own
// completion, else the scratch words.
void collective(WeftTpPlan& plan, int kind, uint64_t in, uint64_t out, uint64_t count, const WeftOpLaunch& launch,
                bool last) {
  WeftCollectiveParams cp{};
  cp.size = sizeof cp;
  cp.version = 1;
  cp.kind = kind;
  cp.dtype = WEFT_BF16;
  cp.count = count;
  cp.input = in;
  cp.output = out;
  cp.stream = reinterpret_cast<uint64_t>(plan.stream);
  const gemm::CompletionWords w = last ? launch_words(launch) : scratch_words(plan);
  cp.done = reinterpret_cast<uint64_t>(w.done);
  cp.seq = w.seq;
  cp.arrivals = reinterpret_cast<uint64_t>(w.arrivals);
  const int status = weft_collective(plan.comm, &cp);
  if (status != WEFT_OK) WEFT_FAIL(status, "%s", weft_last_error());
}

void gemm_call(const WeftTpPlan& plan) {
  const WeftGemmParams g = sequential_gemm(plan);
  const int status = weft_gemm(&g, nullptr);
  if (status != WEFT_OK) WEFT_FAIL(status, "%s", weft_last_error());
}

}  // namespace

// The sequential path's GEMM: operands after padding (a_pad, b_pad), output where the collective
// or the copy back reads it.
WeftGemmParams sequential_gemm(const WeftTpPlan& plan) {
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  char* ws = plan.workspace;
  const auto at = [&](const Region& r) { return reinterpret_cast<uint64_t>(ws + r.offset); };
  WeftGemmParams g = WEFT_GEMM_PARAMS_INIT;
  g.a = pa.a;
  g.lda = p.k;
  g.b = pa.b;
  g.ldb = p.b_nk ? p.k : p.n;
  if (ch.pad_a) {
    g.a = at(ch.layout.a_pad);
    g.lda = ch.kp;
  }
  if (ch.pad_b) {
    g.b = at(ch.layout.b_pad);
    g.ldb = p.b_nk ? ch.kp : ch.np;
  }
  switch (p.op) {
    case WEFT_TP_ALL_GATHER_GEMM:
      g.a = at(ch.layout.staging);  // the gathered rows
      g.c = ch.pad_out ? at(ch.layout.out_pad) : pa.out;
      break;
    case WEFT_TP_GEMM_REDUCE_SCATTER:
      g.c = at(ch.layout.staging);  // the partial sums the reduce-scatter reads
      break;
    default:
      g.c = ch.pad_out ? at(ch.layout.staging) : pa.out;
  }
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.ldc = ch.np;
  g.flags = p.b_nk ? WEFT_GEMM_B_NK : 0;
  g.tile_n = ch.tile_n;
  g.group_m = ch.group_m;
  g.stream = reinterpret_cast<uint64_t>(plan.stream);
  return g;
}

namespace {

// Sets the GEMM kernel's shared-memory opt-in now, which loads it while nothing of this plan runs
// (see build_and_preload() in abi.cpp).
void build(WeftTpPlan& plan) {
  const WeftGemmParams g = sequential_gemm(plan);
  WeftGemmChoice choice{};
  choice.size = sizeof choice;
  choice.version = 1;
  const int status = weft_gemm_choose(&g, &choice);
  if (status != WEFT_OK) WEFT_FAIL(status, "%s", weft_last_error());
}

void launch(WeftTpPlan& plan, const WeftOpLaunch& launch) {
  ++plan.epoch;
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  char* ws = plan.workspace;
  void* out = reinterpret_cast<void*>(pa.out);
  const WeftGemmParams g = sequential_gemm(plan);
  const int64_t a_rows = p.op == WEFT_TP_ALL_GATHER_GEMM ? p.m_shard : p.m;
  if (ch.pad_a) copy_rows(plan, ws + ch.layout.a_pad.offset, ch.kp, reinterpret_cast<const void*>(pa.a), p.k, p.k, a_rows);
  if (ch.pad_b) {
    const int64_t rows = p.b_nk ? p.n : p.k, cols = p.b_nk ? p.k : p.n;
    copy_rows(plan, ws + ch.layout.b_pad.offset, g.ldb, reinterpret_cast<const void*>(pa.b), cols, cols, rows);
  }
  switch (p.op) {
    case WEFT_TP_ALL_GATHER_GEMM: {
      // The rows to gather: a, or its padded copy (which has the same row stride as the gathered rows).
      const uint64_t rows = reinterpret_cast<uint64_t>(ch.pad_a ? static_cast<const void*>(ws + ch.layout.a_pad.offset)
                                                                : reinterpret_cast<const void*>(pa.a));
      collective(plan, WEFT_ALL_GATHER, rows, g.a, uint64_t(p.m_shard) * g.lda, launch, false);
      gemm_call(plan);
      if (ch.pad_out) copy_rows(plan, out, p.n, reinterpret_cast<const void*>(g.c), ch.np, p.n, p.m);
      if (pa.gathered) copy_rows(plan, reinterpret_cast<void*>(pa.gathered), p.k, reinterpret_cast<const void*>(g.a), g.lda, p.k, p.m);
      WEFT_CUDA(fused::launch_publish(plan.scratch_dev, plan.epoch, launch_words(launch), plan.stream));
      break;
    }
    case WEFT_TP_GEMM_REDUCE_SCATTER: {
      gemm_call(plan);  // into the partial sums [W * m_shard, np]; rows past m stay zero
      void* target = ch.pad_out ? ws + ch.layout.out_pad.offset : out;
      collective(plan, WEFT_REDUCE_SCATTER, g.c, reinterpret_cast<uint64_t>(target),
                 uint64_t(p.m_shard) * ch.np, launch, !ch.pad_out);
      if (ch.pad_out) {
        copy_rows(plan, out, p.n, target, ch.np, p.n, p.m_shard);
        WEFT_CUDA(fused::launch_publish(plan.scratch_dev, plan.epoch, launch_words(launch), plan.stream));
      }
      break;
    }
    default: {
      gemm_call(plan);
      collective(plan, WEFT_ALL_REDUCE, g.c, g.c,
                 uint64_t(p.m) * ch.np, launch, !ch.pad_out);
      if (ch.pad_out) {
        copy_rows(plan, out, p.n, reinterpret_cast<const void*>(g.c), ch.np, p.n, p.m);
        WEFT_CUDA(fused::launch_publish(plan.scratch_dev, plan.epoch, launch_words(launch), plan.stream));
      }
    }
  }
}

}  // namespace

const Candidate kAllGatherSequential{"all-gather, then our GEMM", WEFT_TP_ALL_GATHER_GEMM, WEFT_TP_PATH_SEQUENTIAL,
                                     WEFT_TP_MOVER_NONE, 0, cost, layout, build, launch, nullptr};
const Candidate kReduceScatterSequential{"our GEMM, then reduce-scatter", WEFT_TP_GEMM_REDUCE_SCATTER, WEFT_TP_PATH_SEQUENTIAL,
                                         WEFT_TP_MOVER_NONE, 0, cost, layout, build, launch, nullptr};
const Candidate kAllReduceSequential{"our GEMM, then all-reduce", WEFT_TP_GEMM_ALL_REDUCE, WEFT_TP_PATH_SEQUENTIAL,
                                     WEFT_TP_MOVER_NONE, 0, cost, layout, build, launch, nullptr};

}  // namespace weft::tp
