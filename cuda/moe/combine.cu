// combine.cu — MoE combine as one persistent kernel per rank and launch: every owner pushes each
// real row of `hidden` (the experts' outputs, in the dispatch's receive layout) back to its source
// rank's returned-row slot (token * topk + k slot), and every source, as its tokens' rows land, sums
// them: out[t] = sum over j < topk, in order, of weights[t, j] x returned[t * topk + j] in fp32,
// rounded to bf16 once. With CombineArgs::pieces > 0 the pushes are the down-projection's epilogue
// (gemm_combine.cu, launched before this kernel) and this kernel only reduces: every returned row
// then arrives in `pieces` column tiles, each counted once; or, with CombineArgs::positions (world
// 1), the GEMM left every row in the receive layout before this kernel started (stream order) and
// item token * topk + k is read from row positions[item], with no counter.
//
// Ordering (moe.h has the workspace layout):
//   - CTA 0 first raises ready[me] = epoch in every rank's workspace (st.release.sys): this rank's
//     kernel of this launch has started, so its reads of the returned rows of the launch before are
//     done (stream order). An owner pushes into rank q's slots only after it saw ready[q] >= epoch.
//   - A warp pushes up to rows_per_signal rows, then, after __syncwarp, adds the rows per (source,
//     16-token block) to that source's arrived[block] with red.release.sys (peer.cuh, warp_arrive).
//   - arrived[b] grows by exactly tokens_in_block x topk x max(1, pieces) per launch (each (token,
//     k slot) of the dispatch's layout gets one row back, in `pieces` parts when the GEMM sends it),
//     so launch e waits for >= e x that; a CTA acquires it, then reads the block's returned rows
//     with ld.global.cg.
//   - The layout must be that of a dispatch that succeeded: dispatch_status (local) says so. When it
//     does not (a failure every rank saw alike), no rank pushes, every rank credits its own counters
//     in full and reports WEFT_MOE_FAIL_NO_LAYOUT, so the counters stay consistent.
//   - The launch count (epoch word) is read by every CTA at its start and advanced by the last CTA
//     to finish (a counter that grows by G per launch), so a replayed graph advances it too.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "moe/moe.h"
#include "moe/peer.cuh"

namespace weft::moe {

namespace {

template <class T>
__device__ __forceinline__ T* at(char* base, uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

struct Shared {
  char** peers;
  int* ready_seen;  // [W]: this CTA already saw ready[q] >= epoch
  Failures* fail;
  uint64_t* epoch;
};

__device__ inline Shared carve(unsigned char* smem, int world) {
  Shared s;
  s.peers = reinterpret_cast<char**>(smem);
  smem += (size_t(world) * 8 + 15) / 16 * 16;
  s.ready_seen = reinterpret_cast<int*>(smem);
  smem += (size_t(world) * 4 + 15) / 16 * 16;
  s.fail = reinterpret_cast<Failures*>(smem);
  smem += 16;
  s.epoch = reinterpret_cast<uint64_t*>(smem);
  return s;
}

__device__ __forceinline__ int64_t block_tokens(const CombineArgs& a, int64_t b) {
  return min(int64_t(kTokenBlock), a.tokens - b * kTokenBlock);
}

// One lane: waits (bounded) until rank q has started this launch; false when it gave up.
__device__ inline bool await_ready(const CombineArgs& a, const Shared& s, int q, uint64_t epoch) {
  if (reinterpret_cast<volatile int*>(s.ready_seen)[q]) return true;
  char* me = s.peers[a.peer.rank];
  const Waited w = wait_at_least(at<uint64_t>(me, a.layout.ready) + q, epoch, at<uint64_t>(me, a.layout.abort), epoch,
                                 a.peer);
  if (w != Waited::kOk) {
    wait_failed(s.fail, w, WEFT_MOE_STAGE_READY, q, a.peer);
    return false;
  }
  reinterpret_cast<volatile int*>(s.ready_seen)[q] = 1;
  return true;
}

// This CTA's chunks of rows [0, rows): chunk c0.. of rows_per_signal rows per warp.
__device__ inline void push_rows(const CombineArgs& a, const Shared& s, uint64_t epoch, int rows) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int R = a.rows_per_signal;
  const uint32_t row_bytes = uint32_t(a.hidden) * 2;
  const int stride = gridDim.x * kWarps * R;
  for (int c0 = (blockIdx.x * kWarps + warp) * R; c0 < rows; c0 += stride) {
    const int cnt = min(R, rows - c0);
    int4 meta = make_int4(-1, -1, -1, 0);
    if (lane < cnt) meta = a.row_source[c0 + lane];
    bool gave_up = false;
    for (int i = 0; i < cnt; ++i) {
      const int q = __shfl_sync(0xffffffffu, meta.x, i);
      if (q < 0) continue;  // a padding row
      const int t = __shfl_sync(0xffffffffu, meta.y, i), j = __shfl_sync(0xffffffffu, meta.z, i);
      int ok = 1;
      if (lane == 0) ok = await_ready(a, s, q, epoch);
      if (!__shfl_sync(0xffffffffu, ok, 0)) {
        gave_up = true;
        break;
      }
      char* dst = s.peers[q] + a.layout.returned + (uint64_t(t) * a.topk + j) * row_bytes;
      warp_copy_row(reinterpret_cast<const char*>(a.hidden_rows) + uint64_t(c0 + i) * row_bytes, dst, row_bytes);
    }
    if (gave_up) return;
    __syncwarp();  // every lane's row stores come before the releases below
    const bool valid = lane < cnt && meta.x >= 0;
    uint64_t* counter = nullptr;
    uint64_t key = 0;
    if (valid) {
      const int block = meta.y / kTokenBlock;
      key = (uint64_t(meta.x) << 32) | uint32_t(block);
      counter = at<uint64_t>(s.peers[meta.x], a.layout.arrived) + block;
    }
    warp_arrive(counter, key, valid);
  }
}

// This CTA's token blocks: wait for their rows, then the weighted sums.
__device__ inline void reduce_rows(const CombineArgs& a, const Shared& s, uint64_t epoch) {
  char* me = s.peers[a.peer.rank];
  const int64_t blocks = (a.tokens + kTokenBlock - 1) / kTokenBlock;
  const int vecs = a.hidden / 8;
  const char* returned = me + a.layout.returned;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t nt = block_tokens(a, b);
    if (threadIdx.x == 0 && a.positions == nullptr) {  // positions: complete by stream order (moe.h)
      const uint64_t target = epoch * uint64_t(nt) * a.topk * uint64_t(max(1, a.pieces));
      const Waited w = wait_at_least(at<uint64_t>(me, a.layout.arrived) + b, target, at<uint64_t>(me, a.layout.abort),
                                     epoch, a.peer);
      if (w != Waited::kOk) wait_failed(s.fail, w, WEFT_MOE_STAGE_RETURN, 0xffff, a.peer);
    }
    __syncthreads();
    if (s.fail->code != 0) return;
    for (int64_t idx = threadIdx.x; idx < nt * vecs; idx += blockDim.x) {
      const int64_t t = b * kTokenBlock + idx / vecs;
      const int v = int(idx % vecs);
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int j = 0; j < a.topk; ++j) {
        const int64_t item = t * a.topk + j;
        const float w = a.weights[item];
        const uint64_t row = a.positions != nullptr ? uint64_t(__ldg(a.positions + item)) : uint64_t(item);
        const uint4 r = mem::ld_cg16(returned + (row * a.hidden + uint64_t(v) * 8) * 2);
        const uint32_t words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[h]));
          acc[2 * h] = fmaf(w, f.x, acc[2 * h]);
          acc[2 * h + 1] = fmaf(w, f.y, acc[2 * h + 1]);
        }
      }
      uint32_t packed[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const __nv_bfloat162 p = __floats2bfloat162_rn(acc[2 * h], acc[2 * h + 1]);
        packed[h] = *reinterpret_cast<const uint32_t*>(&p);
      }
      mem::st16(reinterpret_cast<char*>(a.out) + (uint64_t(t) * a.hidden + uint64_t(v) * 8) * 2,
                make_uint4(packed[0], packed[1], packed[2], packed[3]));
    }
  }
}

// Without a valid layout nobody pushes: each rank's counters get this launch's rows from itself.
__device__ inline void credit_all(const CombineArgs& a, const Shared& s) {
  uint64_t* arrived = at<uint64_t>(s.peers[a.peer.rank], a.layout.arrived);
  const int64_t blocks = (a.tokens + kTokenBlock - 1) / kTokenBlock;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x)
    mem::red_relaxed_add(arrived + b, uint64_t(block_tokens(a, b)) * a.topk * uint64_t(max(1, a.pieces)));
}

__global__ void __launch_bounds__(kThreads, 1) combine_kernel(const __grid_constant__ CombineArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Shared s = carve(smem, a.peer.world);
  if (threadIdx.x == 0) *s.fail = Failures{0, 0, 0, 0};
  for (int q = threadIdx.x; q < a.peer.world; q += blockDim.x) s.ready_seen[q] = 0;
  cta_peers(a.peer, s.peers);
  char* me = s.peers[a.peer.rank];
  if (threadIdx.x == 0) *s.epoch = *at<const uint64_t>(me, a.layout.epoch) + 1;
  __syncthreads();
  const uint64_t epoch = *s.epoch;
  if (blockIdx.x == 0 && a.pieces == 0) {  // with pieces, the GEMM kernel raised them at its start
    for (int q = threadIdx.x; q < a.peer.world; q += blockDim.x)
      sys::signal_store(at<uint64_t>(s.peers[q], a.layout.ready) + a.peer.rank, epoch);
  }
  if (a.pieces > 0 && blockIdx.x == 0 && threadIdx.x == 0) {
    // The GEMM kernel before this one (untracked) left its failure here: it becomes this launch's.
    uint64_t* box = at<uint64_t>(me, a.layout.gemm_failure);
    if (atomicExch(reinterpret_cast<uint32_t*>(box + 2) + 1, 0u) != 0u)
      cta::fail(completion_of(a.peer), int32_t(box[1] & 0xffffffffu), uint32_t(box[1] >> 32));
  }
  const uint64_t status = *a.dispatch_status;  // written by the dispatch kernel, earlier on the stream
  const bool layout_ok = (status >> 8) != 0 && (status & 0xff) == 0;
  if (!layout_ok) {
    credit_all(a, s);
    if (threadIdx.x == 0) {
      record(s.fail, WEFT_MOE_FAIL_NO_LAYOUT, WEFT_MOE_STAGE_READY, 0, a.peer.rank);
      if (blockIdx.x == 0 && a.peer.report != nullptr) a.peer.report[0] = epoch;
    }
  } else {
    if (a.pieces == 0) push_rows(a, s, epoch, a.expert_offsets[a.local_experts]);
    __syncthreads();
    if (s.fail->code == 0) reduce_rows(a, s, epoch);
    __syncthreads();
    if (threadIdx.x == 0 && s.fail->code == WEFT_MOE_FAIL_TIMEOUT)
      raise_abort(s.peers, a.peer.world, a.layout.abort, epoch);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    report(a.peer, *s.fail);
    // The last CTA to get here advances the launch count: every CTA read it before arriving.
    uint64_t* finished = at<uint64_t>(me, a.layout.finished);
    uint64_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(finished) : "memory");
    if (old + 1 == epoch * gridDim.x) *at<uint64_t>(me, a.layout.epoch) = epoch;
  }
  cta::finish(completion_of(a.peer));
}

}  // namespace

size_t combine_smem_bytes(int world) {
  return (size_t(world) * 8 + 15) / 16 * 16 + (size_t(world) * 4 + 15) / 16 * 16 + 16 + 16;
}

cudaError_t preload_combine() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, combine_kernel);
}

cudaError_t launch_combine(const CombineArgs& a, int ctas, cudaStream_t stream) {
  combine_kernel<<<ctas, kThreads, combine_smem_bytes(a.peer.world), stream>>>(a);
  return cudaGetLastError();
}

}  // namespace weft::moe
