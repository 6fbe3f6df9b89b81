// params.cuh — the argument pack of one attention launch (a __grid_constant__ kernel parameter, so
// the tensor maps have the param-space address TMA needs), and the tile and block descriptions the
// roles of a CTA derive from it.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../primitives/completion.cuh"
#include "problem.h"
#include "weft.h"

// The tile order and key walk (scheduler-free parts of local.cuh, ring.cuh, kv_walk.cuh) also run
// on the host, where weft_testing_attention_walk lists them for the CPU tests.
#define WEFT_ATTN_WALK __host__ __device__ __forceinline__

namespace weft::attn {

WEFT_ATTN_WALK int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }
WEFT_ATTN_WALK int32_t imax(int32_t a, int32_t b) { return a > b ? a : b; }

// Policy::State is what a KV source adds (attention.h: LocalPolicy has none; ring.cuh the ring's
// flags and layout). k[1] / v[1] are a second pair of maps a policy may use (the ring's receive
// buffer); the local policy leaves them unused.
template <class State>
struct Params {
  CUtensorMap q;     // [rows, heads * D] bf16, box {64, BlockM}
  CUtensorMap o;     // [rows, heads * D] bf16, box {64, 64}
  CUtensorMap k[2];  // [rows, kv heads * D] bf16, box {64, BlockN}
  CUtensorMap v[2];
  Problem problem;
  Completion completion;  // done == nullptr: no host notification
  State state;
};

// One query tile: BlockM queries of one head of one sequence (or of one chunk of a sequence).
struct QTile {
  int32_t b, h, hk;    // sequence, query head, kv head
  int32_t row;         // q / o map row of the tile's first query
  int32_t rows;        // valid queries from `row` (>= BlockM: the whole tile)
  int32_t pos;         // causal position of the first query: key position p is visible to query i
                       // of the tile when p <= pos + i (bottom-right shift folded in)
  int32_t group;       // the policy's grouping of kv heads (ring: the receive-buffer group), or 0
  int64_t lse;         // lse index of the first query
};

// A run of consecutive keys of one kv head, all in one map (source) and one causal coordinate.
struct KvSegment {
  int32_t source;  // 0 or 1: Params::k[source] / v[source]
  int32_t row;     // map row of the first key
  int32_t col;     // map column of the kv head's first element (kv head x D)
  int32_t pos;     // causal position of the first key
  int32_t len;     // keys (>= 1)
  int32_t gate;    // the policy's arrival flag the producer waits for first; -1: local, none
};

// One block of at most BlockN keys of a segment.
struct KvBlock {
  int32_t source, row, col, pos;
  int32_t valid;   // keys of the block inside its segment (the rest are masked)
  int32_t gate;
  bool masked;     // some key of the block is invisible to some query of the tile
};

// What a policy's decode() says about a tile index.
enum class TileStatus : int32_t {
  kEmpty = 0,    // no queries (varlen: past its sequence's end): skipped
  kOk = 1,
  kInvalid = 2,  // varlen offsets out of range or a sequence longer than maxSeqlen: skipped, reported
};

// Reasons a CTA reports through cta::fail and the role that reports (weft.h: WeftAttentionFailure,
// WeftAttentionStage).
enum FailureCode : int32_t {
  kFailBarrierTimeout = WEFT_ATTENTION_FAIL_BARRIER_TIMEOUT,
  kFailPeerWait = WEFT_ATTENTION_FAIL_PEER_WAIT,
  kFailSeqlens = WEFT_ATTENTION_FAIL_SEQLENS,
};
enum FailureStage : uint32_t {
  kStageProducer = WEFT_ATTENTION_STAGE_PRODUCER,
  kStageConsumer = WEFT_ATTENTION_STAGE_CONSUMER,
  kStageFinish = WEFT_ATTENTION_STAGE_FINISH,
};

}  // namespace weft::attn
