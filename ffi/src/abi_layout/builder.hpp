// builder.hpp — how weft_abi_layout's JSON is written (ffi/src/abi_layout/): every ABI struct with
// sizeof, its _INIT's size and version, and offsetof of every field, as the C compiler lays them
// out; every enum and constant by name. test/abi.test.ts and ffi/python/tests/test_abi.py compare
// the bindings' packings and mirrors with it. One file per topic adds its structs and enums; a new
// ABI struct or enum is added there (a struct without an _INIT does not compile: STRUCT uses it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "weft.h"

namespace weft::abi_layout {

class Builder {
 public:
  void begin_struct(const char* name, size_t size, uint32_t init_size, uint32_t init_version);
  void field(const char* name, size_t offset);
  void begin_enum(const char* name);
  void value(const char* name, int64_t value);
  std::string json() const;

 private:
  std::string structs_, enums_;
  bool in_struct_ = false, in_enum_ = false, first_field_ = true, first_value_ = true;
};

// One per topic file.
void runtime_layout(Builder& l);     // library, devices, memory, launch, test support, GEMM
void comm_layout(Builder& l);        // communicator, collectives, tensor-parallel ops
void inter_node_layout(Builder& l);  // transport, proxy, multi-node communicator
void ops_layout(Builder& l);         // DLPack, MoE, decoder layers, baselines

}  // namespace weft::abi_layout

// A struct's size and its _INIT's size and version (INIT: the macro, spelled out).
#define WEFT_LAYOUT_STRUCT(l, S, INIT)                                          \
  do {                                                                          \
    const S init_ = INIT;                                                       \
    (l).begin_struct(#S, sizeof(S), init_.size, init_.version);                 \
  } while (0)
#define WEFT_LAYOUT_FIELD(l, S, f) (l).field(#f, offsetof(S, f))
#define WEFT_LAYOUT_ENUM(l, E) (l).begin_enum(#E)
#define WEFT_LAYOUT_VALUE(l, v) (l).value(#v, int64_t(v))
