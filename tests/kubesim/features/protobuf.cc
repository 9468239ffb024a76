#include "tests/kubesim/features/protobuf.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "tests/kubesim/features/api_types.h"
#include "tests/kubesim/validation/api_time.h"

namespace ekco::kubesim::protobuf {
namespace {

using nlohmann::json;

using api_types::Field;
using api_types::isInline;
using api_types::kMeta;

base::Error malformed(const std::string& what) {
  return base::Error("protobuf body: " + what, base::ErrorCode::kParse);
}

struct Raw {
  int number = 0;
  int wire = 0;
  std::uint64_t varint = 0;  // wire types 0, 1, 5
  std::string_view bytes{};  // wire type 2
};

bool readVarint(std::string_view& in, std::uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto b = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    out |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

base::Result<std::vector<Raw>> readFields(std::string_view in) {
  std::vector<Raw> out;
  while (!in.empty()) {
    std::uint64_t key = 0;
    if (!readVarint(in, key)) return malformed("truncated field key");
    Raw f{.number = static_cast<int>(key >> 3), .wire = static_cast<int>(key & 7)};
    if (f.wire == 0) {
      if (!readVarint(in, f.varint)) return malformed("truncated varint");
    } else if (f.wire == 1 || f.wire == 5) {
      const std::size_t n = f.wire == 1 ? 8 : 4;
      if (in.size() < n) return malformed("truncated fixed-width value");
      for (std::size_t i = 0; i < n; ++i) {
        f.varint |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
      }
      in.remove_prefix(n);
    } else if (f.wire == 2) {
      std::uint64_t n = 0;
      if (!readVarint(in, n) || n > in.size()) return malformed("truncated length-delimited value");
      f.bytes = in.substr(0, n);
      in.remove_prefix(n);
    } else {
      return malformed("unsupported wire type " + std::to_string(f.wire));
    }
    out.push_back(f);
  }
  return out;
}

std::string base64(std::string_view data) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const auto n = (static_cast<unsigned char>(data[i]) << 16) |
                   (static_cast<unsigned char>(data[i + 1]) << 8) |
                   static_cast<unsigned char>(data[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(n >> s) & 63];
  }
  if (i + 1 == data.size()) {
    const auto n = static_cast<unsigned char>(data[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == data.size()) {
    const auto n = (static_cast<unsigned char>(data[i]) << 16) |
                   (static_cast<unsigned char>(data[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

base::Result<json> decodeMessage(const std::string& type, std::string_view bytes, int depth);

// A time (meta/v1 Time, MicroTime) as its JSON text; null for the zero time, as Go marshals it.
base::Result<json> decodeTime(std::string_view bytes, bool micro) {
  auto fields = readFields(bytes);
  EKCO_TRY(fields);
  std::int64_t seconds = 0;
  std::int64_t nanos = 0;
  for (const Raw& f : *fields) {
    if (f.number == 1 && f.wire == 0) seconds = static_cast<std::int64_t>(f.varint);
    if (f.number == 2 && f.wire == 0) nanos = static_cast<std::int32_t>(f.varint);
  }
  if (seconds == 0 && nanos == 0) return json(nullptr);
  const std::time_t t = seconds;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (micro) {
    std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(nanos / 1000));
    out += buf;
  }
  return json(out + "Z");
}

base::Result<json> decodeScalar(const Field& info, const std::string& type, const Raw& f,
                                int depth) {
  const bool varint = f.wire == 0;
  if (type == "string") {
    if (f.wire != 2) return malformed(info.name + ": expected a string");
    return json(std::string(f.bytes));
  }
  if (type == "bytes") {
    if (f.wire != 2) return malformed(info.name + ": expected bytes");
    return json(base64(f.bytes));
  }
  if (type == "bool" && varint) return json(f.varint != 0);
  if ((type == "int32" || type == "sint32") && varint) {
    return json(static_cast<std::int64_t>(static_cast<std::int32_t>(f.varint)));
  }
  if ((type == "int64" || type == "uint64" || type == "uint32") && varint) {
    return json(static_cast<std::int64_t>(f.varint));
  }
  if (type == "double" && f.wire == 1) {
    double d = 0;
    std::memcpy(&d, &f.varint, sizeof d);
    return json(d);
  }
  if (type == "float" && f.wire == 5) {
    float d = 0;
    const auto bits = static_cast<std::uint32_t>(f.varint);
    std::memcpy(&d, &bits, sizeof d);
    return json(static_cast<double>(d));
  }
  if (f.wire == 2) return decodeMessage(type, f.bytes, depth + 1);
  return malformed(info.name + ": wire type " + std::to_string(f.wire) + " for " + type);
}

base::Result<json> decodeMessage(const std::string& type, std::string_view bytes, int depth) {
  if (depth > 64) return malformed("nested too deeply");
  // The types with their own JSON form.
  if (type == std::string(kMeta) + "Time") return decodeTime(bytes, false);
  if (type == std::string(kMeta) + "MicroTime") return decodeTime(bytes, true);
  auto fields = readFields(bytes);
  EKCO_TRY(fields);
  if (type == "k8s.io.apimachinery.pkg.api.resource.Quantity") {
    for (const Raw& f : *fields) {
      if (f.number == 1 && f.wire == 2) return json(std::string(f.bytes));
    }
    return json("0");
  }
  if (type.size() > 11 && type.compare(type.size() - 11, 11, ".ExtraValue") == 0) {
    // A Go []string that protobuf wraps in a message: JSON is the bare list.
    json items = json::array();
    for (const Raw& f : *fields) {
      if (f.number == 1 && f.wire == 2) items.push_back(std::string(f.bytes));
    }
    return items;
  }
  if (type == "k8s.io.apimachinery.pkg.util.intstr.IntOrString") {
    std::int64_t kind = 0;
    json int_value = 0;
    json str_value = "";
    for (const Raw& f : *fields) {
      if (f.number == 1 && f.wire == 0) kind = static_cast<std::int64_t>(f.varint);
      if (f.number == 2 && f.wire == 0) int_value = static_cast<std::int32_t>(f.varint);
      if (f.number == 3 && f.wire == 2) str_value = std::string(f.bytes);
    }
    return kind == 1 ? str_value : int_value;
  }
  if (type == std::string(kMeta) + "FieldsV1" ||
      type == "k8s.io.apimachinery.pkg.runtime.RawExtension") {
    for (const Raw& f : *fields) {
      if (f.number == 1 && f.wire == 2) {
        json parsed = json::parse(f.bytes, nullptr, false);
        if (parsed.is_discarded()) return malformed(type + ": raw is not JSON");
        return parsed;
      }
    }
    return json(nullptr);
  }
  auto message = api_types::messages().find(type);
  if (message == api_types::messages().end()) {
    return base::Error("protobuf body: kubesim has no schema for " + type,
                       base::ErrorCode::kNotFound);
  }
  json out = json::object();
  for (const Raw& f : *fields) {
    auto known = message->second.find(f.number);
    if (known == message->second.end()) {
      return malformed("field " + std::to_string(f.number) + " of " + type + " is unknown");
    }
    const Field& info = known->second;
    if (info.label == 'm') {
      auto entry = readFields(f.bytes);
      EKCO_TRY(entry);
      std::string key;
      json value = info.value_type == "string" ? json("") : json(nullptr);
      for (const Raw& e : *entry) {
        if (e.number == 1 && e.wire == 2) key = std::string(e.bytes);
        if (e.number == 2) {
          auto v = decodeScalar(info, info.value_type, e, depth);
          EKCO_TRY(v);
          value = std::move(*v);
        }
      }
      if (info.value_type == "bytes" && value.is_null()) value = "";
      if (!out.contains(info.name)) out[info.name] = json::object();
      out[info.name][key] = std::move(value);
      continue;
    }
    std::vector<Raw> items{f};
    const bool numeric = info.type != "string" && info.type != "bytes" &&
                         api_types::messages().find(info.type) == api_types::messages().end() &&
                         info.type.find('.') == std::string::npos;
    if (info.label == 'r' && numeric && f.wire == 2) {
      // A packed repeated scalar.
      items.clear();
      std::string_view packed = f.bytes;
      while (!packed.empty()) {
        Raw item{.number = f.number, .wire = 0};
        if (info.type == "double" || info.type == "fixed64") {
          if (packed.size() < 8) return malformed(info.name + ": truncated packed value");
          item.wire = 1;
          for (std::size_t i = 0; i < 8; ++i) {
            item.varint |= static_cast<std::uint64_t>(static_cast<unsigned char>(packed[i]))
                           << (8 * i);
          }
          packed.remove_prefix(8);
        } else if (!readVarint(packed, item.varint)) {
          return malformed(info.name + ": truncated packed value");
        }
        items.push_back(item);
      }
    }
    for (const Raw& item : items) {
      auto v = decodeScalar(info, info.type, item, depth);
      EKCO_TRY(v);
      if (info.label == 'r') {
        if (!out.contains(info.name)) out[info.name] = json::array();
        out[info.name].push_back(std::move(*v));
      } else if (isInline(info) && v->is_object()) {
        for (auto& [k, inner] : v->items()) out[k] = std::move(inner);
      } else if (v->is_null() || (v->is_string() && v->get_ref<const std::string&>().empty())) {
        // Go's generated marshaller writes every non-pointer field; an empty string or a zero
        // time is what `omitempty` leaves out of the JSON form.
        out.erase(info.name);
      } else {
        out[info.name] = std::move(*v);
      }
    }
  }
  return out;
}

void dropUnknown(const std::string& type, json& value, const std::string& path, bool root,
                 std::vector<std::string>& unknown, int depth) {
  const bool time = type == std::string(kMeta) + "Time";
  if ((time || type == std::string(kMeta) + "MicroTime") && value.is_string()) {
    // metav1.Time and MicroTime decode any RFC 3339 time and are written back in UTC.
    if (auto t = parseApiTime(value.get<std::string>())) value = formatApiTime(*t, !time);
    return;
  }
  if (depth > 64 || api_types::isOpaque(type) || !value.is_object()) return;
  const auto* fields = api_types::jsonFields(type);
  if (fields == nullptr) return;
  const auto& by_name = *fields;
  for (auto it = value.begin(); it != value.end();) {
    const std::string& key = it.key();
    // TypeMeta, inline in every object (an embedded PersistentVolumeClaim of a StatefulSet's
    // volumeClaimTemplates may carry it too).
    if ((root || by_name.contains("metadata")) && (key == "apiVersion" || key == "kind")) {
      ++it;
      continue;
    }
    const std::string at = path.empty() ? key : path + "." + key;
    auto field = by_name.find(key);
    if (field == by_name.end()) {
      unknown.push_back(at);
      it = value.erase(it);
      continue;
    }
    const Field& info = *field->second;
    if (info.label == 'r' && it->is_array()) {
      for (std::size_t i = 0; i < it->size(); ++i) {
        dropUnknown(info.type, (*it)[i], at + "[" + std::to_string(i) + "]", false, unknown,
                    depth + 1);
      }
    } else if (info.label == 'm' && it->is_object()) {
      for (auto& [k, v] : it->items()) {
        dropUnknown(info.value_type, v, at + "." + k, false, unknown, depth + 1);
      }
    } else if (info.label == 'o') {
      dropUnknown(info.type, *it, at, false, unknown, depth + 1);
    }
    ++it;
  }
}

}  // namespace

std::optional<std::vector<std::string>> dropUnknownFields(json& object) {
  if (!object.is_object()) return std::nullopt;
  const std::string type = api_types::messageOf(object.value("apiVersion", std::string()),
                                                object.value("kind", std::string()));
  if (api_types::messages().find(type) == api_types::messages().end()) return std::nullopt;
  std::vector<std::string> unknown;
  dropUnknown(type, object, "", true, unknown, 0);
  return unknown;
}

bool isProtobuf(std::string_view content_type) {
  return content_type.substr(0, content_type.find(';')) == "application/vnd.kubernetes.protobuf";
}

base::Result<json> decode(std::string_view body) {
  constexpr std::string_view kMagic("k8s\0", 4);
  if (body.substr(0, kMagic.size()) != kMagic) {
    return malformed("does not start with the Kubernetes protobuf magic \"k8s\\x00\"");
  }
  auto unknown = readFields(body.substr(kMagic.size()));
  EKCO_TRY(unknown);
  std::string api_version;
  std::string kind;
  std::string_view raw;
  bool has_raw = false;
  for (const Raw& f : *unknown) {
    if (f.number == 1 && f.wire == 2) {
      auto type_meta = readFields(f.bytes);
      EKCO_TRY(type_meta);
      for (const Raw& t : *type_meta) {
        if (t.number == 1 && t.wire == 2) api_version = std::string(t.bytes);
        if (t.number == 2 && t.wire == 2) kind = std::string(t.bytes);
      }
    } else if (f.number == 2 && f.wire == 2) {
      raw = f.bytes;
      has_raw = true;
    }
  }
  if (kind.empty() || !has_raw) return malformed("the envelope has no kind or no raw object");
  const std::string type = api_types::messageOf(api_version, kind);
  if (api_types::messages().find(type) == api_types::messages().end()) {
    return base::Error(
        "protobuf body: kubesim decodes no " + kind + " in version \"" + api_version + "\"",
        base::ErrorCode::kNotFound);
  }
  auto object = decodeMessage(type, raw, 0);
  EKCO_TRY(object);
  json out = {{"apiVersion", api_version}, {"kind", kind}};
  for (auto& [key, value] : object->items()) out[key] = std::move(value);
  return out;
}

}  // namespace ekco::kubesim::protobuf
