// shared_gpu.h — the GPUs of this process that host more than one rank of a live communicator (ranks
// sharing one GPU, each with a share of its SMs: the one-GPU tests, a laptop-sized job). On such a GPU
// our kernels launch without programmatic dependent launch. With it, a rank's next kernel is launched
// once its current one stops waiting, and its CTAs take whatever SMs free up first, also those a peer
// rank's kernel on the same GPU still needs for CTAs that have not started; the next kernel then waits
// for that peer's next kernel (a landing buffer is reused only once every rank has entered), which
// cannot start before its current one ends: a cycle that only the wait bound breaks
// (bench/DECISIONS.md, "Ranks that share a GPU launch their kernels without programmatic dependent
// launch"). Without it a rank's kernel starts only on SMs its own finished kernel gave back.
// Header-only (the ladder programs include the launch headers without the library): the table is an
// inline function's static, one object in the library.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace weft::shared_gpu {

constexpr int kMaxDevices = 64;

inline std::atomic<int>* ranks_on_shared_gpu() {
  static std::atomic<int> table[kMaxDevices];
  return table;
}

// A connected communicator whose ranks share a GPU counts itself on its device (+1), until destroyed (-1).
inline void count_rank(int device, int delta) {
  if (device >= 0 && device < kMaxDevices) ranks_on_shared_gpu()[device].fetch_add(delta, std::memory_order_relaxed);
}

// Whether the current device hosts ranks that share it (read at each launch: a host atomic load).
inline bool current_device_is_shared() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return false;
  return ranks_on_shared_gpu()[device].load(std::memory_order_relaxed) > 0;
}

}  // namespace weft::shared_gpu
