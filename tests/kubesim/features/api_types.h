// The built-in kinds' Go types as kubesim knows them: the messages of k8s.io/api and
// k8s.io/apimachinery v0.32 (protobuf_schema.inc, generated from their generated.proto files by
// tools/gen_protobuf_schema.py), which give each field's JSON name, whether it is a list or a
// map, and its type. One table for the protobuf decoder, server-side field validation and the
// OpenAPI documents, so the three agree.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace ekco::kubesim::api_types {

inline constexpr std::string_view kMeta = "k8s.io.apimachinery.pkg.apis.meta.v1.";

struct Field {
  std::string name{};        // the JSON name
  char label = 'o';          // o optional, r repeated, m map
  std::string type{};        // a scalar's protobuf name, or a message's full name
  std::string value_type{};  // of a map
};

// A message's fields by protobuf number.
using Message = std::map<int, Field>;

// Every message by its full protobuf name ("k8s.io.api.core.v1.Pod").
const std::map<std::string, Message, std::less<>>& messages();

// Whether a protobuf type is a scalar (string, bytes, bool, int32, ...), not a message.
bool isScalar(std::string_view type);

// Go structs embedded with `json:",inline"`: a message field in protobuf, their fields at the
// embedding object's level in JSON.
bool isInline(const Field& field);

// Types whose JSON form is not their message's fields (Time, MicroTime, FieldsV1, RawExtension,
// Quantity, IntOrString, ExtraValue): leaves, not objects to walk.
bool isOpaque(std::string_view type);

// The message of an apiVersion ("rbac.authorization.k8s.io/v1" → k8s.io.api.rbac.v1) and kind;
// it may not exist in messages().
std::string messageOf(const std::string& api_version, const std::string& kind);

// A message's JSON fields by name: its own and those of the structs it embeds inline. nullptr
// for a type that is not a message.
const std::map<std::string_view, const Field*>* jsonFields(std::string_view type);

}  // namespace ekco::kubesim::api_types
