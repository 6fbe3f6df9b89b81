// tuning.hpp — how many CTAs a collective gets, by payload size. Named data, one place; a call's
// `ctas` overrides it. NOTES: bench/NOTES-collectives.md has the sweeps these numbers come from.
#pragma once

#include <algorithm>
#include <cstdint>

#include "collectives/args.h"

namespace weft::comm {

struct Tuning {
  // staged one-shot all-reduce: one CTA per this many bytes of the input, up to staged_max_ctas
  uint64_t staged_bytes_per_cta = 32 << 10;
  uint32_t staged_max_ctas = 16;
  // direct ops: one CTA per this many bytes of one rank's payload, up to the kind's cap
  uint64_t direct_bytes_per_cta = 256 << 10;
  uint32_t push_max_ctas = 32;  // all-gather, all-to-all, broadcast: NVLink stores
  uint32_t pull_max_ctas = 64;  // reduce-scatter, two-shot all-reduce: NVLink loads need more in flight

  uint32_t ctas(uint32_t kind, uint32_t algo, uint64_t payload_bytes, uint32_t max_ctas) const {
    using namespace weft::coll;
    if (kind == kBarrier) return 1;
    uint64_t per = direct_bytes_per_cta;
    uint32_t cap = (kind == kReduceScatter || kind == kAllReduce) ? pull_max_ctas : push_max_ctas;
    if (algo == kStaged) {
      per = staged_bytes_per_cta;
      cap = staged_max_ctas;
    }
    const uint64_t want = (payload_bytes + per - 1) / per;
    return static_cast<uint32_t>(std::clamp<uint64_t>(want, 1, std::min(cap, max_ctas)));
  }
};

inline const Tuning& tuning() {
  static const Tuning t{};
  return t;
}

}  // namespace weft::comm
