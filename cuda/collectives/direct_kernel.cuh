// direct_kernel.cuh — the one kernel shape of every direct-protocol collective (all-gather,
// reduce-scatter, all-reduce's two-shot path, all-to-all, broadcast): set up, enter, move, leave,
// finish (protocol.cuh), with only the data movement and the choice of peers to signal and to wait
// for left to the op. An op is a type:
//
//   struct AllGather : ToEveryPeer {
//     __device__ static void move(const Args& a, const Shared& s);  // every thread, after entry
//   };
//
// ToEveryPeer says the op signals every peer and waits for every peer when it leaves; an op that
// talks to fewer (broadcast: only the root signals, everyone waits only for the root) gives its
// own `signals(a, peer)` and `waits_for(a, peer)`. Each thread holds one value-initialised op for
// the call, so `move` may keep what the selectors need (broadcast keeps "am I the root") instead
// of working it out again at the leave.
//
// direct_launch<Op>(a) is the KernelLaunch the host launches (args.h); collective_launch() gives
// the same shape to a kernel of another form (all-reduce's staged path).
#pragma once

#include "collectives/args.h"
#include "collectives/protocol.cuh"

namespace weft::coll {

struct ToEveryPeer {
  __device__ static bool signals(const Args&, uint32_t) { return true; }
  __device__ static bool waits_for(const Args&, uint32_t) { return true; }
};

template <class Op>
__global__ void __launch_bounds__(kThreads, 1) direct_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) {
    Op op{};
    op.move(a, s);
    cta_leave(a, s, [&](uint32_t p) { return op.signals(a, p); }, [&](uint32_t p) { return op.waits_for(a, p); });
  }
  cta_finish(a);
}

// Every collective kernel but the barrier runs kThreads threads per CTA, one CTA per SM (args.h),
// with protocol.cuh's shared peer table.
inline KernelLaunch collective_launch(const void* kernel, const Args& a) {
  return {kernel, a.nctas, uint32_t(kThreads), uint32_t(shared_bytes(a.world))};
}

template <class Op>
KernelLaunch direct_launch(const Args& a) {
  return collective_launch(reinterpret_cast<const void*>(&direct_kernel<Op>), a);
}

}  // namespace weft::coll
