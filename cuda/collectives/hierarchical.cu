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
#include "collectives/move.cuh"
#include "collectives/protocol.cuh"
#include "primitives/fifo.cuh"

namespace weft::coll {

namespace {

struct Config {
  static constexpr int kThreads = coll::kThreads;
};

__device__ __forceinline__ uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// [begin, begin + len) elements of `n` for part `part` of `parts`, parts aligned to 16 bytes.
__device__ __forceinline__ void split(uint64_t n, uint32_t elem, uint32_t part, uint32_t parts,
                                      uint64_t& begin, uint64_t& len) {
  const uint64_t align = 16 / elem;
  const uint64_t each = ceil_div(ceil_div(n, parts), align) * align;
  begin = min(n, uint64_t(part) * each);
  len = min(n, begin + each) - begin;
}

// ---- reading the receive staging ----------------------------------------------------------------
// Bytes the peer's NIC (or its proxy) wrote into host memory are loaded with ld.volatile (relaxed,
// system scope) rather than move.cuh's ld.global.cg: the same slot is reused every second op, and
// a weak load may be served from a line an earlier op left in the GPU's caches.

__device__ __forceinline__ uint4 ld_sys16(const char* p) { return detail::ld_volatile16(p); }

template <int kBytes>
__device__ __forceinline__ uint32_t ld_sys(const char* p) {
  uint32_t v;
  if constexpr (kBytes == 4) {
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  } else if constexpr (kBytes == 2) {
    uint16_t h;
    asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(h) : "l"(p) : "memory");
    v = h;
  } else {
    uint16_t h;
    asm volatile("ld.volatile.global.u8 %0, [%1];" : "=h"(h) : "l"(p) : "memory");
    v = h;
  }
  return v;
}

template <int kUnit, class Dst>
__device__ inline void copy_in_units(const char* src, Dst dst, uint32_t ndst, uint64_t bytes, Workers w) {
  for (uint64_t i = w.id; i < bytes / kUnit; i += w.count) {
    const uint32_t v = ld_sys<kUnit>(src + i * kUnit);
    for (uint32_t d = 0; d < ndst; ++d) mem::st<kUnit>(dst(d) + i * kUnit, v);
  }
}

// copy_out() with system-scope loads: dst(i), i < ndst, each receive `bytes` bytes of src.
template <class Dst>
__device__ inline void copy_in(const char* src, Dst dst, uint32_t ndst, uint64_t bytes, Workers w) {
  uint64_t bits = reinterpret_cast<uintptr_t>(src) | bytes;
  for (uint32_t d = 0; d < ndst; ++d) bits |= reinterpret_cast<uintptr_t>(dst(d));
  if ((bits & 15) == 0) {
    for (uint64_t i = w.id; i < bytes / 16; i += w.count) {
      const uint4 v = ld_sys16(src + i * 16);
      for (uint32_t d = 0; d < ndst; ++d) mem::st16(dst(d) + i * 16, v);
    }
  } else if ((bits & 3) == 0) {
    copy_in_units<4>(src, dst, ndst, bytes, w);
  } else if ((bits & 1) == 0) {
    copy_in_units<2>(src, dst, ndst, bytes, w);
  } else {
    copy_in_units<1>(src, dst, ndst, bytes, w);
  }
}

template <typename T>
__device__ __forceinline__ float ld_sys_elem(const char* p) {
  const uint32_t v = ld_sys<sizeof(T)>(p);
  if constexpr (sizeof(T) == 4) return __uint_as_float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(__ushort_as_bfloat16(uint16_t(v)));
  else return __half2float(__ushort_as_half(uint16_t(v)));
}

// sum_out() with system-scope loads: dst(i)[k] = sum over q < nsrc, in order, of src(q)[k] (fp32
// accumulation from 0, the same order and rounding as sum_out, so equal inputs give equal bits).
template <typename T, class Src, class Dst>
__device__ inline void sum_in(Src src, uint32_t nsrc, Dst dst, uint32_t ndst, uint64_t n, Workers w) {
  constexpr int L = Lanes<T>::kCount;
  uint64_t bits = 0;
  for (uint32_t q = 0; q < nsrc; ++q) bits |= reinterpret_cast<uintptr_t>(src(q));
  for (uint32_t d = 0; d < ndst; ++d) bits |= reinterpret_cast<uintptr_t>(dst(d));
  const uint64_t nvec = (bits & 15) == 0 ? n / L : 0;
  for (uint64_t v = w.id; v < nvec; v += w.count) {
    float acc[L];
#pragma unroll
    for (int l = 0; l < L; ++l) acc[l] = 0.0f;
    for (uint32_t q = 0; q < nsrc; ++q) add_lanes<T>(acc, ld_sys16(src(q) + v * 16));
    const uint4 out = pack_lanes<T>(acc);
    for (uint32_t d = 0; d < ndst; ++d) mem::st16(dst(d) + v * 16, out);
  }
  for (uint64_t i = nvec * L + w.id; i < n; i += w.count) {
    float acc = 0.0f;
    for (uint32_t q = 0; q < nsrc; ++q) acc += ld_sys_elem<T>(src(q) + i * sizeof(T));
    for (uint32_t d = 0; d < ndst; ++d) store_elem<T>(dst(d) + i * sizeof(T), acc);
  }
}

// ---- topology and staging -------------------------------------------------------------------------

// The i-th other node, i < nodes - 1, starting after this one (so that no node is everyone's first).
__device__ __forceinline__ uint32_t other_node(const InterNode& x, uint32_t i) {
  return (x.node + 1 + i) % x.nodes;
}

__device__ __forceinline__ uint32_t global_rank(const InterNode& x, uint32_t node, uint32_t local) {
  return node * x.local_size + local;
}

__device__ __forceinline__ uint64_t send_offset(const InterNode& x, uint32_t parity, uint32_t slot) {
  return (uint64_t(parity) * x.nodes + slot) * x.slot_bytes;
}

__device__ __forceinline__ uint64_t recv_offset(const InterNode& x, uint32_t parity, uint32_t src_node) {
  return internode_signal_bytes(x.nodes) + (uint64_t(parity) * x.nodes + src_node) * x.slot_bytes;
}

// One thread: `bytes` at send-staging offset `src` -> the peer on node `peer_node` at its
// receive-staging offset `dst`, then that peer's signal [this node][this CTA] raised to the epoch.
__device__ inline bool put_signal(const Args& a, const Shared& s, const InterNode& x, uint32_t peer_node,
                                  uint64_t src, uint64_t dst, uint64_t bytes) {
  proxy::Command cmd{};
  cmd.header = proxy::kOpPut;
  cmd.peer = global_rank(x, peer_node, a.rank);
  cmd.src_region = x.send_region;
  cmd.dst_region = x.recv_region;
  cmd.signal_region = x.recv_region;
  cmd.flags = proxy::kFlagSignal;
  cmd.src_offset = src;
  cmd.dst_offset = dst;
  cmd.bytes = bytes;
  cmd.signal_offset = (uint64_t(x.node) * kMaxCtas + blockIdx.x) * 8;
  cmd.signal_value = a.epoch;
  cmd.cookie = (a.epoch << 16) | blockIdx.x;
  // The CTA's staging stores (ordered before this thread by the caller's __syncthreads) reach
  // host memory before the command's header does.
  __threadfence_system();
  int64_t status = 0;
  const sys::WaitResult r = proxy::thread::push(x.fifo, cmd, nullptr, &status, sys::WaitBudget{a.timeout_ns, nullptr});
  if (r == sys::WaitResult::kOk) return true;
  const int32_t code = r == sys::WaitResult::kTimeout ? WEFT_E_TIMEOUT : (status != 0 ? int32_t(status) : WEFT_E_TRANSPORT);
  detail::fail(a, s, code, WEFT_STAGE_REMOTE, 0, cmd.peer, a.epoch);
  return false;
}

// One thread: waits until the peer on `src_node` has delivered this CTA's slice of this op.
// Bounded; gives up early when a local rank aborted or the proxy failed.
__device__ inline bool await_remote(const Args& a, const Shared& s, const InterNode& x, uint32_t src_node) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(x.recv) + (uint64_t(src_node) * kMaxCtas + blockIdx.x);
  if (sys::signal_load(w) >= a.epoch) return true;
  const uint64_t* abort_word = detail::word(s, a.rank, a.layout.abort);
  const uint64_t* proxy_error = reinterpret_cast<const uint64_t*>(
      reinterpret_cast<const char*>(x.fifo.control) + offsetof(proxy::FifoControl, error));
  const uint32_t peer = global_rank(x, src_node, a.rank);
  const uint64_t start = sys::globaltimer_ns();
  // Arrivals come at network speed (tens of microseconds): ~1 us polls of host memory over PCIe.
  unsigned sleep_ns = 64;
  for (uint32_t spins = 1;; ++spins) {
    if (sys::signal_load(w) >= a.epoch) return true;
    if ((spins & 15) == 0) {
      if (sys::signal_load(abort_word) >= a.epoch) {
        detail::report_wait(a, s, detail::Waited::kAborted, WEFT_STAGE_REMOTE, peer);
        return false;
      }
      const int64_t e = static_cast<int64_t>(sys::signal_load(proxy_error));
      if (e != 0) {
        detail::fail(a, s, int32_t(e), WEFT_STAGE_REMOTE, 0, peer, a.epoch);
        return false;
      }
      if (sys::globaltimer_ns() - start > a.timeout_ns) {
        detail::report_wait(a, s, detail::Waited::kTimeout, WEFT_STAGE_REMOTE, peer);
        return false;
      }
    }
    __nanosleep(sleep_ns);
    if (sleep_ns < 1024) sleep_ns <<= 1;
  }
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
  }
  return !__syncthreads_or(failed);
}

struct Every {
  __device__ bool operator()(uint32_t) const { return true; }
};

__global__ void __launch_bounds__(Config::kThreads, 1) hier_all_gather_kernel(const __grid_constant__ HierArgs h) {
  const Args& a = h.local;
  const InterNode& x = h.inter;
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    const uint32_t parity = uint32_t(a.epoch & 1);
    const uint32_t L = a.world;
    const uint64_t bytes = a.count * a.elem_bytes;  // one rank's block
    uint64_t b, len;
    split(bytes, 1, blockIdx.x, a.nctas, b, len);
    char* send = x.send + send_offset(x, parity, 0);
    // Own block: every local output (peers first, this rank last) and the send staging.
    copy_out(a.in + b,
             [&](uint32_t i) { return i < L ? on_rank(a, s, (a.rank + 1 + i) % L, a.out) + uint64_t(x.rank) * bytes + b : send + b; },
             L + 1, len, cta_workers());
    if (exchange(a, s, x, parity, [](uint32_t) { return 0u; }, b, len)) {
      for (uint32_t i = 0; i + 1 < x.nodes; ++i) {
        const uint32_t m = other_node(x, i);
        const uint64_t at = uint64_t(global_rank(x, m, a.rank)) * bytes + b;
        copy_in(x.recv + recv_offset(x, parity, m) + b,
                 [&](uint32_t j) { return on_rank(a, s, (a.rank + 1 + j) % L, a.out) + at; }, L, len, cta_workers());
      }
      cta_leave(a, s, Every{}, Every{});
    }
  }
  cta_finish(a);
}

__global__ void __launch_bounds__(Config::kThreads, 1) hier_reduce_scatter_kernel(const __grid_constant__ HierArgs h) {
  const Args& a = h.local;
  const InterNode& x = h.inter;
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    const uint32_t parity = uint32_t(a.epoch & 1);
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
    if (exchange(a, s, x, parity, [](uint32_t m) { return m; }, b, clen * a.elem_bytes)) {
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
      cta_leave(a, s, Every{}, Every{});
    }
  }
  cta_finish(a);
}

__global__ void __launch_bounds__(Config::kThreads, 1) hier_all_reduce_kernel(const __grid_constant__ HierArgs h) {
  const Args& a = h.local;
  const InterNode& x = h.inter;
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    const uint32_t parity = uint32_t(a.epoch & 1);
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
    if (exchange(a, s, x, parity, [](uint32_t) { return 0u; }, b, clen * a.elem_bytes)) {
      with_float_type(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        // Every node's partial in node order (this node's from its own send staging), so every
        // rank of the rail computes the same bits; then shard l of every local output.
        sum_in<T>(
            [&](uint32_t m) -> const char* { return m == x.node ? send : x.recv + recv_offset(x, parity, m) + b; },
            x.nodes, [&](uint32_t i) { return on_rank(a, s, (a.rank + 1 + i) % L, a.out) + at; }, L, clen,
            cta_workers());
      });
      cta_leave(a, s, Every{}, Every{});
    }
  }
  cta_finish(a);
}

}  // namespace

cudaError_t launch_hierarchical(const HierArgs& h, cudaStream_t stream) {
  const size_t smem = shared_bytes(h.local.world);
  switch (h.local.kind) {
    case kAllGather:
    case kBarrier:
      hier_all_gather_kernel<<<h.local.nctas, Config::kThreads, smem, stream>>>(h);
      break;
    case kReduceScatter:
      hier_reduce_scatter_kernel<<<h.local.nctas, Config::kThreads, smem, stream>>>(h);
      break;
    case kAllReduce:
      hier_all_reduce_kernel<<<h.local.nctas, Config::kThreads, smem, stream>>>(h);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace weft::coll
