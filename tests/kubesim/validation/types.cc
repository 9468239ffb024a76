#include "tests/kubesim/validation/types.h"

#include <string_view>
#include <vector>

namespace ekco::kubesim {
namespace {

using nlohmann::json;

enum class T { kString, kInt, kBool, kObject, kArray, kStringMap, kStringArray, kTime, kBytesMap };

// One field: its path from the object's root, the Go struct named in messages, and its type.
struct Field {
  std::vector<std::string_view> path;
  std::string_view go_struct;
  T type;
};

std::string goTypeName(T t) {
  switch (t) {
    case T::kString:
      return "string";
    case T::kInt:
      return "int64";
    case T::kBool:
      return "bool";
    case T::kObject:
      return "struct";
    case T::kArray:
      return "[]struct";
    case T::kStringMap:
      return "map[string]string";
    case T::kStringArray:
      return "[]string";
    case T::kTime:
      return "v1.Time";
    case T::kBytesMap:
      return "map[string][]uint8";
  }
  return "?";
}

// The JSON type as Go's decoder names it ("number 1.5" for a fraction given to an integer).
std::string jsonTypeName(const json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "bool";
  if (v.is_number_float()) return "number " + v.dump();
  if (v.is_number()) return "number";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

bool hasType(const json& v, T t) {
  if (v.is_null()) return true;
  switch (t) {
    case T::kString:
    case T::kTime:
      return v.is_string();
    case T::kInt:
      return v.is_number_integer();
    case T::kBool:
      return v.is_boolean();
    case T::kObject:
      return v.is_object();
    case T::kArray:  // of structs
      if (!v.is_array()) return false;
      for (const auto& item : v) {
        if (!item.is_object() && !item.is_null()) return false;
      }
      return true;
    case T::kStringMap:
    case T::kBytesMap:
      if (!v.is_object()) return false;
      for (const auto& [k, item] : v.items()) {
        if (!item.is_string()) return false;
      }
      return true;
    case T::kStringArray:
      if (!v.is_array()) return false;
      for (const auto& item : v) {
        if (!item.is_string()) return false;
      }
      return true;
  }
  return false;
}

const std::vector<Field>& commonFields() {
  static const std::vector<Field> fields = {
      {{"apiVersion"}, "TypeMeta", T::kString},
      {{"kind"}, "TypeMeta", T::kString},
      {{"metadata"}, "ObjectMeta", T::kObject},
      {{"metadata", "name"}, "ObjectMeta", T::kString},
      {{"metadata", "generateName"}, "ObjectMeta", T::kString},
      {{"metadata", "namespace"}, "ObjectMeta", T::kString},
      {{"metadata", "uid"}, "ObjectMeta", T::kString},
      {{"metadata", "resourceVersion"}, "ObjectMeta", T::kString},
      {{"metadata", "selfLink"}, "ObjectMeta", T::kString},
      {{"metadata", "generation"}, "ObjectMeta", T::kInt},
      {{"metadata", "deletionGracePeriodSeconds"}, "ObjectMeta", T::kInt},
      {{"metadata", "creationTimestamp"}, "ObjectMeta", T::kTime},
      {{"metadata", "deletionTimestamp"}, "ObjectMeta", T::kTime},
      {{"metadata", "labels"}, "ObjectMeta", T::kStringMap},
      {{"metadata", "annotations"}, "ObjectMeta", T::kStringMap},
      {{"metadata", "finalizers"}, "ObjectMeta", T::kStringArray},
      {{"metadata", "ownerReferences"}, "ObjectMeta", T::kArray},
      {{"metadata", "managedFields"}, "ObjectMeta", T::kArray},
  };
  return fields;
}

const std::vector<Field>& kindFields(const std::string& kind) {
  static const std::vector<Field> none;
  static const std::vector<Field> pod = {
      {{"spec"}, "Pod", T::kObject},
      {{"status"}, "Pod", T::kObject},
      {{"spec", "nodeName"}, "PodSpec", T::kString},
      {{"spec", "terminationGracePeriodSeconds"}, "PodSpec", T::kInt},
      {{"spec", "containers"}, "PodSpec", T::kArray},
      {{"spec", "initContainers"}, "PodSpec", T::kArray},
      {{"spec", "volumes"}, "PodSpec", T::kArray},
      {{"spec", "nodeSelector"}, "PodSpec", T::kStringMap},
      {{"spec", "tolerations"}, "PodSpec", T::kArray},
      {{"status", "phase"}, "PodStatus", T::kString},
      {{"status", "conditions"}, "PodStatus", T::kArray},
      {{"status", "containerStatuses"}, "PodStatus", T::kArray},
  };
  static const std::vector<Field> node = {
      {{"spec"}, "Node", T::kObject},
      {{"status"}, "Node", T::kObject},
      {{"spec", "unschedulable"}, "NodeSpec", T::kBool},
      {{"spec", "taints"}, "NodeSpec", T::kArray},
      {{"status", "conditions"}, "NodeStatus", T::kArray},
      {{"status", "addresses"}, "NodeStatus", T::kArray},
  };
  static const std::vector<Field> workload = {
      {{"spec"}, "Workload", T::kObject},         {{"status"}, "Workload", T::kObject},
      {{"spec", "replicas"}, "Spec", T::kInt},    {{"spec", "selector"}, "Spec", T::kObject},
      {{"spec", "template"}, "Spec", T::kObject},
  };
  static const std::vector<Field> lease = {
      {{"spec"}, "Lease", T::kObject},
      {{"spec", "holderIdentity"}, "LeaseSpec", T::kString},
      {{"spec", "leaseDurationSeconds"}, "LeaseSpec", T::kInt},
      {{"spec", "acquireTime"}, "LeaseSpec", T::kTime},
      {{"spec", "renewTime"}, "LeaseSpec", T::kTime},
      {{"spec", "leaseTransitions"}, "LeaseSpec", T::kInt},
  };
  static const std::vector<Field> config_map = {
      {{"data"}, "ConfigMap", T::kStringMap},
      {{"binaryData"}, "ConfigMap", T::kBytesMap},
      {{"immutable"}, "ConfigMap", T::kBool},
  };
  static const std::vector<Field> secret = {
      {{"data"}, "Secret", T::kBytesMap},
      {{"stringData"}, "Secret", T::kStringMap},
      {{"type"}, "Secret", T::kString},
      {{"immutable"}, "Secret", T::kBool},
  };
  static const std::vector<Field> event = {
      {{"involvedObject"}, "Event", T::kObject},
      {{"reason"}, "Event", T::kString},
      {{"message"}, "Event", T::kString},
      {{"type"}, "Event", T::kString},
      {{"count"}, "Event", T::kInt},
  };
  if (kind == "Pod") return pod;
  if (kind == "Node") return node;
  if (kind == "Deployment" || kind == "StatefulSet" || kind == "ReplicaSet" ||
      kind == "DaemonSet") {
    return workload;
  }
  if (kind == "Lease") return lease;
  if (kind == "ConfigMap") return config_map;
  if (kind == "Secret") return secret;
  if (kind == "Event") return event;
  return none;
}

// The value at `path`, or null when a step is missing (a wrong-typed parent is reported by
// its own entry, which comes first in the tables).
const json* at(const json& object, const std::vector<std::string_view>& path) {
  const json* v = &object;
  for (std::string_view step : path) {
    if (!v->is_object()) return nullptr;
    auto it = v->find(step);
    if (it == v->end()) return nullptr;
    v = &*it;
  }
  return v;
}

std::string dotted(const std::vector<std::string_view>& path) {
  std::string out;
  for (std::string_view step : path) {
    if (!out.empty()) out += '.';
    out += step;
  }
  return out;
}

std::optional<std::string> check(const json& object, const std::vector<Field>& fields) {
  for (const Field& f : fields) {
    const json* v = at(object, f.path);
    if (v == nullptr) continue;
    if (hasType(*v, f.type)) {
      if (f.type != T::kBytesMap || !v->is_object()) continue;
      for (const auto& [key, item] : v->items()) {
        std::string error;
        if (!decodeBase64(item.get<std::string>(), &error)) return error;
      }
      continue;
    }
    return "json: cannot unmarshal " + jsonTypeName(*v) + " into Go struct field " +
           std::string(f.go_struct) + "." + dotted(f.path) + " of type " + goTypeName(f.type);
  }
  return std::nullopt;
}

int base64Value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

// Go's encoding/base64 decodeQuantum, quantum by quantum, for its error offsets.
std::optional<std::string> decodeBase64(std::string_view src, std::string* error) {
  auto fail = [&](std::size_t at) -> std::optional<std::string> {
    *error = "illegal base64 data at input byte " + std::to_string(at);
    return std::nullopt;
  };
  std::string out;
  std::size_t si = 0;
  while (true) {
    int dbuf[4] = {0, 0, 0, 0};
    int dlen = 4;
    bool end = false;
    for (int j = 0; j < 4; ++j) {
      if (si == src.size()) {
        if (j == 0) return out;
        return fail(si - static_cast<std::size_t>(j));
      }
      unsigned char in = static_cast<unsigned char>(src[si]);
      ++si;
      int value = base64Value(in);
      if (value >= 0) {
        dbuf[j] = value;
        continue;
      }
      if (in == '\n' || in == '\r') {
        --j;
        continue;
      }
      if (in != '=') return fail(si - 1);
      if (j == 0 || j == 1) return fail(si - 1);
      if (j == 2) {
        while (si < src.size() && (src[si] == '\n' || src[si] == '\r')) ++si;
        if (si == src.size()) return fail(src.size());
        if (src[si] != '=') return fail(si - 1);
        ++si;
      }
      while (si < src.size() && (src[si] == '\n' || src[si] == '\r')) ++si;
      if (si < src.size()) return fail(si);
      dlen = j;
      end = true;
      break;
    }
    unsigned val = static_cast<unsigned>(dbuf[0]) << 18 | static_cast<unsigned>(dbuf[1]) << 12 |
                   static_cast<unsigned>(dbuf[2]) << 6 | static_cast<unsigned>(dbuf[3]);
    char bytes[3] = {static_cast<char>(val >> 16), static_cast<char>(val >> 8),
                     static_cast<char>(val)};
    out.append(bytes, static_cast<std::size_t>(dlen - 1));
    if (end) return out;
  }
}

std::string encodeBase64(std::string_view bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16 |
                 static_cast<unsigned char>(bytes[i + 1]) << 8 |
                 static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[v >> 18 & 63];
    out += alphabet[v >> 12 & 63];
    out += alphabet[v >> 6 & 63];
    out += alphabet[v & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += alphabet[v >> 18 & 63];
    out += alphabet[v >> 12 & 63];
    out += rest == 2 ? alphabet[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> typeError(const json& object, const std::string& kind) {
  if (!object.is_object())
    return "json: cannot unmarshal " + jsonTypeName(object) + " into " + kind;
  if (auto bad = check(object, commonFields())) return bad;
  return check(object, kindFields(kind));
}

}  // namespace ekco::kubesim
