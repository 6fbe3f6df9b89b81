// walk_listing.cu — test support: the engine's tile order and every tile's key blocks, listed on
// the host by the same decode and KvWalk code the kernel runs (weft_testing_attention_walk), so the
// CPU tests can check that every query is in exactly one tile and sees exactly its keys, at the
// right rows of the right maps; and which simulated CTA the dynamic scheduler hands each tile to.
#include <vector>

#include "attention.h"
#include "kv_walk.cuh"
#include "launch.cuh"
#include "local.cuh"
#include "ring.cuh"
#include "scheduler.cuh"

namespace weft::attn {

namespace {

// The dynamic scheduler replayed on the host for `replay.ctas` simulated CTAs: whichever is free
// first (the lowest on a tie) takes the next index from a model of the device word (scheduler.cuh's
// fetch_limit and counter_after, the same arithmetic as atomicInc), stops at its first index >=
// tiles, and is busy for its tile's blocks + 1. Launches run back to back on one word that starts
// at 0 and is never reset. The word's limit assumes replay.limit_ctas fetchers (a test's fault). The
// first replay.late_ctas CTAs are free only at replay.late_at (the ring's movers join after their
// copies): they are fetchers all the same, and the word must still wrap.
struct Replayed {
  std::vector<int32_t> cta, order;  // per tile of the last launch: its CTA and its fetch position
  int32_t word_after[2] = {-1, -1};  // the word after launch 1 and 2
  int32_t missed = 0;                // tiles of the last launch nobody took
};

template <class Cfg, class Policy>
Replayed replay(const Params<typename Policy::State>& p, const WalkReplay& r, const std::vector<int32_t>& cost) {
  Replayed out;
  const int32_t tiles = p.problem.tiles;
  const uint32_t limit = fetch_limit(tiles, r.limit_ctas > 0 ? r.limit_ctas : r.ctas);
  uint32_t word = 0;
  for (int launch = 0; launch < 2; ++launch) {
    out.cta.assign(tiles, -1);
    out.order.assign(tiles, -1);
    std::vector<int64_t> free_at(r.ctas, 0);
    for (int32_t i = 0; i < r.ctas && i < r.late_ctas; ++i) free_at[i] = r.late_at;
    std::vector<bool> done(r.ctas, false);
    int32_t fetches = 0;
    for (int32_t active = r.ctas; active > 0;) {
      int32_t c = -1;
      for (int32_t i = 0; i < r.ctas; ++i) {
        if (!done[i] && (c < 0 || free_at[i] < free_at[c])) c = i;
      }
      const int32_t index = int32_t(word);
      word = counter_after(word, limit);
      if (index >= tiles) {
        done[c] = true;
        --active;
        continue;
      }
      if (out.cta[index] >= 0) out.cta[index] = -2;  // taken twice: the test sees -2
      else out.cta[index] = c;
      out.order[index] = fetches++;
      free_at[c] += cost[index] > 0 ? cost[index] + 1 : 0;
    }
    out.word_after[launch] = int32_t(word);
  }
  for (int32_t i = 0; i < tiles; ++i) out.missed += out.cta[i] == -1 ? 1 : 0;
  return out;
}

template <class Cfg, class Policy>
int64_t list(const Params<typename Policy::State>& p, const WalkReplay& r, int32_t* out, int64_t capacity) {
  int64_t n = 0;
  const auto emit = [&](const int32_t (&row)[kWalkFields]) {
    if (n < capacity) {
      for (int i = 0; i < kWalkFields; ++i) out[n * kWalkFields + i] = row[i];
    }
    ++n;
  };
  // A tile's cost for the replay: its blocks (0: an empty tile, which the producer skips).
  std::vector<int32_t> cost(p.problem.tiles, 0);
  for (int32_t index = 0; index < p.problem.tiles; ++index) {
    QTile t{};
    if (Policy::template decode<Cfg>(p, index, t) != TileStatus::kOk) continue;
    KvWalk<Cfg, Policy, typename Policy::State> walk(p, t);
    KvBlock b{};
    int32_t blocks = 0;
    while (walk.next(b)) ++blocks;
    cost[index] = blocks > 0 ? blocks : 1;  // a tile without blocks still writes its rows
  }
  Replayed rep;
  if (r.ctas > 0) rep = replay<Cfg, Policy>(p, r, cost);
  const auto cta = [&](int32_t i) { return r.ctas > 0 ? rep.cta[i] : -1; };
  const auto order = [&](int32_t i) { return r.ctas > 0 ? rep.order[i] : -1; };
  for (int32_t index = 0; index < p.problem.tiles; ++index) {
    QTile t{};
    const TileStatus status = Policy::template decode<Cfg>(p, index, t);
    if (status != TileStatus::kOk) {
      emit({index, int32_t(status), 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, cta(index), order(index)});
      continue;
    }
    KvWalk<Cfg, Policy, typename Policy::State> walk(p, t);
    KvBlock b{};
    bool any = false;
    while (walk.next(b)) {
      emit({index, 1, t.b, t.h, t.hk, t.row, t.rows, t.pos, b.source, b.row, b.col, b.pos, b.valid, b.gate, int32_t(b.masked),
            int32_t(t.lse), cta(index), order(index)});
      any = true;
    }
    if (!any) emit({index, 1, t.b, t.h, t.hk, t.row, t.rows, t.pos, -1, 0, 0, 0, 0, -1, 0, int32_t(t.lse), cta(index), order(index)});
  }
  // The replay's trailer: the word after each launch (0 when the scheduler resets itself) and the
  // tiles nobody took.
  if (r.ctas > 0) emit({-1, kWalkReplayRow, rep.word_after[0], rep.word_after[1], rep.missed, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, -1, -1});
  return n;
}

}  // namespace

int64_t list_walk_local(const Problem& problem, int32_t head_dim, const WalkReplay& r, int32_t* out, int64_t capacity) {
  Params<LocalPolicy::State> p{};
  p.problem = problem;
  return head_dim == 64 ? list<ConfigD64, LocalPolicy>(p, r, out, capacity) : list<ConfigD128, LocalPolicy>(p, r, out, capacity);
}

int64_t list_walk_ring(const Problem& problem, const RingState& state, int32_t head_dim, const WalkReplay& r, int32_t* out,
                       int64_t capacity) {
  Params<RingState> p{};
  p.problem = problem;
  p.state = state;
  return head_dim == 64 ? list<RingConfigD64, RingPolicy>(p, r, out, capacity) : list<ConfigD128, RingPolicy>(p, r, out, capacity);
}

}  // namespace weft::attn
