// comm.hpp — the native side of a communicator (one rank): its symmetric arena, the peers'
// arenas mapped here, the device peer table and the epoch its collectives share.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "collectives/args.h"
#include "collectives/hierarchical.h"
#include "weft.h"

struct WeftComm;

namespace weft::comm {

// The one-kernel CUDA graph that small collectives launch through (ffi/src/comm/collectives.cpp):
// its node's kernel, shape and parameters are set for each launch. Made at connect,
// while nothing of this communicator runs (module loading may wait for the device to go idle,
// see build_and_preload() in ffi/src/tp/abi.cpp); exec == nullptr: there is none, launches go direct.
struct LaunchGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphNode_t node = nullptr;
  cudaGraphExec_t exec = nullptr;
  // What the node holds now when `holds` is set: after each launch the node is already given the
  // parameters the same call would have next time (next epoch, next completion slot), so that a
  // repeated call launches without rewriting it; a different call rewrites it first.
  bool holds = false;
  coll::KernelLaunch kernel{};
  coll::Args args{};
};

void make_launch_graph(WeftComm& c);
void destroy_launch_graph(WeftComm& c);

}  // namespace weft::comm

struct WeftComm {
  int32_t device = 0;
  uint32_t rank = 0;
  uint32_t world = 1;
  uint64_t heap_bytes = 0;
  uint64_t timeout_ns = 0;
  weft::coll::Layout layout{};
  char* arena = nullptr;
  // peer_base[r]: rank r's arena as this process addresses it (peer_base[rank] == arena).
  std::vector<char*> peer_base;
  std::vector<bool> peer_ipc;  // opened with cudaIpcOpenMemHandle: closed at teardown
  // peer_device[r]: the GPU (this process's ordinal) rank r's arena lives on, from its handle (same
  // process) or from the mapping's pointer attributes (CUDA IPC); -1 until imported.
  std::vector<int32_t> peer_device;
  bool shares_device = false;  // some two ranks run on the same GPU (set at connect)
  // weft_comm_abort's word, pinned and mapped: 0 while healthy, else the declared rank + 1. Every
  // kernel of this rank polls its device alias; the host stores it once, with release semantics.
  uint64_t* abort_host = nullptr;
  const volatile uint64_t* abort_dev = nullptr;
  char** peer_table = nullptr; // device copy of peer_base
  uint64_t* a2a = nullptr;     // device [4][world], all-to-all offsets and counts
  uint64_t epoch = 0;          // last epoch launched; every rank advances it identically
  int32_t sm_count = 0;
  uint32_t max_ctas = 0;
  bool connected = false;
  // Driver handles of the collective kernels on this device, looked up on first launch
  // (ffi/src/comm/collectives.cpp): [kernel host stub, CUfunction] pairs.
  std::vector<std::pair<const void*, void*>> functions;
  weft::comm::LaunchGraph graph;
  // Multi-node (weft_comm_set_internode): nodes == 0 while the communicator is one node.
  weft::coll::InterNode inter{};
};

namespace weft::comm {

// Throws unless `comm` is a live, connected communicator (when `connected`; a communicator that
// weft_comm_abort declared failed is then a WEFT_E_PEER that names the rank).
WeftComm& require(WeftComm* comm, bool connected);
// 0 while healthy, else the rank weft_comm_abort declared failed + 1.
uint64_t declared_failed(const WeftComm& c);

// Fills `a` with the kernel arguments of collective call `p` on this rank (elements of `elem` bytes,
// `count` per rank), every byte of padding zeroed in place: the launch graph compares Args bytewise.
// The caller sets what differs by path (epoch, CTAs, algorithm, debug flags).
void set_collective_args(coll::Args& a, const WeftComm& c, const WeftCollectiveParams& p, uint32_t elem, uint64_t count);

// weft_collective on a multi-node communicator (hierarchical_collective.cpp).
void hierarchical_collective(WeftComm& c, const WeftCollectiveParams& p);

// Where symmetric address `local` of this rank lives on (local) rank q, as this process maps it.
inline char* on_rank(const WeftComm& c, uint32_t q, const void* local) {
  return c.peer_base[q] + (static_cast<const char*>(local) - c.arena);
}

}  // namespace weft::comm
