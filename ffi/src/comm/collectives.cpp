// collectives.cpp — weft_collective: checks one call, picks the algorithm and the CTA count, takes
// the next epoch and launches the kernel of cuda/collectives/ on the caller's stream.
#include <cuda_runtime_api.h>

#include <vector>

#include "comm.hpp"
#include "device_guard.hpp"
#include "status.hpp"
#include "tensor/accumulate.h"
#include "tuning.hpp"

using namespace weft;

namespace {

const char* kind_name(int32_t k) {
  static const char* names[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast", "barrier"};
  return k >= 0 && k <= WEFT_BARRIER ? names[k] : "?";
}

uint32_t dtype_bytes(int32_t d) {
  switch (d) {
    case WEFT_BF16: case WEFT_F16: return 2;
    case WEFT_F32: case WEFT_I32: return 4;
    case WEFT_U8: return 1;
    default: return 0;
  }
}

bool is_sum(int32_t kind) { return kind == WEFT_REDUCE_SCATTER || kind == WEFT_ALL_REDUCE; }

// [ptr, ptr + bytes) must lie in this rank's user heap: a peer reaches it at the same offset.
void require_symmetric(const WeftComm& c, uint64_t ptr, uint64_t bytes, const char* what, const char* op) {
  const uint64_t base = reinterpret_cast<uint64_t>(c.arena) + c.layout.heap;
  WEFT_REQUIRE(ptr >= base && ptr + bytes <= base + c.heap_bytes,
               "%s: %s (%#llx, %llu bytes) must be a symmetric tensor inside this communicator's heap [%#llx, %#llx)",
               op, what, (unsigned long long)ptr, (unsigned long long)bytes, (unsigned long long)base,
               (unsigned long long)(base + c.heap_bytes));
}

void require_on_device(const WeftComm& c, uint64_t ptr, const char* what, const char* op) {
  WEFT_REQUIRE(ptr != 0, "%s: %s must not be NULL", op, what);
  const int dev = pointer_device(reinterpret_cast<const void*>(ptr));
  WEFT_REQUIRE(dev == c.device, "%s: %s (%#llx) is on device %d but this rank's communicator is on device %d",
               op, what, (unsigned long long)ptr, dev, c.device);
}

}  // namespace

extern "C" {

WEFT_API int weft_collective(WeftComm* comm, const WeftCollectiveParams* p) {
  return guard([&] {
    WeftComm& c = comm::require(comm, true);
    WEFT_REQUIRE(p, "params must not be NULL");
    WEFT_REQUIRE(p->size >= sizeof(WeftCollectiveParams), "params->size is %u but WeftCollectiveParams needs %zu bytes (ABI mismatch)",
                 p->size, sizeof(WeftCollectiveParams));
    WEFT_REQUIRE(p->kind >= WEFT_ALL_GATHER && p->kind <= WEFT_BARRIER, "kind %d is not a WeftCollectiveKind", p->kind);
    if (c.inter.nodes > 1) return comm::hierarchical_collective(c, *p);
    const char* op = kind_name(p->kind);
    const uint32_t elem = dtype_bytes(p->dtype);
    WEFT_REQUIRE(elem != 0, "%s: dtype %d is not a WeftDtype", op, p->dtype);
    WEFT_REQUIRE(!is_sum(p->kind) || p->dtype == WEFT_BF16 || p->dtype == WEFT_F16 || p->dtype == WEFT_F32,
                 "%s: sums take bf16, f16 or f32 (got dtype %d)", op, p->dtype);
    WEFT_REQUIRE(p->done != 0 && p->arrivals != 0, "%s: done and arrivals (completion words) are required", op);
    WEFT_REQUIRE(p->algorithm >= WEFT_ALGO_AUTO && p->algorithm <= WEFT_ALGO_DIRECT, "%s: algorithm %d is not a WeftAlgorithm", op, p->algorithm);
    WEFT_REQUIRE(p->ctas >= 0, "%s: ctas must be >= 0 (got %d)", op, p->ctas);
    const uint64_t W = c.world;

    coll::Args a{};
    a.kind = uint32_t(p->kind);
    a.dtype = uint32_t(p->dtype);
    a.elem_bytes = elem;
    a.world = c.world;
    a.rank = c.rank;
    a.count = p->count;
    a.in = reinterpret_cast<const char*>(p->input);
    a.out = reinterpret_cast<char*>(p->output);
    a.peers = c.peer_table;
    if (c.world <= coll::kInlinePeers)
      for (uint32_t r = 0; r < c.world; ++r) a.peer_inline[r] = c.peer_base[r];
    a.a2a = c.a2a;
    a.layout = c.layout;
    a.timeout_ns = c.timeout_ns;
    a.completion = {reinterpret_cast<uint64_t*>(p->done), p->seq, reinterpret_cast<uint32_t*>(p->arrivals)};
    a.algo = coll::kDirect;

    uint64_t payload = 0;
    std::vector<uint64_t> a2a;
    switch (p->kind) {
      case WEFT_ALL_GATHER:
        WEFT_REQUIRE(p->count > 0, "%s: count must be > 0", op);
        require_on_device(c, p->input, "input", op);
        require_symmetric(c, p->output, W * p->count * elem, "output", op);
        payload = p->count * elem;
        break;
      case WEFT_REDUCE_SCATTER:
        WEFT_REQUIRE(p->count > 0, "%s: count must be > 0", op);
        require_symmetric(c, p->input, W * p->count * elem, "input", op);
        require_on_device(c, p->output, "output", op);
        payload = p->count * elem;
        break;
      case WEFT_ALL_REDUCE: {
        WEFT_REQUIRE(p->count > 0, "%s: count must be > 0", op);
        require_symmetric(c, p->input, p->count * elem, "input", op);
        require_symmetric(c, p->output, p->count * elem, "output", op);
        payload = p->count * elem;
        const bool fits = payload <= c.layout.staged_bytes;
        const bool small = fits && payload <= comm::tuning().staged_auto_bytes;
        WEFT_REQUIRE(p->algorithm != WEFT_ALGO_STAGED || fits,
                     "%s: the staged algorithm holds at most %llu bytes per rank (staged_bytes) but the input has %llu",
                     op, (unsigned long long)c.layout.staged_bytes, (unsigned long long)payload);
        a.algo = p->algorithm == WEFT_ALGO_STAGED || (p->algorithm == WEFT_ALGO_AUTO && small) ? coll::kStaged : coll::kDirect;
        break;
      }
      case WEFT_ALL_TO_ALL: {
        WEFT_REQUIRE(p->send_counts && p->recv_counts, "%s: send_counts and recv_counts are required", op);
        const uint64_t* sc = reinterpret_cast<const uint64_t*>(p->send_counts);
        const uint64_t* rc = reinterpret_cast<const uint64_t*>(p->recv_counts);
        a2a.assign(4 * W, 0);
        uint64_t so = 0, ro = 0;
        for (uint64_t r = 0; r < W; ++r) {
          a2a[0 * W + r] = so;
          a2a[1 * W + r] = sc[r];
          a2a[2 * W + r] = ro;
          a2a[3 * W + r] = rc[r];
          so += sc[r];
          ro += rc[r];
        }
        WEFT_REQUIRE(sc[c.rank] == rc[c.rank], "%s: send_counts[%u] (%llu) must equal recv_counts[%u] (%llu): both describe this rank's block to itself",
                     op, c.rank, (unsigned long long)sc[c.rank], c.rank, (unsigned long long)rc[c.rank]);
        if (so > 0) require_on_device(c, p->input, "input", op);
        if (ro > 0) require_symmetric(c, p->output, ro * elem, "output", op);
        else a.out = c.arena + c.layout.heap;  // nothing arrives: any symmetric address will do
        a.count = 0;
        payload = so * elem;
        break;
      }
      case WEFT_BROADCAST:
        WEFT_REQUIRE(p->count > 0, "%s: count must be > 0", op);
        WEFT_REQUIRE(p->root >= 0 && uint64_t(p->root) < W, "%s: root must be in [0, %llu) (got %d)", op, (unsigned long long)W, p->root);
        if (c.rank == uint32_t(p->root)) require_on_device(c, p->input, "input", op);
        require_symmetric(c, p->output, p->count * elem, "output", op);
        a.root = uint32_t(p->root);
        payload = p->count * elem;
        break;
      case WEFT_BARRIER:
        a.count = 0;
        break;
    }
    a.nctas = p->ctas > 0 ? std::min<uint32_t>(uint32_t(p->ctas), c.max_ctas)
                          : comm::tuning().ctas(a.kind, a.algo, payload, c.max_ctas);

    DeviceGuard g(c.device);
    cudaStream_t stream = reinterpret_cast<cudaStream_t>(p->stream);
    if (p->kind == WEFT_ALL_TO_ALL)
      WEFT_CUDA(cudaMemcpyAsync(c.a2a, a2a.data(), a2a.size() * sizeof(uint64_t), cudaMemcpyHostToDevice, stream));
    a.epoch = ++c.epoch;
    cudaError_t e = cudaSuccess;
    switch (p->kind) {
      case WEFT_ALL_GATHER: e = coll::launch_all_gather(a, stream); break;
      case WEFT_REDUCE_SCATTER: e = coll::launch_reduce_scatter(a, stream); break;
      case WEFT_ALL_REDUCE: e = coll::launch_all_reduce(a, stream); break;
      case WEFT_ALL_TO_ALL: e = coll::launch_all_to_all(a, stream); break;
      case WEFT_BROADCAST: e = coll::launch_broadcast(a, stream); break;
      case WEFT_BARRIER: e = coll::launch_barrier(a, stream); break;
    }
    // A launch that failed never ran: give its epoch back so that the ranks stay in step.
    if (e != cudaSuccess) --c.epoch;
    WEFT_CUDA(e);
  });
}

WEFT_API int weft_accumulate(float* acc, const void* src, int32_t src_dtype, uint64_t count, void* stream) {
  return guard([&] {
    WEFT_REQUIRE(acc && src, "acc and src must not be NULL");
    WEFT_REQUIRE(src_dtype == WEFT_BF16 || src_dtype == WEFT_F16 || src_dtype == WEFT_F32,
                 "src_dtype must be bf16, f16 or f32 (got %d)", src_dtype);
    if (count == 0) return;
    int dev = pointer_device(acc);
    WEFT_REQUIRE(dev >= 0, "acc (%p) is not device memory", static_cast<void*>(acc));
    DeviceGuard g(dev);
    auto s = static_cast<cudaStream_t>(stream);
    WEFT_CUDA(kernels::accumulate(acc, src, src_dtype, count, s));
    if (!stream) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

}  // extern "C"
