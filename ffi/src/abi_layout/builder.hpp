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
void ops_layout(Builder& l);         // DLPack, MoE (grouped and expert GEMMs too), decoder layers, baselines
void attention_layout(Builder& l);   // the attention engine, ring attention

}  // namespace weft::abi_layout

// WEFT_LAYOUT_STRUCT(S, S_INIT, field, ...): S's size, its _INIT's size and version, every field's
// offset. WEFT_LAYOUT_ENUM(E, VALUE, ...): the named values of enum (or constant group) E. Both
// write to the Builder named `l` of the topic function that uses them.
#define WEFT_LAYOUT_STRUCT(S, INIT, ...)                            \
  do {                                                              \
    const S init_ = INIT;                                           \
    l.begin_struct(#S, sizeof(S), init_.size, init_.version);       \
    WEFT_LAYOUT_FOR_EACH(WEFT_LAYOUT_FIELD_, S, __VA_ARGS__)        \
  } while (0)
#define WEFT_LAYOUT_ENUM(E, ...)                                     \
  do {                                                              \
    l.begin_enum(#E);                                               \
    WEFT_LAYOUT_FOR_EACH(WEFT_LAYOUT_VALUE_, E, __VA_ARGS__)        \
  } while (0)

// Constants that are macros (#define) are named one by one: a name passed on through FOR_EACH would
// be expanded to its value before it is stringized.
#define WEFT_LAYOUT_CONSTANTS(E) l.begin_enum(#E)
#define WEFT_LAYOUT_CONSTANT(v) l.value(#v, int64_t(v))

#define WEFT_LAYOUT_FIELD_(S, f) l.field(#f, offsetof(S, f));
#define WEFT_LAYOUT_VALUE_(E, v) l.value(#v, int64_t(v));

// WEFT_LAYOUT_FOR_EACH(m, a, x, y, ...) is m(a, x) m(a, y) ..., for up to 256 items (C++20 __VA_OPT__).
#define WEFT_LAYOUT_PARENS ()
#define WEFT_LAYOUT_EXPAND(...) WEFT_LAYOUT_EXPAND3(WEFT_LAYOUT_EXPAND3(WEFT_LAYOUT_EXPAND3(WEFT_LAYOUT_EXPAND3(__VA_ARGS__))))
#define WEFT_LAYOUT_EXPAND3(...) WEFT_LAYOUT_EXPAND2(WEFT_LAYOUT_EXPAND2(WEFT_LAYOUT_EXPAND2(WEFT_LAYOUT_EXPAND2(__VA_ARGS__))))
#define WEFT_LAYOUT_EXPAND2(...) WEFT_LAYOUT_EXPAND1(WEFT_LAYOUT_EXPAND1(WEFT_LAYOUT_EXPAND1(WEFT_LAYOUT_EXPAND1(__VA_ARGS__))))
#define WEFT_LAYOUT_EXPAND1(...) __VA_ARGS__
#define WEFT_LAYOUT_FOR_EACH(m, a, ...) __VA_OPT__(WEFT_LAYOUT_EXPAND(WEFT_LAYOUT_FOR_EACH_(m, a, __VA_ARGS__)))
#define WEFT_LAYOUT_FOR_EACH_(m, a, x, ...) m(a, x) __VA_OPT__(WEFT_LAYOUT_FOR_EACH_AGAIN WEFT_LAYOUT_PARENS(m, a, __VA_ARGS__))
#define WEFT_LAYOUT_FOR_EACH_AGAIN() WEFT_LAYOUT_FOR_EACH_
