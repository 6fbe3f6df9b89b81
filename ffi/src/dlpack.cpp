// dlpack.cpp — DLPack managed tensors made and read in native code, so that every binding (bun:ffi,
// Python ctypes) hands tensors to other runtimes through one implementation whose deleter is native.
//
// The structs below are DLPack's (dlpack.h 1.x, an ABI other runtimes compile against): they are
// written out here rather than included, and only this file touches them. An exported tensor is one
// heap block holding the managed struct and its shape and strides, so the deleter frees it at once.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "status.hpp"
#include "weft.h"

using namespace weft;

namespace {

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLDevice {
  int32_t device_type;  // DLDeviceType (a C enum: int-sized)
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // DLDataTypeCode
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // elements; NULL = compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};
static_assert(sizeof(DLTensor) == 48 && offsetof(DLTensor, byte_offset) == 40, "DLTensor layout");
static_assert(sizeof(DLManagedTensorVersioned) == 80 && offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
              "DLManagedTensorVersioned layout");

constexpr uint32_t kMajor = 1;
constexpr uint32_t kMinor = 0;  // nothing of 1.1 (fp8 codes, sub-byte padding) is produced
constexpr uint64_t kReadOnly = 1;
enum : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };

// WeftDtype -> DLDataType, indexed by WeftDtype.
constexpr DLDataType kDlTypes[] = {{kDLBfloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1},
                                   {kDLInt, 32, 1}, {kDLUInt, 8, 1}};
constexpr int kDtypes = int(sizeof(kDlTypes) / sizeof(kDlTypes[0]));

uint32_t pack(DLDataType t) { return uint32_t(t.code) | uint32_t(t.bits) << 8 | uint32_t(t.lanes) << 16; }

int32_t weft_dtype(DLDataType t) {
  for (int i = 0; i < kDtypes; ++i)
    if (pack(kDlTypes[i]) == pack(t)) return i;
  return -1;
}

bool known_device(int32_t type) {
  return type == WEFT_DLPACK_CPU || type == WEFT_DLPACK_CUDA || type == WEFT_DLPACK_CUDA_HOST ||
         type == WEFT_DLPACK_CUDA_MANAGED;
}

std::atomic<int64_t> live{0};
// A release callback the binding has withdrawn (weft_dlpack_forget_release).
std::atomic<WeftDlpackRelease> forgotten{nullptr};

struct Exported {
  union {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
  };
  int64_t shape[WEFT_DLPACK_MAX_NDIM];
  int64_t strides[WEFT_DLPACK_MAX_NDIM];
  WeftDlpackRelease release;
  void* ctx;
  bool free_data;
  int32_t device;
  void* data;
};

// A deleter has nowhere to report failure, so it never throws: the consumer may call it from any
// thread, in any state, even during its own teardown.
void finish(Exported* e) noexcept {
  if (e->free_data && e->data) {
    int previous = 0;
    if (cudaGetDevice(&previous) == cudaSuccess && previous != e->device) (void)cudaSetDevice(e->device);
    (void)cudaFree(e->data);
    (void)cudaGetLastError();
    if (previous != e->device) (void)cudaSetDevice(previous);
  }
  if (e->release && e->release != forgotten.load(std::memory_order_acquire)) e->release(e->ctx);
  delete e;
  live.fetch_sub(1, std::memory_order_relaxed);
}

void delete_versioned(DLManagedTensorVersioned* self) {
  if (self) finish(static_cast<Exported*>(self->manager_ctx));
}
void delete_legacy(DLManagedTensor* self) {
  if (self) finish(static_cast<Exported*>(self->manager_ctx));
}

void check_desc(const WeftDlpackDesc* d) {
  WEFT_REQUIRE(d, "desc must not be NULL");
  WEFT_REQUIRE(d->size == sizeof(WeftDlpackDesc) && d->version == 1,
               "desc must be a WeftDlpackDesc with size %zu and version 1 (got size %u, version %u)",
               sizeof(WeftDlpackDesc), d->size, d->version);
  WEFT_REQUIRE(d->ndim >= 0 && d->ndim <= WEFT_DLPACK_MAX_NDIM, "desc.ndim must be in [0, %d] (got %d)",
               WEFT_DLPACK_MAX_NDIM, d->ndim);
  WEFT_REQUIRE(d->dtype >= 0 && d->dtype < kDtypes, "desc.dtype %d is not a WeftDtype", d->dtype);
  WEFT_REQUIRE(known_device(d->device_type), "desc.device_type %d is not a WeftDlpackDevice", d->device_type);
  WEFT_REQUIRE(d->device_id >= 0, "desc.device_id must be >= 0 (got %d)", d->device_id);
  int64_t numel = 1;
  for (int i = 0; i < d->ndim; ++i) {
    WEFT_REQUIRE(d->shape[i] >= 0, "desc.shape[%d] must be >= 0 (got %lld)", i, (long long)d->shape[i]);
    numel *= d->shape[i];
  }
  WEFT_REQUIRE(d->data != 0 || numel == 0, "desc.data must not be 0 for a tensor of %lld elements",
               (long long)numel);
}

}  // namespace

extern "C" {

WEFT_API int weft_dlpack_forget_release(WeftDlpackRelease release) {
  forgotten.store(release, std::memory_order_release);
  return WEFT_OK;
}

WEFT_API int weft_dlpack_export(const WeftDlpackDesc* desc, uint32_t flags, WeftDlpackRelease release,
                                void* ctx, void** out_managed) {
  return guard([&] {
    WEFT_REQUIRE(out_managed, "out_managed must not be NULL");
    WEFT_REQUIRE((flags & ~uint32_t(WEFT_DLPACK_VERSIONED | WEFT_DLPACK_FREE_DATA)) == 0,
                 "flags 0x%x has bits that are not WeftDlpackFlags", flags);
    check_desc(desc);
    const bool free_data = flags & WEFT_DLPACK_FREE_DATA;
    WEFT_REQUIRE(!free_data || desc->device_type == WEFT_DLPACK_CUDA,
                 "WEFT_DLPACK_FREE_DATA hands over weft_malloc memory, so device_type must be CUDA (got %d)",
                 desc->device_type);
    auto* e = new Exported{};
    for (int i = 0; i < desc->ndim; ++i) {
      e->shape[i] = desc->shape[i];
      e->strides[i] = desc->strides[i];
    }
    e->release = release;
    e->ctx = ctx;
    e->free_data = free_data;
    e->device = desc->device_id;
    e->data = reinterpret_cast<void*>(desc->data);
    DLTensor t{};
    t.data = e->data;
    t.device = {desc->device_type, desc->device_id};
    t.ndim = desc->ndim;
    t.dtype = kDlTypes[desc->dtype];
    t.shape = e->shape;
    t.strides = e->strides;
    t.byte_offset = 0;
    if (flags & WEFT_DLPACK_VERSIONED) {
      e->versioned.version = {kMajor, kMinor};
      e->versioned.manager_ctx = e;
      e->versioned.deleter = delete_versioned;
      e->versioned.flags = desc->read_only ? kReadOnly : 0;
      e->versioned.dl_tensor = t;
      *out_managed = &e->versioned;
    } else {
      e->legacy.dl_tensor = t;
      e->legacy.manager_ctx = e;
      e->legacy.deleter = delete_legacy;
      *out_managed = &e->legacy;
    }
    live.fetch_add(1, std::memory_order_relaxed);
  });
}

WEFT_API int weft_dlpack_import(const void* managed, uint32_t flags, WeftDlpackDesc* out) {
  return guard([&] {
    WEFT_REQUIRE(managed, "managed must not be NULL");
    WEFT_REQUIRE(out && out->size == sizeof(WeftDlpackDesc),
                 "out must be a WeftDlpackDesc with size %zu", sizeof(WeftDlpackDesc));
    WEFT_REQUIRE((flags & ~uint32_t(WEFT_DLPACK_VERSIONED)) == 0, "import takes only WEFT_DLPACK_VERSIONED");
    const DLTensor* t;
    uint32_t read_only = 0;
    if (flags & WEFT_DLPACK_VERSIONED) {
      auto* v = static_cast<const DLManagedTensorVersioned*>(managed);
      // A new major version may move any field; only the version word is known to be where it is.
      if (v->version.major != kMajor)
        WEFT_FAIL(WEFT_E_UNSUPPORTED, "DLPack version %u.%u: weft reads version 1.x", v->version.major,
                  v->version.minor);
      t = &v->dl_tensor;
      read_only = (v->flags & kReadOnly) ? 1 : 0;
    } else {
      t = &static_cast<const DLManagedTensor*>(managed)->dl_tensor;
    }
    if (t->ndim < 0 || t->ndim > WEFT_DLPACK_MAX_NDIM)
      WEFT_FAIL(WEFT_E_UNSUPPORTED, "a tensor of %d dimensions: weft takes 0 to %d", t->ndim, WEFT_DLPACK_MAX_NDIM);
    WEFT_REQUIRE(t->ndim == 0 || t->shape, "the DLPack tensor has %d dimensions but no shape", t->ndim);
    WeftDlpackDesc d{};
    d.size = sizeof(WeftDlpackDesc);
    d.version = 1;
    d.data = reinterpret_cast<uint64_t>(t->data) + t->byte_offset;
    d.device_type = t->device.device_type;
    d.device_id = t->device.device_id;
    d.ndim = t->ndim;
    d.dtype = weft_dtype(t->dtype);
    d.dl_dtype = pack(t->dtype);
    d.read_only = read_only;
    int64_t compact = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      WEFT_REQUIRE(t->shape[i] >= 0, "the DLPack tensor's shape[%d] is %lld", i, (long long)t->shape[i]);
      d.shape[i] = t->shape[i];
      d.strides[i] = t->strides ? t->strides[i] : compact;
      compact *= t->shape[i];
    }
    *out = d;
  });
}

WEFT_API int weft_dlpack_delete(void* managed, uint32_t flags) {
  return guard([&] {
    if (!managed) return;
    WEFT_REQUIRE((flags & ~uint32_t(WEFT_DLPACK_VERSIONED)) == 0, "delete takes only WEFT_DLPACK_VERSIONED");
    if (flags & WEFT_DLPACK_VERSIONED) {
      auto* v = static_cast<DLManagedTensorVersioned*>(managed);
      if (v->deleter) v->deleter(v);
    } else {
      auto* m = static_cast<DLManagedTensor*>(managed);
      if (m->deleter) m->deleter(m);
    }
  });
}

WEFT_API int weft_dlpack_live(int64_t* out_count) {
  return guard([&] {
    WEFT_REQUIRE(out_count, "out_count must not be NULL");
    *out_count = live.load(std::memory_order_relaxed);
  });
}

}  // extern "C"
