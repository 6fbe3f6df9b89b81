// builder.cpp — the JSON writer of builder.hpp and weft_abi_layout itself.
#include "abi_layout/builder.hpp"

#include <string_view>

#include "status.hpp"

namespace weft::abi_layout {

namespace {

void append(std::string& out, std::initializer_list<std::string_view> pieces) {
  for (std::string_view p : pieces) out.append(p);
}

}  // namespace

void Builder::begin_struct(const char* name, size_t size, uint32_t init_size, uint32_t init_version) {
  append(structs_, {in_struct_ ? "}},\"" : "\"", name, "\":{\"sizeof\":", std::to_string(size), ",\"init\":{\"size\":",
                    std::to_string(init_size), ",\"version\":", std::to_string(init_version), "},\"fields\":{"});
  in_struct_ = true;
  first_field_ = true;
}

void Builder::field(const char* name, size_t offset) {
  append(structs_, {first_field_ ? "\"" : ",\"", name, "\":", std::to_string(offset)});
  first_field_ = false;
}

void Builder::begin_enum(const char* name) {
  append(enums_, {in_enum_ ? "},\"" : "\"", name, "\":{"});
  in_enum_ = true;
  first_value_ = true;
}

void Builder::value(const char* name, int64_t value) {
  append(enums_, {first_value_ ? "\"" : ",\"", name, "\":", std::to_string(value)});
  first_value_ = false;
}

std::string Builder::json() const {
  return "{\"structs\":{" + structs_ + (in_struct_ ? "}}" : "") + "},\"enums\":{" + enums_ + (in_enum_ ? "}" : "") + "}}";
}

}  // namespace weft::abi_layout

extern "C" WEFT_API int weft_abi_layout(const char** out_json) {
  return weft::guard([&] {
    WEFT_REQUIRE(out_json, "out_json must not be NULL");
    static const std::string json = [] {
      weft::abi_layout::Builder l;
      weft::abi_layout::runtime_layout(l);
      weft::abi_layout::comm_layout(l);
      weft::abi_layout::inter_node_layout(l);
      weft::abi_layout::ops_layout(l);
      weft::abi_layout::attention_layout(l);
      return l.json();
    }();
    *out_json = json.c_str();
  });
}
