// nccl.cpp — NCCL as a benchmark baseline, dlopen'ed at run time (libnccl.so.2): no NCCL header
// or library is needed to build, and a machine without NCCL still loads libweft.so. The few
// declarations below follow nccl.h (2.x); enum values checked against /usr/include/nccl.h of
// NCCL 2.28 on the GPU host.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <memory>
#include <vector>

#include "device_guard.hpp"
#include "status.hpp"
#include "weft.h"

using namespace weft;

namespace {

using ncclComm_t = void*;
using ncclResult_t = int;
// ncclDataType_t
constexpr int ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9;
constexpr int ncclSum = 0;  // ncclRedOp_t

struct Nccl {
  bool ok = false;
  ncclResult_t (*getVersion)(int*) = nullptr;
  const char* (*getErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*commInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  ncclResult_t (*allGather)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;

  template <typename F>
  void sym(void* h, F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(h, name));
    ok = ok && f != nullptr;
  }

  Nccl() {
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    ok = true;
    sym(h, getVersion, "ncclGetVersion");
    sym(h, getErrorString, "ncclGetErrorString");
    sym(h, commInitAll, "ncclCommInitAll");
    sym(h, commDestroy, "ncclCommDestroy");
    sym(h, groupStart, "ncclGroupStart");
    sym(h, groupEnd, "ncclGroupEnd");
    sym(h, allGather, "ncclAllGather");
    sym(h, reduceScatter, "ncclReduceScatter");
    sym(h, allReduce, "ncclAllReduce");
    sym(h, broadcast, "ncclBroadcast");
    sym(h, send, "ncclSend");
    sym(h, recv, "ncclRecv");
  }
};

Nccl& nccl() {
  static Nccl n;
  return n;
}

void check(ncclResult_t r, const char* what) {
  if (r != 0) WEFT_FAIL(WEFT_E_CUDA, "%s failed: NCCL error %d (%s)", what, r, nccl().getErrorString(r));
}

int nccl_dtype(int32_t d) {
  switch (d) {
    case WEFT_BF16: return ncclBfloat16;
    case WEFT_F16: return ncclFloat16;
    case WEFT_F32: return ncclFloat32;
    case WEFT_I32: return ncclInt32;
    case WEFT_U8: return ncclUint8;
    default: WEFT_FAIL(WEFT_E_INVALID, "dtype %d has no NCCL equivalent", d);
  }
}

size_t dtype_bytes(int32_t d) { return d == WEFT_F32 || d == WEFT_I32 ? 4 : d == WEFT_U8 ? 1 : 2; }

}  // namespace

struct WeftNccl {
  std::vector<ncclComm_t> comms;
  std::vector<int> devices;
};

extern "C" {

WEFT_API int weft_nccl_version(int32_t* out_version) {
  return guard([&] {
    WEFT_REQUIRE(out_version, "out_version must not be NULL");
    int v = 0;
    if (nccl().ok && nccl().getVersion(&v) != 0) v = 0;
    *out_version = v;
  });
}

WEFT_API int weft_nccl_create(int32_t ndev, const int32_t* devices, WeftNccl** out) {
  return guard([&] {
    WEFT_REQUIRE(out && devices && ndev >= 1, "devices, ndev >= 1 and out are required");
    if (!nccl().ok) WEFT_FAIL(WEFT_E_UNSUPPORTED, "libnccl.so.2 could not be loaded (or lacks a symbol weft needs)");
    for (int i = 0; i < ndev; ++i) require_device(devices[i]);
    auto n = std::make_unique<WeftNccl>();
    n->devices.assign(devices, devices + ndev);
    n->comms.assign(size_t(ndev), nullptr);
    check(nccl().commInitAll(n->comms.data(), ndev, n->devices.data()), "ncclCommInitAll");
    *out = n.release();
  });
}

WEFT_API int weft_nccl_destroy(WeftNccl* n) {
  return guard([&] {
    if (!n) return;
    std::unique_ptr<WeftNccl> owned(n);
    for (ncclComm_t c : n->comms) check(nccl().commDestroy(c), "ncclCommDestroy");
  });
}

WEFT_API int weft_nccl_collective(WeftNccl* n, const WeftNcclParams* p) {
  return guard([&] {
    WEFT_REQUIRE(n && p && p->size >= sizeof(WeftNcclParams), "nccl and params (with size set) are required");
    const int dt = nccl_dtype(p->dtype);
    const size_t elem = dtype_bytes(p->dtype);
    const size_t ndev = n->comms.size();
    const auto* in = reinterpret_cast<const uint64_t*>(p->inputs);
    const auto* out = reinterpret_cast<const uint64_t*>(p->outputs);
    const auto* st = reinterpret_cast<const uint64_t*>(p->streams);
    WEFT_REQUIRE(in && out && st, "inputs, outputs and streams are required");
    check(nccl().groupStart(), "ncclGroupStart");
    try {
      for (size_t r = 0; r < ndev; ++r) {
        auto* i = reinterpret_cast<const void*>(in[r]);
        auto* o = reinterpret_cast<void*>(out[r]);
        auto s = reinterpret_cast<cudaStream_t>(st[r]);
        ncclComm_t c = n->comms[r];
        switch (p->kind) {
          case WEFT_ALL_GATHER: check(nccl().allGather(i, o, p->count, dt, c, s), "ncclAllGather"); break;
          case WEFT_REDUCE_SCATTER: check(nccl().reduceScatter(i, o, p->count, dt, ncclSum, c, s), "ncclReduceScatter"); break;
          case WEFT_ALL_REDUCE: check(nccl().allReduce(i, o, p->count, dt, ncclSum, c, s), "ncclAllReduce"); break;
          case WEFT_BROADCAST: check(nccl().broadcast(i, o, p->count, dt, p->root, c, s), "ncclBroadcast"); break;
          case WEFT_ALL_TO_ALL:
            for (size_t q = 0; q < ndev; ++q) {
              check(nccl().send(static_cast<const char*>(i) + q * p->count * elem, p->count, dt, int(q), c, s), "ncclSend");
              check(nccl().recv(static_cast<char*>(o) + q * p->count * elem, p->count, dt, int(q), c, s), "ncclRecv");
            }
            break;
          default: WEFT_FAIL(WEFT_E_INVALID, "kind %d has no NCCL baseline", p->kind);
        }
      }
    } catch (...) {
      (void)nccl().groupEnd();
      throw;
    }
    check(nccl().groupEnd(), "ncclGroupEnd");
  });
}

}  // extern "C"
