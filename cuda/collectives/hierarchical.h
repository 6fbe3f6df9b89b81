// hierarchical.h — what the host passes to the multi-node collective kernels (hierarchical.cu),
// and the layout of the inter-node staging. Shared by ffi/src/comm (host) and cuda/collectives
// (device): plain C++, no device-only types.
//
// Topology: `nodes` nodes of `local_size` ranks each, node-major (global rank = node * local_size
// + local rank), rail-aligned (local rank l talks to local rank l of every other node). Inside a
// node the usual symmetric heap and NVLink; between nodes the proxy (cuda/primitives/fifo.cuh)
// and pinned host-mapped staging that the transport has registered (no FI_HMEM is assumed).
//
// Staging (one pair per rank; sizes from send_bytes()/recv_bytes()):
//   send  [2 parity][nodes][slot_bytes]   this GPU writes slot [e % 2][m] for peer node m in op e
//                                         (all-gather and all-reduce send one slot to all: [.][0])
//   recv  signal u64[nodes][kMaxCtas]     word [m][c]: CTA c of the peer on node m raised it to
//         (padded to 4 KiB)               the epoch of the op whose slice it delivered
//         [2 parity][nodes][slot_bytes]   slot [e % 2][m]: what the peer on node m sent in op e
// Why two parities are enough: a rank writes parity e % 2 in op e only after it has received every
// peer's op e-1 data; a peer sends op e-1 only from its kernel e-1, which starts after its kernel
// e-2 (which read that parity here, and whose own send-slot reads by the NIC landed before its
// signal) has finished. Signals are epochs and only grow: nothing is ever reset.
#pragma once

#include <cstdint>

#include "collectives/args.h"
#include "primitives/proxy_command.h"

namespace weft::coll {

struct InterNode {
  uint32_t rank;        // global
  uint32_t world;       // global: nodes * local_size
  uint32_t node;
  uint32_t nodes;
  uint32_t local_size;  // == Args::world of the local (NVLink) part
  uint8_t send_region;  // transport regions
  uint8_t recv_region;
  char* send;           // device alias of the send staging
  char* recv;           // device alias of the receive staging
  uint64_t slot_bytes;
  proxy::FifoDevice fifo;  // the proxy's device lane
  // The communicator's host-mapped abort word (weft_comm_abort): non-zero = failed rank + 1.
  const volatile uint64_t* host_abort;
};

struct HierArgs {
  Args local;  // the NVLink part: world/rank are the node-local ones
  InterNode inter;
};

WEFT_PROXY_HD inline uint64_t internode_signal_bytes(uint32_t nodes) {
  return (uint64_t(nodes) * kMaxCtas * 8 + 4095) / 4096 * 4096;
}
WEFT_PROXY_HD inline uint64_t internode_send_bytes(uint32_t nodes, uint64_t slot_bytes) {
  return 2ull * nodes * slot_bytes;
}
WEFT_PROXY_HD inline uint64_t internode_recv_bytes(uint32_t nodes, uint64_t slot_bytes) {
  return internode_signal_bytes(nodes) + 2ull * nodes * slot_bytes;
}

// Bytes one rank sends each peer node in one call (what must fit a slot), by collective kind.
inline uint64_t internode_payload(uint32_t kind, uint64_t count, uint32_t elem_bytes, uint32_t local_size) {
  if (kind == kAllReduce) {
    // the shard of one local rank, rounded to 16 bytes as the kernel splits it
    const uint64_t align = 16 / elem_bytes;
    const uint64_t each = ((count + local_size - 1) / local_size + align - 1) / align * align;
    return each * elem_bytes;
  }
  return count * elem_bytes;
}

cudaError_t launch_hierarchical(const HierArgs& a, cudaStream_t stream);

}  // namespace weft::coll
