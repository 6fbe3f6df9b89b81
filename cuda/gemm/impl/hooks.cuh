// Implementation of hooks.cuh's building blocks. Read the contract there.
#pragma once

namespace weft::gemm {

__device__ inline bool RowSignalGate::wait(const TileCoord& t) const {
  const uint64_t* word = signals + (t.m0 - first_row) / rows_per_signal;
  return sys::wait_at_least(word, epoch, budget) == sys::WaitResult::kOk;
}

__device__ inline uint64_t* HalfTileFlagPublisher::flag(const TileCoord& t, int consumer) const {
  return flags + (int64_t(t.m0 / 64) + consumer) * tiles_n + t.tile_n;
}

__device__ inline void HalfTileFlagPublisher::publish(const TileCoord& t, int consumer) const {
  // The caller's data is complete and fenced for system scope (after_tile_stored's guarantee:
  // gemm::settle's __threadfence_system), so that fence and this store are the release.
  sys::signal_store_fenced(flag(t, consumer), epoch);
}

}  // namespace weft::gemm
