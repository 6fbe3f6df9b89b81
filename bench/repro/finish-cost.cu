// finish-cost.cu — what cta::finish (primitives/completion.cuh) adds to the end of a persistent
// kernel: 128 CTAs of 384 threads spin for `spin_us`, then report completion three ways; the
// difference of back-to-back loop times is the cost (bench/DECISIONS.md, "The last CTA publishes
// with one st.release.sys after GPU-scope arrivals").
//   nvcc -std=c++20 -arch=sm_90a -I cuda bench/repro/finish-cost.cu -o /tmp/finish-cost && /tmp/finish-cost
#include <cuda_runtime.h>

#include <cstdio>

#include "primitives/completion.cuh"

using namespace weft;

__device__ void spin(uint64_t ns) {
  const uint64_t t0 = sys::globaltimer_ns();
  while (sys::globaltimer_ns() - t0 < ns) {
  }
}

// mode 0: no completion; 1: cta::finish; 2: device-scope fence per CTA, system fence in the last;
// 3: arrivals, the last CTA writes device memory; 4: arrivals, the last CTA writes host memory with
// no fence; 5: one thread writes host memory, nothing else; 6: acq_rel arrivals at gpu scope and
// one st.release.sys by the last CTA; 7: as 6 with a failure folded into the arrival count (the last
// CTA skips its atomic exchange of the failed flag).
__global__ void __launch_bounds__(384, 1) kernel(Completion c, uint64_t ns, int mode) {
  spin(ns);
  if (mode == 1) cta::finish(c);
  if (mode == 3 || mode == 4) {  // arrivals only; the last CTA writes device memory (3) or host memory, no fence (4)
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(c.arrivals, 1u) == gridDim.x - 1) {
      c.arrivals[0] = 0;
      if (mode == 3) c.arrivals[1] = uint32_t(c.seq);
      else *reinterpret_cast<volatile uint64_t*>(c.done) = c.seq;
    }
  }
  if (mode == 6) {  // acq_rel arrival at gpu scope, one st.release.sys by the last CTA
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t old;
      asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(c.arrivals) : "memory");
      if (old == gridDim.x - 1) {
        const uint32_t failed = atomicExch(&c.arrivals[1], 0u);
        c.arrivals[0] = 0;
        sys::signal_store(c.done, failed ? (c.seq | kFailedBit) : c.seq);
      }
    }
  }
  if (mode == 7) {  // as 6, the failure folded into the arrival count: no atomic exchange in the last CTA
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t old;
      asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(c.arrivals) : "memory");
      if ((old & 0xffffu) == gridDim.x - 1) {
        c.arrivals[0] = 0;
        sys::signal_store(c.done, old >> 16 ? (c.seq | kFailedBit) : c.seq);
      }
    }
  }
  if (mode == 5 && blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile uint64_t*>(c.done) = c.seq;
  if (mode == 2) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(c.arrivals, 1u) == gridDim.x - 1) {
        const uint32_t failed = atomicExch(&c.arrivals[1], 0u);
        c.arrivals[0] = 0;
        __threadfence_system();
        sys::signal_store(c.done, failed ? (c.seq | kFailedBit) : c.seq);
      }
    }
  }
}

int main() {
  uint64_t* done_host = nullptr;
  cudaHostAlloc(&done_host, 16, cudaHostAllocMapped);
  uint64_t* done = nullptr;
  cudaHostGetDevicePointer(&done, done_host, 0);
  uint32_t* arrivals = nullptr;
  cudaMalloc(&arrivals, 8);
  cudaMemset(arrivals, 0, 8);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (uint64_t us : {20}) {
    for (int rep = 0; rep < 2; ++rep) {
      for (int mode = 0; mode < 8; ++mode) {
        const int iters = 500;
        Completion c{done, 1, arrivals};
        for (int i = 0; i < 20; ++i) kernel<<<128, 384>>>(c, us * 1000, mode);
        cudaEventRecord(a);
        for (int i = 0; i < iters; ++i) kernel<<<128, 384>>>(c, us * 1000, mode);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        std::printf("spin %2llu us  mode %d  %.2f us per launch\n", (unsigned long long)us, mode, ms * 1000 / iters);
      }
    }
  }
  std::printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
