// What the simdjson decoders share (kube/watch/list_decode.cc, kube/decode/record_decode.cc).
// Included by .cc files only, so simdjson's large header stays out of the rest of the build.
#pragma once

#include <simdjson.h>

#include <memory>
#include <string>
#include <string_view>

#include "kube/decode/json_text.h"

namespace ekco::kube::simd {

namespace ondemand = simdjson::ondemand;

static_assert(kJsonPadding == simdjson::SIMDJSON_PADDING,
              "kJsonPadding must equal SIMDJSON_PADDING");

// nlohmann's names for the types, which the error messages have always used.
inline const char* typeName(ondemand::json_type type) {
  switch (type) {
    case ondemand::json_type::array:
      return "array";
    case ondemand::json_type::object:
      return "object";
    case ondemand::json_type::number:
      return "number";
    case ondemand::json_type::string:
      return "string";
    case ondemand::json_type::boolean:
      return "boolean";
    case ondemand::json_type::null:
      return "null";
  }
  return "?";
}

// Objects up to this size keep a parser's buffers between calls; a larger one (rare: etcd
// bounds an object at ~1.5 MiB) frees them afterwards, so one big object leaves no big buffer.
inline constexpr std::size_t kKeptItemCapacity = std::size_t{256} << 10;

// This thread's parser for single objects (list items, watch objects). Its buffers grow to the
// largest object read; trimItemParser() drops them when that was large.
ondemand::parser& itemParser();
void trimItemParser();

// A string member's value into `out`; anything else leaves it empty (metadata members ekco reads
// are strings). False when the value is not valid JSON.
inline bool stringOrEmpty(ondemand::value& value, std::string& out) {
  out.clear();
  ondemand::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS) return false;
  if (type != ondemand::json_type::string) return true;
  std::string_view text;
  if (value.get_string().get(text) != simdjson::SUCCESS) return false;
  out.assign(text);
  return true;
}

// True when the whole document was read: no trailing content after the value (simdjson 3.0's
// document has no at_end(); its location past the last token is OUT_OF_BOUNDS).
inline bool atEnd(ondemand::document& doc) {
  return doc.current_location().error() == simdjson::OUT_OF_BOUNDS;
}

inline simdjson::simdjson_result<ondemand::document> iterate(ondemand::parser& parser,
                                                             JsonText text) {
  return parser.iterate(text.text.data(), text.text.size(), text.capacity);
}

}  // namespace ekco::kube::simd
