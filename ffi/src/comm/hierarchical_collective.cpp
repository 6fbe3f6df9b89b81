// hierarchical_collective.cpp — a communicator over several nodes: takes the inter-node resources that
// lib/comm.ts set up (transport regions, host-mapped staging, the proxy's device lane) and runs
// allGather / reduceScatter / allReduce / barrier as one hierarchical kernel per call
// (cuda/collectives/hierarchical.cu). Layout and topology rules: cuda/collectives/hierarchical.h.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "call_checks.hpp"
#include "comm.hpp"
#include "device_guard.hpp"
#include "status.hpp"
#include "tuning.hpp"

using namespace weft;

namespace {

// Commands per call are CTAs x (nodes - 1): below this many bytes per CTA slice a CTA costs a
// proxy command (~µs) for nothing, so small calls use fewer CTAs than the NVLink tuning would.
constexpr uint64_t kInterBytesPerCta = 256 << 10;
constexpr uint32_t kInterMaxCtas = 32;

}  // namespace

namespace weft::comm {

void hierarchical_collective(WeftComm& c, const WeftCollectiveParams& p) {
  const coll::InterNode& x = c.inter;
  const char* op = kind_name(p.kind);
  if (p.kind == WEFT_ALL_TO_ALL || p.kind == WEFT_BROADCAST)
    WEFT_FAIL(WEFT_E_UNSUPPORTED,
              "%s: a communicator over %u nodes runs allGather, reduceScatter, allReduce and barrier; %s is single-node only",
              op, x.nodes, op);
  const bool sum = is_sum(p.kind);
  uint32_t elem = 1;
  if (p.kind != WEFT_BARRIER) {
    elem = dtype_bytes(p.dtype);
    WEFT_REQUIRE(elem != 0, "%s: dtype %d is not a WeftDtype", op, p.dtype);
    WEFT_REQUIRE(!sum || summable(p.dtype), "%s: sums take bf16, f16 or f32 (got dtype %d)", op, p.dtype);
    WEFT_REQUIRE(p.count > 0, "%s: count must be > 0", op);
  }
  WEFT_REQUIRE(p.done != 0 && p.arrivals != 0, "%s: done and arrivals (completion words) are required", op);
  WEFT_REQUIRE(p.ctas >= 0, "%s: ctas must be >= 0 (got %d)", op, p.ctas);
  const uint64_t W = x.world;
  const uint64_t count = p.kind == WEFT_BARRIER ? 0 : p.count;
  switch (p.kind) {
    case WEFT_ALL_GATHER:
      require_on_device(c, p.input, "input", op);
      require_symmetric(c, p.output, W * count * elem, "output", op);
      break;
    case WEFT_REDUCE_SCATTER:
      require_symmetric(c, p.input, W * count * elem, "input", op);
      require_on_device(c, p.output, "output", op);
      break;
    case WEFT_ALL_REDUCE:
      require_symmetric(c, p.input, count * elem, "input", op);
      require_symmetric(c, p.output, count * elem, "output", op);
      break;
    default:
      break;
  }
  const uint64_t payload = coll::internode_payload(uint32_t(p.kind), count, elem, c.world);
  WEFT_REQUIRE(payload <= x.slot_bytes,
               "%s: one call sends %llu bytes to each other node but the inter-node staging holds %llu per node "
               "(create the communicator with a larger interNodeBytes)",
               op, (unsigned long long)payload, (unsigned long long)x.slot_bytes);

  coll::HierArgs h{};
  coll::Args& a = h.local;
  set_collective_args(a, c, p, elem, count);
  if (p.kind == WEFT_BARRIER) a.out = c.arena + c.layout.heap;
  h.inter = x;
  if (p.ctas > 0) {
    a.nctas = std::min<uint32_t>(uint32_t(p.ctas), std::min(c.max_ctas, coll::kMaxCtas));
  } else {
    const uint32_t nvlink = tuning().ctas(a.kind, a.algo, payload, c.max_ctas);
    const uint64_t inter = (payload + kInterBytesPerCta - 1) / kInterBytesPerCta;
    a.nctas = uint32_t(std::clamp<uint64_t>(std::min<uint64_t>(nvlink, inter), 1, kInterMaxCtas));
  }

  DeviceGuard g(c.device);
  a.epoch = ++c.epoch;
  const cudaError_t e = coll::launch_hierarchical(h, reinterpret_cast<cudaStream_t>(p.stream));
  // A launch that failed never ran: give its epoch back so that the ranks stay in step.
  if (e != cudaSuccess) --c.epoch;
  WEFT_CUDA(e);
}

}  // namespace weft::comm

extern "C" {

WEFT_API int weft_comm_internode_bytes(int32_t nodes, uint64_t slot_bytes, uint64_t* out_send_bytes,
                                       uint64_t* out_recv_bytes) {
  return guard([&] {
    WEFT_REQUIRE(nodes >= 2, "nodes must be >= 2 (got %d)", nodes);
    WEFT_REQUIRE(slot_bytes > 0 && slot_bytes % 256 == 0, "slot_bytes must be a positive multiple of 256 (got %llu)",
                 (unsigned long long)slot_bytes);
    WEFT_REQUIRE(out_send_bytes && out_recv_bytes, "out_send_bytes and out_recv_bytes must not be NULL");
    *out_send_bytes = coll::internode_send_bytes(uint32_t(nodes), slot_bytes);
    *out_recv_bytes = coll::internode_recv_bytes(uint32_t(nodes), slot_bytes);
  });
}

WEFT_API int weft_comm_set_internode(WeftComm* comm, const WeftCommInterNode* in) {
  return guard([&] {
    WeftComm& c = comm::require(comm, true);
    WEFT_REQUIRE(in && in->size >= sizeof(WeftCommInterNode) && in->version == 1,
                 "inter must be a WeftCommInterNode version 1 with size set");
    WEFT_REQUIRE(c.inter.nodes == 0, "the communicator already has its inter-node resources");
    WEFT_REQUIRE(in->nodes >= 2, "nodes must be >= 2 (got %d)", in->nodes);
    WEFT_REQUIRE(in->node >= 0 && in->node < in->nodes, "node must be in [0, %d) (got %d)", in->nodes, in->node);
    WEFT_REQUIRE(int64_t(in->world_size) == int64_t(in->nodes) * c.world,
                 "world_size must be nodes x the communicator's (local) size = %d x %u (got %d)", in->nodes, c.world,
                 in->world_size);
    WEFT_REQUIRE(int64_t(in->rank) == int64_t(in->node) * c.world + c.rank,
                 "rank must be node x local size + local rank = %d x %u + %u (got %d): ranks are node-major",
                 in->node, c.world, c.rank, in->rank);
    WEFT_REQUIRE(in->send_region >= 1 && in->send_region <= 255 && in->recv_region >= 1 && in->recv_region <= 255,
                 "send_region and recv_region must be transport regions in [1, 255] (got %d, %d)", in->send_region,
                 in->recv_region);
    WEFT_REQUIRE(in->slot_bytes > 0 && in->slot_bytes % 256 == 0, "slot_bytes must be a positive multiple of 256");
    const uint32_t nodes = uint32_t(in->nodes);
    WEFT_REQUIRE(in->send_staging && in->send_bytes >= coll::internode_send_bytes(nodes, in->slot_bytes),
                 "send_staging must hold %llu bytes (weft_comm_internode_bytes)",
                 (unsigned long long)coll::internode_send_bytes(nodes, in->slot_bytes));
    WEFT_REQUIRE(in->recv_staging && in->recv_bytes >= coll::internode_recv_bytes(nodes, in->slot_bytes),
                 "recv_staging must hold %llu bytes (weft_comm_internode_bytes)",
                 (unsigned long long)coll::internode_recv_bytes(nodes, in->slot_bytes));
    WEFT_REQUIRE(in->fifo_slots && in->fifo_head && in->fifo_control && in->fifo_capacity >= 2 &&
                     (in->fifo_capacity & (in->fifo_capacity - 1)) == 0,
                 "the proxy's device lane (fifo_slots, fifo_head, fifo_control, fifo_capacity) must be given: start the "
                 "proxy with this communicator's device");
    coll::InterNode x{};
    x.rank = uint32_t(in->rank);
    x.world = uint32_t(in->world_size);
    x.node = uint32_t(in->node);
    x.nodes = nodes;
    x.local_size = c.world;
    x.send_region = uint8_t(in->send_region);
    x.recv_region = uint8_t(in->recv_region);
    x.send = reinterpret_cast<char*>(in->send_staging);
    x.recv = reinterpret_cast<char*>(in->recv_staging);
    x.slot_bytes = in->slot_bytes;
    x.fifo.slots = reinterpret_cast<proxy::Command*>(in->fifo_slots);
    x.fifo.head = reinterpret_cast<unsigned long long*>(in->fifo_head);
    x.fifo.control = reinterpret_cast<const uint64_t*>(in->fifo_control);
    x.fifo.capacity = in->fifo_capacity;
    x.host_abort = c.abort_dev;
    c.inter = x;
  });
}

}  // extern "C"
