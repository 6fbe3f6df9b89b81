// args.h — what the host passes to every collective kernel, and the layout of the symmetric
// arena's control region. Shared by ffi/src/comm (host) and cuda/collectives (device): plain C++,
// no device-only types.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace weft::coll {

// Capacity of the control region: the most CTAs one collective may use. The launcher clamps to
// min(SM count, kMaxCtas), so every CTA of a collective is resident at once (one per SM), which
// the pairwise CTA handshakes need to make progress.
constexpr uint32_t kMaxCtas = 256;
constexpr int kThreads = 512;
// Up to this many ranks the arena bases also travel in the kernel parameters, so a kernel's first
// peer address needs no dependent global load (the table is the general case).
constexpr uint32_t kInlinePeers = 8;

enum Kind : uint32_t {
  kAllGather = 0,
  kReduceScatter = 1,
  kAllReduce = 2,
  kAllToAll = 3,
  kBroadcast = 4,
  kBarrier = 5,
};

enum Algorithm : uint32_t { kAuto = 0, kStaged = 1, kDirect = 2 };

// The descriptor rank p's CTA c shows rank r before moving data (slot [c][p] of r's arena). The
// receiver compares it with its own call: a mismatch is reported, never acted on. `epoch` is
// written last with st.release.sys and doubles as the "rank p's CTA c has entered" signal.
struct alignas(64) PairDesc {
  uint32_t kind;
  uint32_t dtype;
  uint64_t count;
  uint64_t aux0;  // all-to-all: elements the writer expects from the reader
  uint64_t aux1;  // all-to-all: where (element offset) the reader's data goes in the writer's output
  uint32_t nctas;
  uint32_t root;
  uint32_t world;
  uint32_t algo;
  uint64_t pad;
  uint64_t epoch;
};
static_assert(sizeof(PairDesc) == 64, "PairDesc is one 64-byte line: 3 vector stores + the epoch");

// Control region at the start of every arena; the same offsets on every rank.
//   abort         u64            highest epoch at which any rank failed (peers stop waiting)
//   entry         PairDesc[kMaxCtas][world]     direct ops: [c][p] written by rank p's CTA c
//   done          u64[kMaxCtas][world]          direct ops: rank p's CTA c finished its part
//   staged_desc   PairDesc[2][kMaxCtas][world]  staged ops, by epoch parity
//   staged_data   bytes[2][world][staged_bytes] staged ops: [parity][p] holds rank p's data
//   heap          the user region (symmetric tensors), heap_bytes
// Staged slots are double-buffered by epoch parity: rank p writes slot e%2 of rank r during op e
// only after it saw r's signal of op e-1, so r has finished reading that slot (op e-2).
struct Layout {
  uint64_t abort;
  uint64_t entry;
  uint64_t done;
  uint64_t staged_desc;
  uint64_t staged_data;
  uint64_t staged_bytes;
  uint64_t heap;
  uint64_t total;
};

inline uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

inline Layout make_layout(uint32_t world, uint64_t staged_bytes, uint64_t heap_bytes) {
  constexpr uint64_t kPage = 4096;
  Layout l{};
  l.abort = 0;
  l.entry = kPage;
  l.done = l.entry + round_up(uint64_t(kMaxCtas) * world * sizeof(PairDesc), kPage);
  l.staged_desc = l.done + round_up(uint64_t(kMaxCtas) * world * sizeof(uint64_t), kPage);
  l.staged_data = l.staged_desc + round_up(2ull * kMaxCtas * world * sizeof(PairDesc), kPage);
  l.staged_bytes = staged_bytes;
  l.heap = round_up(l.staged_data + 2ull * world * staged_bytes, 2ull << 20);
  l.total = l.heap + heap_bytes;
  return l;
}

struct CompletionWords {
  uint64_t* done;
  uint64_t seq;
  uint32_t* arrivals;
};

struct Args {
  uint32_t kind;
  uint32_t dtype;  // WeftDtype
  uint32_t elem_bytes;
  uint32_t world;
  uint32_t rank;
  uint32_t root;
  uint32_t nctas;
  uint32_t algo;
  uint64_t count;
  uint64_t epoch;  // this launch's epoch: every launch on a communicator takes the next one
  uint64_t timeout_ns;
  const char* in;
  char* out;
  char* const* peers;   // device table [world]: every rank's arena base, mapped here
  char* peer_inline[kInlinePeers];  // the same bases when world <= kInlinePeers
  const uint64_t* a2a;  // all-to-all, device [4][world]: send_off, send_count, recv_off, recv_count
  // The communicator's host-mapped abort word (weft_comm_abort): non-zero = failed rank + 1.
  const volatile uint64_t* host_abort;
  Layout layout;
  CompletionWords completion;
};

// The kernel a call runs and its launch shape; ffi/src/comm/collectives.cpp launches it with the
// Args as its one parameter (through the driver API, with the function handle cached).
struct KernelLaunch {
  const void* kernel;  // the __global__ function's host stub
  uint32_t ctas;
  uint32_t threads;
  uint32_t smem;
};

KernelLaunch all_gather_launch(const Args& a);
KernelLaunch reduce_scatter_launch(const Args& a);
KernelLaunch all_reduce_launch(const Args& a);
KernelLaunch all_to_all_launch(const Args& a);
KernelLaunch broadcast_launch(const Args& a);
KernelLaunch barrier_launch(const Args& a);

}  // namespace weft::coll
