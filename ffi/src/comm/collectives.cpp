// collectives.cpp — weft_collective: checks one call, picks the algorithm and the CTA count, takes
// the next epoch and launches the kernel of cuda/collectives/ on the caller's stream.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "call_checks.hpp"
#include "comm.hpp"
#include "device_guard.hpp"
#include "driver.hpp"
#include "status.hpp"
#include "tensor/accumulate.h"
#include "tuning.hpp"

using namespace weft;
using namespace weft::comm;

namespace {

// How collective kernels are submitted: a kernel of at most kGraphMaxCtas CTAs goes through the
// communicator's one-kernel CUDA graph, its node rewritten for the call unless it already holds
// the call's parameters (see LaunchGraph); a larger one, or one on a stream being captured, through
// cuLaunchKernel with the CUfunction cached per communicator. On the 2 x H200 host a graph launch
// call costs 1.2-1.4 us against 3.1-3.8 us for cuLaunchKernel, and the kernel starts as soon after
// it (bench/DECISIONS.md, "Small collectives launch through a one-kernel CUDA graph, rewritten ahead").
constexpr uint32_t kGraphMaxCtas = 16;

// The kernel's driver handle on the communicator's device (the current one), looked up once.
CUfunction function_of(WeftComm& c, const void* kernel) {
  for (const auto& [stub, fn] : c.functions)
    if (stub == kernel) return static_cast<CUfunction>(fn);
  cudaFunction_t fn = nullptr;
  WEFT_CUDA(cudaGetFuncBySymbol(&fn, kernel));
  c.functions.emplace_back(kernel, static_cast<void*>(fn));
  return reinterpret_cast<CUfunction>(fn);
}

cudaKernelNodeParams node_params(const coll::KernelLaunch& k, void** params) {
  cudaKernelNodeParams np{};
  np.func = const_cast<void*>(k.kernel);
  np.gridDim = dim3(k.ctas);
  np.blockDim = dim3(k.threads);
  np.sharedMemBytes = k.smem;
  np.kernelParams = params;
  return np;
}

// A stream being captured gets a plain kernel node: a graph launch there would capture the graph
// as it is at capture time, not this call.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

bool same(const coll::KernelLaunch& x, const coll::KernelLaunch& y) {
  return x.kernel == y.kernel && x.ctas == y.ctas && x.threads == y.threads && x.smem == y.smem;
}

// One launch with the Args as the kernel's only parameter.
cudaError_t launch(WeftComm& c, const coll::KernelLaunch& k, const coll::Args& a, cudaStream_t stream) {
  void* params[] = {const_cast<coll::Args*>(&a)};
  if (k.ctas <= kGraphMaxCtas && c.graph.exec && !capturing(stream)) {
    comm::LaunchGraph& g = c.graph;
    // The node takes a copy of the parameters (and may change kernel and shape); launches already
    // enqueued keep theirs. Launches of one graph are ordered with each other, as the epochs are.
    if (!(g.holds && same(g.kernel, k) && std::memcmp(&g.args, &a, sizeof a) == 0)) {
      g.holds = false;
      const cudaKernelNodeParams np = node_params(k, params);
      const cudaError_t e = cudaGraphExecKernelNodeSetParams(g.exec, g.node, &np);
      if (e != cudaSuccess) return e;
    }
    g.holds = false;
    const cudaError_t e = cudaGraphLaunch(g.exec, stream);
    if (e != cudaSuccess) return e;
    // Off the critical path (the kernel has yet to start): give the node this call's parameters
    // for its next launch. Only an exact match (memcmp above) is ever launched from them.
    std::memcpy(&g.args, &a, sizeof a);  // padding included, for the memcmp
    g.args.epoch += 1;
    g.args.completion.seq += 1;
    g.args.completion.done += 2;      // the next slot: two 64-bit words on
    g.args.completion.arrivals += 2;  // two 32-bit words on
    g.kernel = k;
    void* next[] = {&g.args};
    const cudaKernelNodeParams np = node_params(k, next);
    if (cudaGraphExecKernelNodeSetParams(g.exec, g.node, &np) == cudaSuccess) g.holds = true;
    else (void)cudaGetLastError();
    return cudaSuccess;
  }
  const CUresult r = driver::launchKernel()(function_of(c, k.kernel), k.ctas, 1, 1, k.threads, 1, 1, k.smem,
                                            reinterpret_cast<CUstream>(stream), params, nullptr);
  if (r == CUDA_SUCCESS) return cudaSuccess;
  // CUresult and cudaError_t share their numbers for the launch failures that can happen here.
  return static_cast<cudaError_t>(r);
}

}  // namespace

namespace weft::comm {

void make_launch_graph(WeftComm& c) {
  if (c.graph.exec) return;
  coll::Args a{};
  a.world = c.world;
  a.nctas = 1;
  a.algo = coll::kStaged;
  void* params[] = {&a};
  // The staged all-reduce: the node's first kernel, so that its module loads now, while idle.
  const cudaKernelNodeParams np = node_params(coll::all_reduce_launch(a), params);
  LaunchGraph g;
  if (cudaGraphCreate(&g.graph, 0) != cudaSuccess || cudaGraphAddKernelNode(&g.node, g.graph, nullptr, 0, &np) != cudaSuccess ||
      cudaGraphInstantiate(&g.exec, g.graph, 0) != cudaSuccess) {
    (void)cudaGetLastError();  // no graph: every launch goes direct
    if (g.graph) (void)cudaGraphDestroy(g.graph);
    return;
  }
  c.graph = g;
}

void destroy_launch_graph(WeftComm& c) {
  if (c.graph.exec) (void)cudaGraphExecDestroy(c.graph.exec);
  if (c.graph.graph) (void)cudaGraphDestroy(c.graph.graph);
  c.graph = LaunchGraph{};
}

}  // namespace weft::comm

namespace weft::comm {

void set_collective_args(coll::Args& a, const WeftComm& c, const WeftCollectiveParams& p, uint32_t elem, uint64_t count) {
  std::memset(&a, 0, sizeof a);
  a.kind = uint32_t(p.kind);
  a.dtype = uint32_t(p.dtype);
  a.elem_bytes = elem;
  a.world = c.world;
  a.rank = c.rank;
  a.count = count;
  a.in = reinterpret_cast<const char*>(p.input);
  a.out = reinterpret_cast<char*>(p.output);
  a.peers = c.peer_table;
  if (c.world <= coll::kInlinePeers)
    for (uint32_t r = 0; r < c.world; ++r) a.peer_inline[r] = c.peer_base[r];
  a.a2a = c.a2a;
  a.host_abort = c.abort_dev;
  a.layout = c.layout;
  a.timeout_ns = c.timeout_ns;
  a.completion = {reinterpret_cast<uint64_t*>(p.done), p.seq, reinterpret_cast<uint32_t*>(p.arrivals)};
  a.algo = coll::kDirect;
}

}  // namespace weft::comm

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
    WEFT_REQUIRE(!is_sum(p->kind) || summable(p->dtype),
                 "%s: sums take bf16, f16 or f32 (got dtype %d)", op, p->dtype);
    WEFT_REQUIRE(p->done != 0 && p->arrivals != 0, "%s: done and arrivals (completion words) are required", op);
    WEFT_REQUIRE(p->algorithm >= WEFT_ALGO_AUTO && p->algorithm <= WEFT_ALGO_DIRECT, "%s: algorithm %d is not a WeftAlgorithm", op, p->algorithm);
    WEFT_REQUIRE(p->ctas >= 0, "%s: ctas must be >= 0 (got %d)", op, p->ctas);
    const uint64_t W = c.world;

    coll::Args a;
    comm::set_collective_args(a, c, *p, elem, p->count);

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
    coll::KernelLaunch k{};
    switch (p->kind) {
      case WEFT_ALL_GATHER: k = coll::all_gather_launch(a); break;
      case WEFT_REDUCE_SCATTER: k = coll::reduce_scatter_launch(a); break;
      case WEFT_ALL_REDUCE: k = coll::all_reduce_launch(a); break;
      case WEFT_ALL_TO_ALL: k = coll::all_to_all_launch(a); break;
      case WEFT_BROADCAST: k = coll::broadcast_launch(a); break;
      case WEFT_BARRIER: k = coll::barrier_launch(a); break;
    }
    const cudaError_t e = launch(c, k, a, stream);
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
