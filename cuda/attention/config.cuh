// config.cuh — compile-time shape of one attention engine instance and the shared-memory layout it
// implies.
#pragma once

#include <cstdint>

#include "../primitives/warpgroup.cuh"

namespace weft::attn {

// HeadDim: 64, 128 (D of Q, K and V). BlockM: query rows per CTA tile, 64 per consumer warpgroup.
// BlockN: keys per block of the KV loop. The instantiated shapes are in launch.cuh, with the
// measurements that chose them; see the kernel header (kernel.cuh) for the napkin math.
// ConsumerRegisters: the consumers' setmaxnreg budget where the default below does not fit the tile
// (0: the default).
template <int HeadDim, int BlockM, int BlockN, int ConsumerRegisters = 0>
struct Config {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;

  // One producer warpgroup (TMA) and BlockM / 64 consumers (wgmma + softmax).
  static constexpr int kConsumers = BlockM / 64;
  static constexpr int kThreads = (1 + kConsumers) * wg::kThreads;

  // Every row of Q, K, V and O is HeadDim bf16 = HeadDim / 64 boxes of 128 bytes (one 128-byte
  // swizzle atom wide), so every operand lives in shared memory as kBoxes column boxes.
  static constexpr int kBoxes = HeadDim / 64;
  static constexpr int kQBoxBytes = BlockM * 128;
  static constexpr int kQBytes = kBoxes * kQBoxBytes;
  static constexpr int kKvBoxBytes = BlockN * 128;
  static constexpr int kKvBytes = kBoxes * kKvBoxBytes;  // one K or one V block
  // Output staging: per consumer, its 64 rows as kBoxes boxes of 64 x 128 bytes (the TMA store box).
  static constexpr int kOBoxBytes = 64 * 128;
  static constexpr int kOBytes = kConsumers * kBoxes * kOBoxBytes;

  // 227 KiB of opt-in shared memory per block on sm_90; 1 KiB slack to align the base to the
  // 1024-byte swizzle period, 1 KiB for the barriers. K and V each take a ring of kStages blocks:
  // two at D 128 (2 x 80 KiB at 128 x 160), four at D 64 (128 x 128). The ring positions are counters modulo a
  // power of two (producer.cuh), so a fit of three stages uses two.
  static constexpr int kSmemLimit = 227 * 1024;
  static constexpr int kReserved = 2048;
  static constexpr int kStagesFit = (kSmemLimit - kQBytes - kOBytes - kReserved) / (2 * kKvBytes);
  static constexpr int kStages = kStagesFit >= 4 ? 4 : kStagesFit >= 2 ? 2 : kStagesFit;
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kKvBytes + kOBytes + kReserved;

  // setmaxnreg budgets. setmaxnreg moves registers between the warpgroups of the CTA, within what
  // the CTA got at launch: 65536 / threads, rounded down to 8, per thread (__launch_bounds__(threads,
  // 1)): 168 x 384 = 64512 with two consumers, 128 x 512 = 65536 with three. So 128 x 40 + 256 x 232
  // = 64512, and 128 x 32 + 384 x 160 = 65536. A consumer holds O (HeadDim / 2 fp32), S (BlockN / 2
  // fp32) and P (BlockN / 4 bf16 pairs) at once, plus the softmax state; at 128 x 160, D 128 that is
  // 184 + ~40, and 232 compiles without spills (240 would leave the producer 24, where its block
  // walk spills). The producer takes what the consumers leave, rounded down to 8: 40 beside 232,
  // 56 beside 224 (D 64 at 128 x 192, whose producer spilled at 40 once it fetched tiles itself).
  static constexpr int kConsumerRegisters = ConsumerRegisters > 0 ? ConsumerRegisters : kConsumers == 2 ? 232 : 160;
  static constexpr int kLaunchRegisters = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducerRegisters =
      (kLaunchRegisters * kThreads - kConsumers * wg::kThreads * kConsumerRegisters) / wg::kThreads / 8 * 8;
  static_assert(kProducerRegisters >= 24 && kProducerRegisters <= kLaunchRegisters, "setmaxnreg takes 24 .. 256");

  // Named barriers (0 is __syncthreads): consumer c's own (epilogue) is 1 + c; the consumers'
  // GEMM-issue token ring (ping-pong, named_barrier.cuh) uses kTokenBarrier + c.
  static constexpr uint32_t kConsumerBarrier = 1;
  static constexpr uint32_t kTokenBarrier = 1 + kConsumers;

  // Each warp of each consumer releases a ring slot after its own wgmma wait (wgmma groups are
  // tracked per warp): the empty barriers count every consumer warp.
  static constexpr uint32_t kReleasers = kConsumers * wg::kWarps;

  static_assert(HeadDim == 64 || HeadDim == 128, "head dims 64 and 128");
  static_assert(BlockM % 64 == 0 && kConsumers >= 2 && kConsumers <= 3, "two or three consumer warpgroups");
  static_assert(BlockN % 16 == 0 && BlockN <= 256 && BlockM <= 256, "TMA boxes and wgmma N are at most 256");
  static_assert(kStages >= 2, "K and V rings need two stages to overlap loads and math");
  static_assert(kTokenBarrier + kConsumers <= 16, "named barrier ids fit 1..15");
  static_assert(wg::kThreads * (kProducerRegisters + kConsumers * kConsumerRegisters) <= kLaunchRegisters * kThreads,
                "register budgets exceed what the CTA gets at launch");
};

// Shared memory, from a 1024-byte-aligned base (every region a multiple of 1024 bytes, so every box
// starts on a swizzle period, as the wgmma descriptors assume):
//   [Q: kBoxes boxes of BlockM x 128 B]                          TMA, 128-byte swizzle
//   [K stage 0 .. S-1: kBoxes boxes of BlockN x 128 B each]
//   [V stage 0 .. S-1: the same]
//   [O: consumer 0 boxes | consumer 1 boxes | ...]               epilogue staging, 64 x 128 B boxes
//   [q_full | q_empty | k_full[S] | k_empty[S] | v_full[S] | v_empty[S]]   mbarriers
//   [tile index]                         the producer's handoff of the next tile (scheduler.cuh)
//
// The base is kept as its 32-bit shared-window address and widened where a pointer is formed: a
// generic pointer held across the KV loop is two registers, which at 128 x 160 made the consumers
// spill 8 bytes (0 with the 32-bit base).
template <class Cfg>
struct SharedStorage {
  uint32_t base_address;

  __device__ explicit SharedStorage(uint8_t* raw)
      : base_address((static_cast<uint32_t>(__cvta_generic_to_shared(raw)) + 1023u) & ~1023u) {}

  __device__ uint8_t* base() const { return static_cast<uint8_t*>(__cvta_shared_to_generic(base_address)); }

  __device__ uint8_t* q(int box) const { return base() + box * Cfg::kQBoxBytes; }
  __device__ uint8_t* k(uint32_t stage, int box) const {
    return base() + Cfg::kQBytes + stage * Cfg::kKvBytes + box * Cfg::kKvBoxBytes;
  }
  __device__ uint8_t* v(uint32_t stage, int box) const {
    return base() + Cfg::kQBytes + (Cfg::kStages + stage) * Cfg::kKvBytes + box * Cfg::kKvBoxBytes;
  }
  __device__ uint8_t* o(int consumer, int box) const {
    return base() + Cfg::kQBytes + 2 * Cfg::kStages * Cfg::kKvBytes + (consumer * Cfg::kBoxes + box) * Cfg::kOBoxBytes;
  }
  __device__ uint64_t* q_full() const {
    return reinterpret_cast<uint64_t*>(base() + Cfg::kQBytes + 2 * Cfg::kStages * Cfg::kKvBytes + Cfg::kOBytes);
  }
  __device__ uint64_t* q_empty() const { return q_full() + 1; }
  __device__ uint64_t* k_full(uint32_t stage) const { return q_full() + 2 + stage; }
  __device__ uint64_t* k_empty(uint32_t stage) const { return q_full() + 2 + Cfg::kStages + stage; }
  __device__ uint64_t* v_full(uint32_t stage) const { return q_full() + 2 + 2 * Cfg::kStages + stage; }
  __device__ uint64_t* v_empty(uint32_t stage) const { return q_full() + 2 + 3 * Cfg::kStages + stage; }
  __device__ int32_t* tile_index() const { return reinterpret_cast<int32_t*>(q_full() + 2 + 4 * Cfg::kStages); }
};

}  // namespace weft::attn
