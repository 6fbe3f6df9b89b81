// picker.cpp — tp::choose: asks every candidate of the op for its estimate (candidate.hpp), then
// takes the one the caller forced, or the cheapest that "auto" may take, against the sequential
// path. weft_tp_choose reports the result; weft_tp_plan_create computes it once and keeps it.
#include <cstdint>
#include <vector>

#include "fused/fused.h"
#include "status.hpp"
#include "tp/candidate.hpp"
#include "tp/cost_model.hpp"

namespace weft::tp {

namespace {

// Every candidate of an op, in the order ties go: the multi-node plan (the only one that runs
// across nodes, and the one that says why an override cannot), the fused movers, then the
// sequential path.
std::vector<const Candidate*> candidates_of(int op) {
  switch (op) {
    case WEFT_TP_ALL_GATHER_GEMM:
      return {&kAllGatherAcrossNodes, &kAllGatherByCopyEngine, &kAllGatherByCtas, &kAllGatherSequential};
    case WEFT_TP_GEMM_REDUCE_SCATTER:
      return {&kReduceScatterAcrossNodes, &kReduceScatterByCopyEngine, &kReduceScatterByCtas, &kReduceScatterSequential};
    default:
      return {&kAllReduceByExchange, &kAllReduceByCopyEngine, &kAllReduceByCtas, &kAllReduceSequential};
  }
}

struct Option {
  const Candidate* candidate;
  Choice choice;
  Estimate estimate;
};

// "auto"'s fused pick: the cheapest available candidate that auto may take, fallbacks (the CTA
// movers) only where no other qualifies; ties go to the earlier candidate.
const Option* auto_pick(const std::vector<Option>& fused) {
  for (const bool fallback : {false, true}) {
    const Option* best = nullptr;
    for (const Option& o : fused) {
      if (!o.estimate.available || !o.estimate.auto_ok || o.estimate.fallback != fallback) continue;
      if (!best || o.estimate.us < best->estimate.us) best = &o;
    }
    if (best) return best;
  }
  return nullptr;
}

}  // namespace

Problem problem_of(const WeftTpParams& p, const Placement& place) {
  Problem pr{};
  pr.op = p.op;
  pr.world = place.world;
  pr.rank = place.rank;
  pr.m = p.m;
  pr.n = p.n;
  pr.k = p.k;
  pr.m_shard = ceil_div(p.m, place.world);
  pr.b_nk = (p.flags & WEFT_GEMM_B_NK) != 0;
  return pr;
}

std::string fused_obstacle(const Problem& p) {
  if (p.world > fused::kMaxRanks) return "the fused kernels take at most 8 ranks";
  if (p.k % 8 != 0) return "k is not a multiple of 8 (rows of a must be 16-byte multiples for TMA)";
  if (p.n % 8 != 0) return "n is not a multiple of 8 (rows of b / out must be 16-byte multiples for TMA)";
  const bool row_sharded = p.op != WEFT_TP_GEMM_ALL_REDUCE;
  if (row_sharded && p.m % (int64_t(gemm::kTileM) * p.world) != 0)
    return "m is not a multiple of 128 x world size (each rank's rows must be whole 128-row tiles)";
  return "";
}

void validate_overrides(const Call& call) {
  const WeftTpParams& params = call.params;
  const Problem& p = call.problem;
  const int sms = call.place.sm_count;
  WEFT_REQUIRE(params.path >= WEFT_TP_PATH_AUTO && params.path <= WEFT_TP_PATH_SEQUENTIAL,
               "path must be WEFT_TP_PATH_AUTO, _FUSED or _SEQUENTIAL (got %d)", params.path);
  WEFT_REQUIRE((params.mover >= WEFT_TP_MOVER_AUTO && params.mover <= WEFT_TP_MOVER_COPY_ENGINE) ||
                   params.mover == WEFT_TP_MOVER_EXCHANGE,
               "mover must be WEFT_TP_MOVER_AUTO, _CTAS, _COPY_ENGINE or _EXCHANGE (got %d)", params.mover);
  WEFT_REQUIRE(params.mover != WEFT_TP_MOVER_EXCHANGE || p.op == WEFT_TP_GEMM_ALL_REDUCE,
               "mover 'exchange' applies to gemmAllReduce only");
  WEFT_REQUIRE(params.mover != WEFT_TP_MOVER_EXCHANGE || params.tile_n != 256 ||
                   ceil_div(p.m, gemm::kTileM) * ceil_div(p.n, 256) <= sms,
               "mover 'exchange' takes tile_n 256 only when its tiles fit one wave: %lld tiles of 128 x 256 on %d SMs",
               static_cast<long long>(ceil_div(p.m, gemm::kTileM) * ceil_div(p.n, 256)), sms);
  WEFT_REQUIRE(params.comm_ctas >= 0 && params.comm_ctas < sms, "comm_ctas must be in [0, %d) (got %d)", sms,
               params.comm_ctas);
  WEFT_REQUIRE(params.comm_ctas == 0 || (p.op == WEFT_TP_ALL_GATHER_GEMM && params.mover != WEFT_TP_MOVER_COPY_ENGINE),
               "comm_ctas applies to the all-gather's CTA mover only");
  WEFT_REQUIRE(params.tile_n == 0 || params.tile_n == 64 || params.tile_n == 128 || params.tile_n == 256,
               "tile_n must be 0 (auto), 64, 128 or 256 (got %d)", params.tile_n);
  WEFT_REQUIRE(params.group_m >= 0, "group_m must be >= 0 (got %d)", params.group_m);
}

Choice choose(const WeftTpParams& params, const Placement& place) {
  const Call call{params, problem_of(params, place), place};
  std::vector<Option> fused;
  Option sequential{nullptr, {}, {}};
  for (const Candidate* c : candidates_of(params.op)) {
    Option o{c, Choice{}, Estimate{}};
    o.choice.candidate = c;
    o.choice.path = c->path;
    o.choice.mover = c->mover;
    o.estimate = c->cost(call, o.choice);
    if (c->path == WEFT_TP_PATH_SEQUENTIAL) sequential = std::move(o);
    else fused.push_back(std::move(o));
  }
  bool fused_available = false;
  for (const Option& o : fused) fused_available = fused_available || o.estimate.available;
  if (!fused_available && !sequential.estimate.available)
    WEFT_FAIL(WEFT_E_UNSUPPORTED, "weft_tp: %s", fused.empty() ? sequential.estimate.reason.c_str() : fused.front().estimate.reason.c_str());
  // Why no fused kernel can take the call: the first candidate's reason (the shape's, for them all).
  std::string reason;
  if (!fused_available) {
    for (const Option& o : fused)
      if (!o.estimate.elsewhere && !o.estimate.reason.empty()) {
        reason = o.estimate.reason;
        break;
      }
  }

  const Option* best_fused = nullptr;
  if (fused_available) {
    if (params.mover != WEFT_TP_MOVER_AUTO) {
      // The candidate the mover asks for: the one for this placement where two answer to it.
      for (const Option& o : fused)
        if ((o.candidate->forced_by & forced_by(params.mover)) && (!best_fused || best_fused->estimate.elsewhere)) best_fused = &o;
      WEFT_REQUIRE(best_fused, "mover %d does not run %s", params.mover, params.op == WEFT_TP_ALL_GATHER_GEMM ? "allGatherGemm" : "this op");
      WEFT_REQUIRE(best_fused->estimate.available, "%s", best_fused->estimate.reason.c_str());
    } else {
      best_fused = auto_pick(fused);
    }
  }
  WEFT_REQUIRE(params.path != WEFT_TP_PATH_FUSED || best_fused, "path 'fused' is not available here: %s",
               fused_available ? "no fused mover can run this call where the ranks are placed" : reason.c_str());

  const Option* pick = nullptr;
  if (params.path == WEFT_TP_PATH_FUSED) {
    pick = best_fused;
  } else if (params.path == WEFT_TP_PATH_SEQUENTIAL || !best_fused) {
    WEFT_REQUIRE(sequential.estimate.available, "%s", sequential.estimate.reason.c_str());
    pick = &sequential;
  } else {
    const bool fused_wins = !sequential.estimate.available || best_fused->estimate.us <= sequential.estimate.us;
    pick = fused_wins ? best_fused : &sequential;
  }

  Choice c = pick->choice;
  c.fused_available = fused_available;
  c.reason = reason;
  c.fused_us = best_fused ? best_fused->estimate.us : 0;
  c.sequential_us = sequential.estimate.available ? sequential.estimate.us : 0;
  c.candidate->layout(call, c);
  if (c.layout.total == 0) c.layout.total = 256;
  return c;
}

}  // namespace weft::tp
