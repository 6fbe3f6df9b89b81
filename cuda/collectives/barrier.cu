// barrier.cu — returns once every rank has entered the same barrier (and so finished all the
// stream work it issued before it). One CTA: the direct protocol's entry handshake, then its exit.
// The exit is what lets the next collective reuse the entry slots: without it a rank could finish
// the barrier and write its next descriptor into a peer's slot before that peer had read the
// barrier's.
#include "collectives/protocol.cuh"

namespace weft::coll {

namespace {

struct Config {
  static constexpr int kThreads = 32;  // one thread per peer is all the handshake needs
};

__global__ void __launch_bounds__(1024, 1) barrier_kernel(const __grid_constant__ Args a) {
  const Shared s = cta_setup(a);
  if (cta_enter(a, s)) cta_leave(a, s, Every{}, Every{});
  cta_finish(a);
}

}  // namespace

KernelLaunch barrier_launch(const Args& a) {
  const uint32_t threads = a.world <= Config::kThreads ? Config::kThreads : (a.world + 31) / 32 * 32;
  return {reinterpret_cast<const void*>(&barrier_kernel), a.nctas, threads, uint32_t(shared_bytes(a.world))};
}

}  // namespace weft::coll
