// tuning.hpp — how many CTAs a collective gets, by payload size. Named data, one place; a call's
// `ctas` overrides it. bench/DECISIONS.md, "One CTA per 16 KiB of payload, at most 64", has the sweeps
// these numbers come from.
#pragma once

#include <algorithm>
#include <cstdint>

#include "collectives/args.h"

namespace weft::comm {

struct Tuning {
  // all-reduce takes the staged one-shot path up to this many bytes per rank (and the
  // communicator's staging capacity); above, the direct two-shot path
  // (2xH200, 8 KiB .. 1 MiB: staged 9.0 / 11.4 / 11.6 / 12.4 / 15.3 us, direct 10.6 / 12.6 /
  // 13.1 / 14.1 / 15.8 us: staged wins up to 512 KiB, a tie at 1 MiB)
  uint64_t staged_auto_bytes = 512 << 10;
  // staged one-shot all-reduce: one CTA per this many bytes of the input, up to staged_max_ctas
  uint64_t staged_bytes_per_cta = 32 << 10;
  uint32_t staged_max_ctas = 16;
  // direct ops: one CTA per this many bytes of one rank's payload, up to the kind's cap. A CTA
  // moves ~25 GB/s over NVLink on its own (sweep of 2026-11-30: 1 CTA takes 21 us for 256 KiB),
  // so small payloads still get many CTAs.
  uint64_t direct_bytes_per_cta = 16 << 10;
  // 2xH200 sweep at 64 / 256 MiB (bench/results/collectives.md): all-gather 302/319 GB/s at 32
  // CTAs, 327/348 at 64, 335/357 at 132; reduce-scatter 254/269 at 32, 299/323 at 64, 305/328 at
  // 132. 64 takes nearly all of it and leaves half the SMs to whatever runs beside.
  uint32_t push_max_ctas = 64;  // all-gather, all-to-all, broadcast: NVLink stores
  uint32_t pull_max_ctas = 64;  // reduce-scatter, two-shot all-reduce: NVLink loads

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
