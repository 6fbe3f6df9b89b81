// config.cuh — compile-time shape of one engine instance and the shared-memory layout it implies.
#pragma once

#include <cstdint>

#include "../primitives/warpgroup.cuh"
#include "gemm.h"

namespace weft::gemm {

template <int TileN, int ClusterM, int ClusterN, bool BNMajor, bool OutF32>
struct Config {
  static constexpr int kTileM = gemm::kTileM;
  static constexpr int kTileN = TileN;
  static constexpr int kTileK = gemm::kTileK;

  // One producer warpgroup (TMA) and two consumers (wgmma), each consumer owning 64 rows of the tile.
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (1 + kConsumers) * wg::kThreads;
  static constexpr int kConsumerRows = kTileM / kConsumers;

  static constexpr int kClusterM = ClusterM;
  static constexpr int kClusterN = ClusterN;
  static constexpr int kClusterSize = ClusterM * ClusterN;
  static constexpr bool kShareA = ClusterN == 2;  // both CTAs have the same m0
  static constexpr bool kShareB = ClusterM == 2;  // both CTAs have the same n0
  static constexpr bool kBNMajor = BNMajor;
  static constexpr bool kOutF32 = OutF32;

  // One stage: A tile 128 x 64 and B tile TileN x 64 bf16, each row 128 bytes (one swizzle atom).
  static constexpr int kABytes = kTileM * kTileK * 2;
  static constexpr int kBBytes = kTileN * kTileK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // N-major B arrives as TileN/64 boxes of 64 N x 64 K.
  static constexpr int kBBoxBytes = 64 * kTileK * 2;

  // Epilogue staging: per consumer, two 64-row boxes of 128 bytes per row (64 bf16 or 32 fp32
  // columns, the widest box a 128-byte swizzle allows), double-buffered so that filling one overlaps
  // the TMA store of the other.
  static constexpr int kOutBoxCols = OutF32 ? 32 : 64;
  static constexpr int kOutBoxBytes = kConsumerRows * 128;
  static constexpr int kOutBoxes = kTileN / kOutBoxCols;
  static constexpr int kEpilogueBytes = kConsumers * 2 * kOutBoxBytes;
  // mbarriers an epilogue policy may use (Epilogue::kBarriers, e.g. TMA loads into its staging boxes).
  static constexpr int kEpilogueBarriers = 2 * kConsumers;

  // 227 KiB of opt-in shared memory per block on sm_90; 1 KiB slack to align the base to the 1024-byte
  // swizzle period, 1 KiB for the barriers.
  static constexpr int kSmemLimit = 227 * 1024;
  static constexpr int kReserved = 2048;
  static constexpr int kStagesFit = (kSmemLimit - kEpilogueBytes - kReserved) / kStageBytes;
  static constexpr int kStages = kStagesFit < 8 ? kStagesFit : 8;
  static constexpr int kSmemBytes = kStages * kStageBytes + kEpilogueBytes + kReserved;

  // setmaxnreg budgets: 128 x 40 + 256 x 232 = 64512 of the 65536 registers of an SM. Consumers
  // hold TileN/2 fp32 accumulators each (128 at TileN = 256).
  static constexpr int kProducerRegisters = 40;
  static constexpr int kConsumerRegisters = 232;

  static_assert(TileN == 64 || TileN == 128 || TileN == 256, "wgmma N of 64, 128 or 256");
  static_assert(kClusterSize <= 2 && (ClusterM == 1 || ClusterN == 1), "clusters of one or two CTAs");
  static_assert(!(kShareB && BNMajor && TileN < 128), "an N-major B half must be whole 64-column boxes");
  static_assert(kStages >= 3, "the ring needs at least three stages to overlap load and math");
  static_assert((2 * kStages + kEpilogueBarriers) * 8 <= 1024, "the barriers fit their kilobyte of kReserved");
  static_assert(kOutBoxes * kOutBoxCols == kTileN, "the tile splits into whole output boxes");
  static_assert(wg::kThreads * (kProducerRegisters + kConsumers * kConsumerRegisters) <= 65536,
                "register budgets exceed the register file");
};

// Shared memory, from a 1024-byte-aligned base:
//   [stage 0: A 16 KiB | B TileN*128 B] ... [stage S-1]   TMA destinations, 128-byte swizzled
//                                                           (once no more loads come: an epilogue
//                                                           policy's staging, ring_box)
//   [consumer 0: box 0 | box 1][consumer 1: box 0 | box 1] epilogue staging, 8 KiB each
//   [full[S] | empty[S] | epilogue[kEpilogueBarriers]]      mbarriers, 8 bytes each (epilogue: the
//                                                           policy's, Epilogue::kBarriers of them)
template <class Cfg>
struct SharedStorage {
  uint8_t* base;

  __device__ explicit SharedStorage(uint8_t* raw)
      : base(reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023))) {}

  __device__ uint8_t* a(uint32_t stage) const { return base + stage * Cfg::kStageBytes; }
  __device__ uint8_t* b(uint32_t stage) const { return base + stage * Cfg::kStageBytes + Cfg::kABytes; }
  __device__ uint8_t* out_box(int consumer, uint32_t buffer) const {
    return base + Cfg::kStages * Cfg::kStageBytes + (consumer * 2 + buffer) * Cfg::kOutBoxBytes;
  }
  // Box i of consumer c's share of the ring, which an epilogue policy may use as staging once no more
  // loads come (after the CTA's last tile's math, in both consumers): 2 x kOutBoxes boxes per consumer.
  __device__ uint8_t* ring_box(int consumer, int i) const {
    static_assert(2 * Cfg::kConsumers * Cfg::kOutBoxes * Cfg::kOutBoxBytes <= Cfg::kStages * Cfg::kStageBytes,
                  "a consumer's send and receive boxes fit its share of the ring");
    return base + (consumer * 2 * Cfg::kOutBoxes + i) * Cfg::kOutBoxBytes;
  }
  __device__ uint64_t* full(uint32_t stage) const {
    return reinterpret_cast<uint64_t*>(base + Cfg::kStages * Cfg::kStageBytes + Cfg::kEpilogueBytes) + stage;
  }
  __device__ uint64_t* empty(uint32_t stage) const { return full(0) + Cfg::kStages + stage; }
  __device__ uint64_t* epilogue_barrier(int i) const { return full(0) + 2 * Cfg::kStages + i; }
};

// The ring's shared-window addresses (what mbarrier and wgmma operands take), formed once by a loop
// that uses them every k-block: from SharedStorage's generic pointers each one re-derives the CTA's
// shared window (an S2UR and five uniform operations) in the consumers' issue path.
// One register: the barriers lie at a fixed offset from the ring (SharedStorage's layout).
template <class Cfg>
struct RingAddresses {
  static constexpr uint32_t kBarriers = uint32_t(Cfg::kStages * Cfg::kStageBytes + Cfg::kEpilogueBytes);
  uint32_t ring;

  __device__ explicit RingAddresses(const SharedStorage<Cfg>& s) : ring(static_cast<uint32_t>(__cvta_generic_to_shared(s.base))) {}

  __device__ uint32_t a(uint32_t stage) const { return ring + stage * uint32_t(Cfg::kStageBytes); }
  __device__ uint32_t b(uint32_t stage) const { return a(stage) + uint32_t(Cfg::kABytes); }
  __device__ uint32_t full(uint32_t stage) const { return ring + kBarriers + stage * 8u; }
  __device__ uint32_t empty(uint32_t stage) const { return full(uint32_t(Cfg::kStages) + stage); }
};

}  // namespace weft::gemm
