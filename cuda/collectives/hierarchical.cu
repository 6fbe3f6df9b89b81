// hierarchical.cu — allGather, reduceScatter, allReduce (and barrier) over several nodes: NVLink
// inside a node (the protocol.cuh handshake and peer stores/loads), the proxy between nodes, in
// ONE kernel per call. Topology and staging layout: hierarchical.h.
//
// Every CTA c owns one slice of the data and moves it end to end on its own, so no grid-wide
// barrier is needed: it writes its slice of what leaves the node into the host-mapped send
// staging, pushes one put+signal command per peer node into the proxy's device lane (thread i
// for the i-th other node), waits (bounded) for the peers' CTA c signals in the receive staging,
// then finishes the node-local part over NVLink. The peer's CTA c has the same slice because
// every rank makes the same call (count, CTA count); the local handshake checks that inside a
// node, a mismatch across nodes shows up as a timeout.
//
//   all-gather   own block -> every local output (NVLink) + send staging -> every peer node;
//                each arrived block -> every local output (NVLink). Barrier = all-gather of 0 B.
//   reduce-scatter  for each peer node m: sum over local ranks of block (m, l) -> send slot m;
//                own output = local sum of block (n, l) + arrived partials, in node order.
//   all-reduce   local rank l owns shard l: sum over local ranks -> send staging -> every peer
//                node; total = the nodes' partials in node order (the same bits on every rank),
//                stored into shard l of every local output (NVLink).
//
// Data read from the receive staging was written by the peer's NIC (or its proxy) before the
// signal: thread 0 acquires the signal (ld.acquire.sys), __syncthreads passes it on, and the
// loads (ld.volatile, see copy_in/sum_in) then see the data. Stores into the send staging are ordered before the
// command by a __threadfence_system() in the pushing thread after __syncthreads (fifo.cuh).
#include "collectives/hierarchical.h"
#include "collectives/between_nodes.cuh"
#include "collectives/move.cuh"
#include "collectives/protocol.cuh"

namespace weft::coll {

namespace {

using inter::copy_in;
using inter::other_node;
using inter::global_rank;
using inter::recv_offset;
using inter::send_offset;
using inter::sum_in;

// One thread: this CTA's slice, `bytes` at send-staging offset `src`, to the peer on node
// `peer_node` at its receive-staging offset `dst`, then its signal [this node][this CTA]. Failures
// are reported for the whole grid (and the local ranks stop waiting).
__device__ inline bool put_signal(const Args& a, const Shared& s, const InterNode& x, uint32_t peer_node,
                                  uint64_t src, uint64_t dst, uint64_t bytes) {
  const uint32_t peer = inter::global_rank(x, peer_node, a.rank);
  int64_t status = 0;
  const sys::WaitResult r = inter::put_signal(x, peer, src, dst, bytes, blockIdx.x, a.epoch, a.timeout_ns, &status);
  if (r == sys::WaitResult::kOk) return true;
  const int32_t code = r == sys::WaitResult::kTimeout ? WEFT_E_TIMEOUT : (status != 0 ? int32_t(status) : WEFT_E_TRANSPORT);
  detail::fail(a, s, code, WEFT_STAGE_REMOTE, 0, peer, a.epoch);
  return false;
}

// One thread: waits until the peer on `src_node` has delivered this CTA's slice of this op.
// Gives up on the timeout, when a local rank aborted, or when the proxy failed.
__device__ inline bool await_remote(const Args& a, const Shared& s, const InterNode& x, uint32_t src_node) {
  const uint32_t peer = inter::global_rank(x, src_node, a.rank);
  int64_t status = 0;
  const sys::WaitResult r = inter::await_signal(x, src_node, blockIdx.x, a.epoch, a.timeout_ns,
                                                detail::word(s, a.rank, a.layout.abort), a.epoch, &status);
  if (r == sys::WaitResult::kOk) return true;
  if (status != 0) detail::fail(a, s, int32_t(status), WEFT_STAGE_REMOTE, 0, peer, a.epoch);
  else if (r == sys::WaitResult::kAborted && inter::declared(x) != 0)
    detail::fail(a, s, WEFT_E_PEER, WEFT_STAGE_ABORTED, WEFT_ABORT_HOST, inter::declared(x) - 1, a.epoch);
  else detail::report_wait(a, s, r == sys::WaitResult::kTimeout ? detail::Waited::kTimeout : detail::Waited::kAborted,
                           WEFT_STAGE_REMOTE, peer);
  return false;
}

// Threads 0 .. nodes-2: push this CTA's slice to the i-th other node, then wait for its slice
// from that node. Called by every thread after the CTA's staging stores; true when all arrived.
template <class SendSlot>
__device__ inline bool exchange(const Args& a, const Shared& s, const InterNode& x, uint32_t parity,
                                SendSlot send_slot, uint64_t slice_at, uint64_t slice_bytes) {
  __syncthreads();
  bool failed = false;
  const uint32_t i = threadIdx.x;
  if (i + 1 < x.nodes) {
    const uint32_t m = other_node(x, i);
    failed = !put_signal(a, s, x, m, send_offset(x, parity, send_slot(m)) + slice_at,
                         recv_offset(x, parity, x.node) + slice_at, slice_bytes);
    if (!failed) failed = !await_remote(a, s, x, m);
    // Everything arrived, but this rank's own slice may still sit in a proxy that died after
    // taking it: then the peer never gets it, and this rank must not report success either.
    if (!failed && i == 0) {
      const int64_t e = inter::proxy_failed(x);
      if (e != 0) {
        detail::fail(a, s, int32_t(e), WEFT_STAGE_REMOTE, 0, inter::global_rank(x, m, a.rank), a.epoch);
        failed = true;
      }
    }
  }
  return !__syncthreads_or(failed);
}

struct AllGather {
  __device__ static bool move(const Args& a, const Shared& s, const InterNode& x, uint32_t parity) {
    const uint32_t L = a.world;
    const uint64_t bytes = a.count * a.elem_bytes;  // one rank's block
    uint64_t b, len;
    split(bytes, 1, blockIdx.x, a.nctas, b, len);
    char* send = x.send + send_offset(x, parity, 0);
    // Own block: every local output (peers first, this rank last) and the send staging.
    copy_out(a.in + b,
             [&](uint32_t i) { return i < L ? on_rank(a, s, (a.rank + 1 + i) % L, a.out) + uint64_t(x.rank) * bytes + b : send + b; },
             L + 1, len, cta_workers());
    if (!exchange(a, s, x, parity, [](uint32_t) { return 0u; }, b, len)) return false;
    for (uint32_t i = 0; i + 1 < x.nodes; ++i) {
      const uint32_t m = other_node(x, i);
      const uint64_t at = uint64_t(global_rank(x, m, a.rank)) * bytes + b;
      copy_in(x.recv + recv_offset(x, parity, m) + b,
               [&](uint32_t j) { return on_rank(a, s, (a.rank + 1 + j) % L, a.out) + at; }, L, len, cta_workers());
    }
    return true;
  }
};

struct ReduceScatter {
  __device__ static bool move(const Args& a, const Shared& s, const InterNode& x, uint32_t parity) {
    const uint32_t L = a.world;
    const uint64_t bytes = a.count * a.elem_bytes;  // one rank's output block
    uint64_t cb, clen;
    split(a.count, a.elem_bytes, blockIdx.x, a.nctas, cb, clen);
    const uint64_t b = cb * a.elem_bytes;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      // Partial sums this node owes each peer node m: block (m, l) summed over the local ranks.
      for (uint32_t i = 0; i + 1 < x.nodes; ++i) {
        const uint32_t m = other_node(x, i);
        const uint64_t at = uint64_t(global_rank(x, m, a.rank)) * bytes + b;
        char* slot = x.send + send_offset(x, parity, m) + b;
        sum_out<T>([&](uint32_t q) { return on_rank(a, s, q, a.in) + at; }, L, [&](uint32_t) { return slot; }, 1, clen,
                   cta_workers());
      }
    });
    if (!exchange(a, s, x, parity, [](uint32_t m) { return m; }, b, clen * a.elem_bytes)) return false;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const uint64_t at = uint64_t(x.rank) * bytes + b;
      // Sources: the local ranks' block (n, l), then the peer nodes' partials in node order.
      sum_in<T>(
          [&](uint32_t q) -> const char* {
            if (q < L) return on_rank(a, s, q, a.in) + at;
            const uint32_t r = q - L;
            const uint32_t m = r < x.node ? r : r + 1;
            return x.recv + recv_offset(x, parity, m) + b;
          },
          L + x.nodes - 1, [&](uint32_t) { return a.out + b; }, 1, clen, cta_workers());
    });
    return true;
  }
};

struct AllReduce {
  __device__ static bool move(const Args& a, const Shared& s, const InterNode& x, uint32_t parity) {
    const uint32_t L = a.world;
    uint64_t sb, slen;  // this local rank's shard
    split(a.count, a.elem_bytes, a.rank, L, sb, slen);
    uint64_t cb, clen;  // this CTA's part of it
    split(slen, a.elem_bytes, blockIdx.x, a.nctas, cb, clen);
    const uint64_t at = (sb + cb) * a.elem_bytes;
    const uint64_t b = cb * a.elem_bytes;
    char* send = x.send + send_offset(x, parity, 0) + b;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      sum_out<T>([&](uint32_t q) { return on_rank(a, s, q, a.in) + at; }, L, [&](uint32_t) { return send; }, 1, clen,
                 cta_workers());
    });
    if (!exchange(a, s, x, parity, [](uint32_t) { return 0u; }, b, clen * a.elem_bytes)) return false;
    with_float_type(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      // Every node's partial in node order (this node's from its own send staging), so every
      // rank of the rail computes the same bits; then shard l of every local output.
      sum_in<T>(
          [&](uint32_t m) -> const char* { return m == x.node ? send : x.recv + recv_offset(x, parity, m) + b; },
          x.nodes, [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % L, a.out) + at; }, L, clen,
          cta_workers());
    });
    return true;
  }
};

// The three kernels share one shape: the node-local entry, then the op's staging, its exchange
// with the peer nodes and its node-local finish (Op::move: false when a slice did not arrive,
// already reported), then the node-local exit.
template <class Op>
__global__ void __launch_bounds__(kThreads, 1) hier_kernel(const __grid_constant__ HierArgs h) {
  const Args& a = h.local;
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    if (Op::move(a, s, h.inter, uint32_t(a.epoch & 1))) cta_leave(a, s, Every{}, Every{});
  }
  cta_finish(a);
}

}  // namespace

cudaError_t launch_hierarchical(const HierArgs& h, cudaStream_t stream) {
  const size_t smem = shared_bytes(h.local.world);
  switch (h.local.kind) {
    case kAllGather:
    case kBarrier:
      hier_kernel<AllGather><<<h.local.nctas, kThreads, smem, stream>>>(h);
      break;
    case kReduceScatter:
      hier_kernel<ReduceScatter><<<h.local.nctas, kThreads, smem, stream>>>(h);
      break;
    case kAllReduce:
      hier_kernel<AllReduce><<<h.local.nctas, kThreads, smem, stream>>>(h);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace weft::coll
