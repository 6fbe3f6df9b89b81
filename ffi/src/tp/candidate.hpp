// candidate.hpp — the interface every way of running a tensor-parallel op gives the picker: one
// Candidate per mover or path, each in its own file, each with the same functions:
//   cost    the cost model's estimate for this call (filling the candidate's configuration into a
//           Choice), or "not available: reason"
//   layout  the symmetric workspace the configuration needs
//   build   the plan's launch state (tensor maps on this rank's and the peers' memory), its kernel
//           loaded while nothing of the plan runs
//   launch  one launch on the plan's stream; copies (optional): the side-stream work that follows
//           every plan's kernels (weft_tp_plans_launch)
// The picker (picker.cpp) asks every candidate of the op, then takes the forced one or the
// cheapest that "auto" may take, and keeps the choice in the plan.
#pragma once

#include <string>

#include "tp/choice.hpp"
#include "weft.h"

struct WeftTpPlan;

namespace weft::tp {

struct Estimate {
  bool available = false;  // false: this candidate cannot run the call (reason says why)
  // false: "auto" never takes it here (reason says why: a measurement that the cost model does not
  // see, an option that asks for another mover, a placement it cannot complete in); forcing it works.
  bool auto_ok = true;
  // true: "auto" takes it only when no other fused candidate of the op qualifies (the CTA movers,
  // which the measured copy-engine and exchange rules step in front of).
  bool fallback = false;
  // true: the candidate is for another placement (one node against several); its reason is not
  // the one weft_tp_choose reports for why no fused kernel runs.
  bool elsewhere = false;
  double us = 0;
  std::string reason;

  static Estimate unavailable(std::string why) {
    Estimate e;
    e.reason = std::move(why);
    return e;
  }
  static Estimate not_here(std::string why) {
    Estimate e = unavailable(std::move(why));
    e.elsewhere = true;
    return e;
  }
  static Estimate of(double us) {
    Estimate e;
    e.available = true;
    e.us = us;
    return e;
  }
};

struct Candidate {
  const char* name;
  int op;            // WeftTpOp
  int path;          // WEFT_TP_PATH_FUSED or WEFT_TP_PATH_SEQUENTIAL
  int mover;         // what weft_tp_choose reports
  uint32_t forced_by;  // bit m: params.mover == m asks for this candidate (0: never asked for by mover)
  Estimate (*cost)(const Call& call, Choice& choice);
  void (*layout)(const Call& call, Choice& choice);
  void (*build)(WeftTpPlan& plan);
  void (*launch)(WeftTpPlan& plan, const WeftOpLaunch& launch);
  void (*copies)(WeftTpPlan& plan);  // nullptr: no side-stream work
};

constexpr uint32_t forced_by(int mover) { return 1u << mover; }

// The candidates, one per file.
extern const Candidate kAllGatherByCtas, kAllGatherByCopyEngine;               // all_gather.cpp
extern const Candidate kReduceScatterByCtas, kAllReduceByCtas;                 // scatter.cpp
extern const Candidate kReduceScatterByCopyEngine, kAllReduceByCopyEngine;     // copy_engine.cpp
extern const Candidate kAllReduceByExchange;                                   // exchange.cpp
extern const Candidate kAllGatherSequential, kReduceScatterSequential, kAllReduceSequential;  // sequential.cpp
extern const Candidate kAllGatherAcrossNodes, kReduceScatterAcrossNodes;       // node_plan.cpp

// What every single-node candidate checks first: the override fields' ranges and the combinations
// that no candidate takes (throws WEFT_E_INVALID naming the field). Idempotent; cheap.
void validate_overrides(const Call& call);

}  // namespace weft::tp
