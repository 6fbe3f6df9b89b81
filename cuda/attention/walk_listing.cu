// walk_listing.cu — test support: the engine's tile order and every tile's key blocks, listed on
// the host by the same decode and KvWalk code the kernel runs (weft_testing_attention_walk), so the
// CPU tests can check that every query is in exactly one tile and sees exactly its keys, at the
// right rows of the right maps.
#include "attention.h"
#include "kv_walk.cuh"
#include "launch.cuh"
#include "local.cuh"
#include "ring.cuh"

namespace weft::attn {

namespace {

template <class Cfg, class Policy>
int64_t list(const Params<typename Policy::State>& p, int32_t* out, int64_t capacity) {
  int64_t n = 0;
  const auto emit = [&](const int32_t (&row)[kWalkFields]) {
    if (n < capacity) {
      for (int i = 0; i < kWalkFields; ++i) out[n * kWalkFields + i] = row[i];
    }
    ++n;
  };
  for (int32_t index = 0; index < p.problem.tiles; ++index) {
    QTile t{};
    const TileStatus status = Policy::template decode<Cfg>(p, index, t);
    if (status != TileStatus::kOk) {
      emit({index, int32_t(status), 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0});
      continue;
    }
    KvWalk<Cfg, Policy, typename Policy::State> walk(p, t);
    KvBlock b{};
    bool any = false;
    while (walk.next(b)) {
      emit({index, 1, t.b, t.h, t.hk, t.row, t.rows, t.pos, b.source, b.row, b.col, b.pos, b.valid, b.gate, int32_t(b.masked),
            int32_t(t.lse)});
      any = true;
    }
    if (!any) emit({index, 1, t.b, t.h, t.hk, t.row, t.rows, t.pos, -1, 0, 0, 0, 0, -1, 0, int32_t(t.lse)});
  }
  return n;
}

}  // namespace

int64_t list_walk_local(const Problem& problem, int32_t head_dim, int32_t* out, int64_t capacity) {
  Params<LocalPolicy::State> p{};
  p.problem = problem;
  return head_dim == 64 ? list<ConfigD64, LocalPolicy>(p, out, capacity) : list<ConfigD128, LocalPolicy>(p, out, capacity);
}

int64_t list_walk_ring(const Problem& problem, const RingState& state, int32_t head_dim, int32_t* out, int64_t capacity) {
  Params<RingState> p{};
  p.problem = problem;
  p.state = state;
  return head_dim == 64 ? list<RingConfigD64, RingPolicy>(p, out, capacity) : list<ConfigD128, RingPolicy>(p, out, capacity);
}

}  // namespace weft::attn
