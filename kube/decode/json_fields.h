// Reading API objects held as nlohmann::json field by field, without exceptions: a field that is
// absent or of another type reads as empty. nlohmann's value()/operator[]/get<>() throw (or, on
// a const object, assert) on such input, and an API object is input (style.md: third-party
// exceptions stop in their adapter). Where a wrongly typed field must be reported rather than
// read as empty, parse into a typed view instead (kube/decode/objects.h, kube/decode/records.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ekco::kube {

// The value at `path`, a key into each nested object in turn, or nullptr when a step is missing
// or not an object: jsonFind(pod, {"metadata", "name"}).
inline const nlohmann::json* jsonFind(const nlohmann::json& obj,
                                      std::initializer_list<std::string_view> path) {
  const nlohmann::json* cur = &obj;
  for (std::string_view key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

// The one serialiser of JSON in ekco's own code: `value` as text, with invalid UTF-8 in any string
// replaced by U+FFFD. nlohmann's dump() throws (type_error 316) on such a string, and strings come
// from outside: a command's output, a host path, an API object. Never throws.
// `ascii` escapes every non-ASCII character as \uXXXX (for text shown in messages).
inline std::string jsonDump(const nlohmann::json& value, int indent = -1, bool ascii = false) {
  return value.dump(indent, ' ', ascii, nlohmann::json::error_handler_t::replace);
}

// obj[key], or a null value when obj is not an object or has no such key.
inline const nlohmann::json& jsonField(const nlohmann::json& obj, std::string_view key) {
  static const nlohmann::json kNull;
  const nlohmann::json* v = jsonFind(obj, {key});
  return v != nullptr ? *v : kNull;
}

// obj[key] when it is an array, else an empty array (a reference: nothing is copied).
inline const nlohmann::json& jsonArray(const nlohmann::json& obj, std::string_view key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  const nlohmann::json& v = jsonField(obj, key);
  return v.is_array() ? v : kEmpty;
}

// obj[key] when it is a string, else "".
inline std::string jsonText(const nlohmann::json& obj, std::string_view key) {
  const nlohmann::json& v = jsonField(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// obj[key] when it is an integer that fits in int64, else nullopt.
inline std::optional<std::int64_t> jsonInteger(const nlohmann::json& obj, std::string_view key) {
  const nlohmann::json& v = jsonField(obj, key);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

// metadata.resourceVersion when it is a string, else "".
inline std::string jsonResourceVersion(const nlohmann::json& object) {
  return jsonText(jsonField(object, "metadata"), "resourceVersion");
}

// The JSON-patch (PatchType::kJson) operation that makes the rest of the patch apply only while
// the object is still at `resource_version`: otherwise the API answers 422 and nothing changes.
inline nlohmann::json resourceVersionTest(std::string_view resource_version) {
  return {{"op", "test"},
          {"path", "/metadata/resourceVersion"},
          {"value", std::string(resource_version)}};
}

}  // namespace ekco::kube
