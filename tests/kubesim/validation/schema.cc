#include "tests/kubesim/validation/schema.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>

namespace ekco::kubesim::schema {
namespace {

using nlohmann::json;

bool flag(const json& s, const char* key) { return s.is_object() && s.value(key, false); }

// Go's %v of a float64 (strconv.FormatFloat 'g', shortest): the fewest digits that read back
// the same; an exponent only below 1e-4 or from 1e+06 on ("10", "0.5", "1e+06").
std::string goFloat(double d) {
  char buf[64];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, d);
  const int exponent = std::atoi(std::strchr(buf, 'e') + 1);
  if (exponent < -4 || exponent >= 6) return buf;
  std::snprintf(buf, sizeof buf, "%.*f", std::max(digits - 1 - exponent, 0), d);
  return buf;
}

// How field.Error prints a bad value: strings quoted (%q), numbers and booleans as %v.
std::string goValue(const json& v) {
  if (v.is_string()) return json(v.get<std::string>()).dump();
  if (v.is_number_float()) return goFloat(v.get<double>());
  if (v.is_null()) return "null";
  return v.dump();
}

// The JSON type name kube-openapi reports for a value ("must be of type integer: \"string\"").
std::string typeName(const json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

bool hasType(const json& s, const json& v) {
  if (flag(s, "x-kubernetes-int-or-string")) return v.is_number_integer() || v.is_string();
  const std::string type = s.value("type", "");
  if (type.empty()) return true;
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return true;
}

std::string child(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

void pruneNode(const json& s, json& v, const std::string& path, bool root,
               std::vector<std::string>* unknown) {
  if (!s.is_object()) return;
  if (v.is_object()) {
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    const json& additional = s.value("additionalProperties", json());
    const bool keep_unknown = flag(s, "x-kubernetes-preserve-unknown-fields") ||
                              additional.is_object() || additional == json(true);
    for (auto it = v.begin(); it != v.end();) {
      const json* field_schema = nullptr;
      if (props != nullptr && props->contains(it.key())) {
        field_schema = &(*props)[it.key()];
      } else if (additional.is_object()) {
        field_schema = &additional;
      }
      const std::string at = path.empty() ? it.key() : path + "." + it.key();
      if (field_schema == nullptr && !keep_unknown) {
        const bool type_meta =
            root && (it.key() == "apiVersion" || it.key() == "kind" || it.key() == "metadata");
        if (unknown != nullptr && !type_meta) unknown->push_back(at);
        it = v.erase(it);
        continue;
      }
      if (field_schema != nullptr && it->is_null() && !flag(*field_schema, "nullable")) {
        it = v.erase(it);
        continue;
      }
      if (field_schema != nullptr) pruneNode(*field_schema, *it, at, false, unknown);
      ++it;
    }
  } else if (v.is_array() && s.contains("items")) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      pruneNode(s["items"], v[i], path + "[" + std::to_string(i) + "]", false, unknown);
    }
  }
}

void defaultsNode(const json& s, json& v) {
  if (!s.is_object()) return;
  if (v.is_object() && s.contains("properties")) {
    for (auto& [name, prop] : s["properties"].items()) {
      if (!v.contains(name) && prop.is_object() && prop.contains("default")) {
        v[name] = prop["default"];
      }
      if (v.contains(name)) defaultsNode(prop, v[name]);
    }
  } else if (v.is_array() && s.contains("items")) {
    for (json& item : v) defaultsNode(s["items"], item);
  }
}

void validateNode(const json& s, const json& v, const std::string& path,
                  std::vector<FieldError>& out) {
  if (!s.is_object()) return;
  auto invalid = [&](const std::string& detail) {
    out.push_back({"FieldValueInvalid", path, "Invalid value: " + goValue(v) + ": " + detail});
  };
  if (v.is_null()) {
    if (!flag(s, "nullable") && !s.value("type", "").empty()) {
      out.push_back({"FieldValueTypeInvalid", path,
                     "Invalid value: \"null\": " + path + " in body must be of type " +
                         s.value("type", "") + ": \"null\""});
    }
    return;
  }
  if (!hasType(s, v)) {
    std::string type = flag(s, "x-kubernetes-int-or-string") ? "integer,string" : s["type"];
    out.push_back({"FieldValueTypeInvalid", path,
                   "Invalid value: \"" + typeName(v) + "\": " + path + " in body must be of type " +
                       type + ": \"" + typeName(v) + "\""});
    return;
  }
  if (s.contains("enum") && s["enum"].is_array()) {
    bool found = false;
    std::string supported;
    for (const json& e : s["enum"]) {
      found = found || e == v;
      if (!supported.empty()) supported += ", ";
      supported += goValue(e);
    }
    if (!found) {
      out.push_back({"FieldValueNotSupported", path,
                     "Unsupported value: " + goValue(v) + ": supported values: " + supported});
    }
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (s.contains("minimum") && s["minimum"].is_number()) {
      const double min = s["minimum"].get<double>();
      if (flag(s, "exclusiveMinimum") ? d <= min : d < min) {
        invalid(path + " in body should be greater than " +
                (flag(s, "exclusiveMinimum") ? "" : "or equal to ") + goFloat(min));
      }
    }
    if (s.contains("maximum") && s["maximum"].is_number()) {
      const double max = s["maximum"].get<double>();
      if (flag(s, "exclusiveMaximum") ? d >= max : d > max) {
        invalid(path + " in body should be less than " +
                (flag(s, "exclusiveMaximum") ? "" : "or equal to ") + goFloat(max));
      }
    }
  }
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    // Lengths count characters (runes), as kube-openapi does.
    std::size_t runes = 0;
    for (unsigned char c : text) runes += (c & 0xC0) != 0x80;
    if (s.contains("minLength") && runes < s["minLength"].get<std::size_t>()) {
      invalid(path + " in body should be at least " + s["minLength"].dump() + " chars long");
    }
    if (s.contains("maxLength") && runes > s["maxLength"].get<std::size_t>()) {
      out.push_back({"FieldValueTooLong", path,
                     "Too long: may not be more than " + s["maxLength"].dump() + " bytes"});
    }
    if (s.contains("pattern") && s["pattern"].is_string()) {
      const std::string pattern = s["pattern"];
      try {
        if (!std::regex_search(text, std::regex(pattern, std::regex::ECMAScript))) {
          invalid(path + " in body should match '" + pattern + "'");
        }
      } catch (const std::regex_error&) {
        // A pattern std::regex cannot read is not enforced (Go's RE2 syntax differs a little).
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<std::size_t>()) {
      invalid(path + " in body should have at least " + s["minItems"].dump() + " items");
    }
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<std::size_t>()) {
      out.push_back({"FieldValueTooMany", path,
                     "Too many: " + std::to_string(v.size()) + ": must have at most " +
                         s["maxItems"].dump() + " items"});
    }
    if (s.contains("items")) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        validateNode(s["items"], v[i], path + "[" + std::to_string(i) + "]", out);
      }
    }
  }
  if (v.is_object()) {
    for (const json& r : s.value("required", json::array())) {
      if (r.is_string() && !v.contains(r.get<std::string>())) {
        out.push_back({"FieldValueRequired", child(path, r), "Required value"});
      }
    }
    const json& props = s.value("properties", json::object());
    const json& additional = s.value("additionalProperties", json());
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (path.empty() &&
          (it.key() == "metadata" || it.key() == "apiVersion" || it.key() == "kind")) {
        continue;
      }
      if (props.contains(it.key())) {
        validateNode(props[it.key()], *it, child(path, it.key()), out);
      } else if (additional.is_object()) {
        validateNode(additional, *it, child(path, it.key()), out);
      }
    }
  }
}

}  // namespace

void prune(const json& schema, json& object, std::vector<std::string>* unknown) {
  json kept = json::object();
  for (const char* key : {"apiVersion", "kind", "metadata"}) {
    if (object.contains(key)) kept[key] = object[key];
  }
  pruneNode(schema, object, "", true, unknown);
  for (auto& [key, value] : kept.items()) object[key] = value;
}

void applyDefaults(const json& schema, json& object) { defaultsNode(schema, object); }

std::vector<FieldError> validate(const json& schema, const json& object) {
  std::vector<FieldError> out;
  validateNode(schema, object, "", out);
  return out;
}

std::string aggregate(const std::vector<FieldError>& errors) {
  std::vector<std::string> texts;
  std::set<std::string> seen;
  for (const FieldError& e : errors) {
    std::string text = e.field.empty() ? e.body : e.field + ": " + e.body;
    if (seen.insert(text).second) texts.push_back(text);
  }
  if (texts.size() == 1) return texts[0];
  std::string out = "[";
  for (std::size_t i = 0; i < texts.size(); ++i) out += (i > 0 ? ", " : "") + texts[i];
  return out + "]";
}

}  // namespace ekco::kubesim::schema
