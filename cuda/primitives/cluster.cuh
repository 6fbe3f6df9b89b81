// cluster.cuh — thread-block cluster identity and synchronisation (sm_90).
//
// Contract:
//   - cluster::rank() is this CTA's rank inside its cluster (0 when launched without clusters).
//   - cluster::sync() is a full barrier over every thread of every CTA in the cluster, with
//     release/acquire semantics at cluster scope. Every thread of the cluster must call it (the
//     instruction is .aligned: all threads of a warp execute it together, so converge first).
//   - A CTA must not exit while a peer may still write into its shared memory (TMA multicast) or
//     arrive on its barriers: end a clustered kernel with cluster::sync().
#pragma once

#include <cstdint>

namespace weft::cluster {

__device__ __forceinline__ uint32_t rank();
__device__ __forceinline__ void sync();

}  // namespace weft::cluster

#include "impl/cluster.cuh"
