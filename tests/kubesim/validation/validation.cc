// Field errors and the generic rules: the message texts are k8s.io/apimachinery 0.32's
// (pkg/util/validation, pkg/api/validation/objectmeta.go, pkg/util/validation/field/errors.go).
#include "tests/kubesim/validation/validation.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <regex>
#include <set>

#include "tests/kubesim/store/store_support.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::str;

namespace {

constexpr const char* kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr const char* kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr const char* kDns1035LabelFmt = "[a-z]([-a-z0-9]*[a-z0-9])?";
constexpr const char* kQualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr const char* kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr const char* kConfigMapKeyFmt = "[-._a-zA-Z0-9]+";
constexpr const char* kQualifiedNameErrMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr long kTotalAnnotationSizeLimit = 256 * 1024;

// Whether the whole value matches fmt (one of the formats above; compiled once each).
bool fullMatch(const std::string& value, const char* fmt) {
  static std::mutex mu;
  static std::map<const char*, std::regex> compiled;
  const std::regex* re = nullptr;
  {
    std::lock_guard lock(mu);
    auto it = compiled.find(fmt);
    if (it == compiled.end()) it = compiled.emplace(fmt, std::regex(fmt)).first;
    re = &it->second;
  }
  return std::regex_match(value, *re);
}

std::string maxLenError(int length) {
  return "must be no more than " + std::to_string(length) + " characters";
}

std::string regexError(const std::string& msg, const std::string& fmt,
                       const std::vector<std::string>& examples) {
  std::string out = msg + " (e.g. ";
  for (std::size_t i = 0; i < examples.size(); ++i) {
    if (i > 0) out += " or ";
    out += "'" + examples[i] + "', ";
  }
  return out + "regex used for validation is '" + fmt + "')";
}

// Go's %#v of a JSON value as the validators pass it: []string{"a", "b"},
// map[string]string{"k":"v"}, plain numbers and booleans.
std::string goValue(const json& v) {
  if (v.is_string()) return goQuote(v.get<std::string>());
  if (v.is_array()) {
    std::string out = "[]string{";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      out += v[i].is_string() ? goQuote(v[i].get<std::string>()) : v[i].dump();
    }
    return out + "}";
  }
  if (v.is_object()) {
    std::string out = "map[string]string{";
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += goQuote(k) + ":" + (item.is_string() ? goQuote(item.get<std::string>()) : item.dump());
    }
    return out + "}";
  }
  if (v.is_null()) return "null";
  return v.dump();
}

std::string maskTrailingDash(const std::string& name) {
  if (name.size() > 1 && name.back() == '-') return name.substr(0, name.size() - 2) + "a";
  return name;
}

std::vector<std::string> pathSegmentName(const std::string& name) {
  if (name == ".") return {"may not be '.'"};
  if (name == "..") return {"may not be '..'"};
  std::vector<std::string> out;
  if (name.find('/') != std::string::npos) out.push_back("may not contain '/'");
  if (name.find('%') != std::string::npos) out.push_back("may not contain '%'");
  return out;
}

std::vector<std::string> nameErrors(const std::string& rule, const std::string& name, bool prefix) {
  std::string n = prefix ? maskTrailingDash(name) : name;
  if (rule == "label") return dns1123Label(n);
  if (rule == "1035") return dns1035Label(n);
  if (rule == "segment") return prefix ? std::vector<std::string>{} : pathSegmentName(n);
  return dns1123Subdomain(n);
}

const json& objectAt(const json& obj, const char* a, const char* b = nullptr) {
  static const json kEmpty = json::object();
  auto it = obj.find(a);
  if (it == obj.end() || !it->is_object()) return kEmpty;
  if (b == nullptr) return *it;
  auto jt = it->find(b);
  return jt == it->end() || !jt->is_object() ? kEmpty : *jt;
}

void validateLabels(const json& labels, std::vector<FieldError>& errs) {
  for (const auto& [k, v] : labels.items()) {
    for (const std::string& msg : qualifiedName(k)) {
      errs.push_back(invalidValue("metadata.labels", k, msg));
    }
    if (!v.is_string()) continue;
    for (const std::string& msg : labelValue(v.get<std::string>())) {
      errs.push_back(invalidValue("metadata.labels", v, msg));
    }
  }
}

void validateAnnotations(const json& annotations, std::vector<FieldError>& errs) {
  long total = 0;
  for (const auto& [k, v] : annotations.items()) {
    std::string lower = k;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const std::string& msg : qualifiedName(lower)) {
      errs.push_back(invalidValue("metadata.annotations", k, msg));
    }
    total += static_cast<long>(k.size()) + (v.is_string() ? v.get<std::string>().size() : 0);
  }
  if (total > kTotalAnnotationSizeLimit) {
    errs.push_back(tooLong("metadata.annotations", kTotalAnnotationSizeLimit));
  }
}

void validateFinalizers(const json& finalizers, std::vector<FieldError>& errs) {
  if (!finalizers.is_array()) return;
  for (const json& f : finalizers) {
    if (!f.is_string()) continue;
    for (const std::string& msg : qualifiedName(f.get<std::string>())) {
      errs.push_back(invalidValue("metadata.finalizers", f, msg));
    }
  }
}

void validateOwnerReferences(const json& refs, std::vector<FieldError>& errs) {
  if (!refs.is_array()) return;
  for (const json& ref : refs) {
    if (!ref.is_object()) continue;
    std::string api_version = ref.value("apiVersion", "");
    std::string version = api_version.substr(api_version.find('/') + 1);
    if (api_version.empty() || version.empty()) {
      errs.push_back(invalidValue("metadata.ownerReferences.apiVersion", api_version,
                                  "version must not be empty"));
    }
    for (const char* key : {"kind", "name", "uid"}) {
      if (ref.value(key, "").empty()) {
        errs.push_back(invalidValue(std::string("metadata.ownerReferences.") + key, "",
                                    std::string(key) + " must not be empty"));
      }
    }
  }
}

// ValidateObjectMetaAccessor (create) without the parts kubesim fills itself.
void validateMeta(const ResourceInfo& r, const json& object, std::vector<FieldError>& errs) {
  const json& meta = objectAt(object, "metadata");
  std::string rule = nameRule(r);
  std::string generate = str(object, {"metadata", "generateName"});
  if (!generate.empty()) {
    for (const std::string& msg : nameErrors(rule, generate, true)) {
      errs.push_back(invalidValue("metadata.generateName", generate, msg));
    }
  }
  std::string name = str(object, {"metadata", "name"});
  if (name.empty()) {
    errs.push_back(requiredValue("metadata.name", "name or generateName is required"));
  } else {
    for (const std::string& msg : nameErrors(rule, name, false)) {
      errs.push_back(invalidValue("metadata.name", name, msg));
    }
  }
  if (auto g = meta.find("generation"); g != meta.end() && g->is_number_integer() && *g < 0) {
    errs.push_back(invalidValue("metadata.generation", *g, "must be greater than or equal to 0"));
  }
  validateLabels(objectAt(object, "metadata", "labels"), errs);
  validateAnnotations(objectAt(object, "metadata", "annotations"), errs);
  validateOwnerReferences(meta.value("ownerReferences", json()), errs);
  validateFinalizers(meta.value("finalizers", json()), errs);
}

}  // namespace

// --- field errors ---

std::string goQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string FieldError::body() const {
  static const std::map<std::string, std::string> kWords = {
      {"FieldValueNotFound", "Not found"},
      {"FieldValueRequired", "Required value"},
      {"FieldValueDuplicate", "Duplicate value"},
      {"FieldValueInvalid", "Invalid value"},
      {"FieldValueNotSupported", "Unsupported value"},
      {"FieldValueForbidden", "Forbidden"},
      {"FieldValueTooLong", "Too long"}};
  auto it = kWords.find(type);
  std::string s = it == kWords.end() ? type : it->second;
  const bool shows_value =
      type != "FieldValueRequired" && type != "FieldValueForbidden" && type != "FieldValueTooLong";
  if (shows_value) s += ": " + value;
  if (!detail.empty()) s += ": " + detail;
  return s;
}

FieldError invalidValue(std::string field, const json& value, std::string detail) {
  return FieldError{.type = "FieldValueInvalid",
                    .field = std::move(field),
                    .value = goValue(value),
                    .detail = std::move(detail)};
}

FieldError requiredValue(std::string field, std::string detail) {
  return FieldError{.type = "FieldValueRequired",
                    .field = std::move(field),
                    .value = "\"\"",
                    .detail = std::move(detail)};
}

FieldError forbidden(std::string field, std::string detail) {
  return FieldError{.type = "FieldValueForbidden",
                    .field = std::move(field),
                    .value = "\"\"",
                    .detail = std::move(detail)};
}

FieldError notSupported(std::string field, const json& value,
                        const std::vector<std::string>& supported) {
  std::string detail;
  for (const std::string& s : supported) {
    detail += (detail.empty() ? "supported values: " : ", ") + goQuote(s);
  }
  return FieldError{.type = "FieldValueNotSupported",
                    .field = std::move(field),
                    .value = goValue(value),
                    .detail = std::move(detail)};
}

FieldError tooLong(std::string field, long max_bytes) {
  return FieldError{.type = "FieldValueTooLong",
                    .field = std::move(field),
                    .value = "\"<value omitted>\"",
                    .detail = "may not be more than " + std::to_string(max_bytes) + " bytes"};
}

Reply invalidReply(const std::string& group, const std::string& kind, const std::string& name,
                   const std::vector<FieldError>& errors) {
  std::string qualified = group.empty() ? kind : kind + "." + group;
  json causes = json::array();
  std::vector<std::string> seen;
  for (const FieldError& e : errors) {
    causes.push_back({{"reason", e.type}, {"message", e.body()}, {"field", e.field}});
    std::string text = e.field + ": " + e.body();
    if (std::find(seen.begin(), seen.end(), text) == seen.end()) seen.push_back(text);
  }
  std::string message = qualified + " " + goQuote(name) + " is invalid";
  if (seen.size() == 1) {
    message += ": " + seen[0];
  } else if (!seen.empty()) {
    message += ": [";
    for (std::size_t i = 0; i < seen.size(); ++i) message += (i > 0 ? ", " : "") + seen[i];
    message += "]";
  }
  json details = {{"name", name}, {"kind", kind}, {"causes", causes}};
  if (!group.empty()) details["group"] = group;
  return Reply{.code = 422,
               .body = {{"kind", "Status"},
                        {"apiVersion", "v1"},
                        {"metadata", json::object()},
                        {"status", "Failure"},
                        {"message", message},
                        {"reason", "Invalid"},
                        {"details", details},
                        {"code", 422}}};
}

// --- name and key formats ---

std::vector<std::string> dns1123Label(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(maxLenError(63));
  if (!fullMatch(value, kDns1123LabelFmt)) {
    if (fullMatch(value, kDns1123SubdomainFmt)) {
      errs.push_back("must not contain dots");
    } else {
      errs.push_back(regexError(
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
          "'-', and must start and end with an alphanumeric character",
          kDns1123LabelFmt, {"my-name", "123-abc"}));
    }
  }
  return errs;
}

std::vector<std::string> dns1123Subdomain(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back(maxLenError(253));
  if (!fullMatch(value, kDns1123SubdomainFmt)) {
    errs.push_back(regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character",
        kDns1123SubdomainFmt, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> dns1035Label(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(maxLenError(63));
  if (!fullMatch(value, kDns1035LabelFmt)) {
    errs.push_back(regexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character",
        kDns1035LabelFmt, {"my-name", "abc-123"}));
  }
  return errs;
}

std::vector<std::string> qualifiedName(const std::string& value) {
  std::vector<std::string> errs;
  std::string name = value;
  auto slash = value.find('/');
  if (slash != std::string::npos) {
    if (value.find('/', slash + 1) != std::string::npos) {
      return {
          "a qualified name " +
          regexError(kQualifiedNameErrMsg, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}) +
          " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"};
    }
    std::string prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const std::string& msg : dns1123Subdomain(prefix)) errs.push_back("prefix part " + msg);
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part " + maxLenError(63));
  }
  if (!fullMatch(name, kQualifiedNameFmt)) {
    errs.push_back("name part " + regexError(kQualifiedNameErrMsg, kQualifiedNameFmt,
                                             {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> labelValue(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(maxLenError(63));
  if (!fullMatch(value, kLabelValueFmt)) {
    errs.push_back(regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character",
        kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

std::vector<std::string> configMapKey(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back(maxLenError(253));
  if (!fullMatch(value, kConfigMapKeyFmt)) {
    errs.push_back(
        regexError("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                   kConfigMapKeyFmt, {"key.name", "KEY_NAME", "key-name"}));
  }
  if (value == ".") {
    errs.push_back("must not be '.'");
  } else if (value == "..") {
    errs.push_back("must not be '..'");
  } else if (value.rfind("..", 0) == 0) {
    errs.push_back("must not start with '..'");
  }
  return errs;
}

std::string nameRule(const ResourceInfo& r) {
  if (r.group.empty() && r.plural == "namespaces") return "label";
  if (r.group.empty() && r.plural == "services") return "1035";
  if (r.group == "rbac.authorization.k8s.io") return "segment";
  return "subdomain";
}

// --- create and update ---

std::vector<FieldError> kindCreateErrors(const ResourceInfo& r, const json& object);
std::vector<FieldError> kindUpdateErrors(const ResourceInfo& r, const json& next, const json& old);

std::vector<FieldError> validateCreate(const ResourceInfo& r, const json& object) {
  std::vector<FieldError> errs;
  validateMeta(r, object, errs);
  for (FieldError& e : kindCreateErrors(r, object)) errs.push_back(std::move(e));
  return errs;
}

std::vector<FieldError> validateUpdate(const ResourceInfo& r, const json& next, const json& old) {
  std::vector<FieldError> errs;
  const json& old_meta = objectAt(old, "metadata");
  if (old_meta.contains("deletionTimestamp")) {
    std::set<std::string> before;
    for (const json& f : old_meta.value("finalizers", json::array())) {
      if (f.is_string()) before.insert(f.get<std::string>());
    }
    std::set<std::string> extra;
    for (const json& f : objectAt(next, "metadata").value("finalizers", json::array())) {
      if (f.is_string() && before.count(f.get<std::string>()) == 0)
        extra.insert(f.get<std::string>());
    }
    if (!extra.empty()) {
      errs.push_back(
          forbidden("metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted, "
                    "found new finalizers " +
                        goValue(json(std::vector<std::string>(extra.begin(), extra.end())))));
    }
  }
  validateLabels(objectAt(next, "metadata", "labels"), errs);
  validateAnnotations(objectAt(next, "metadata", "annotations"), errs);
  validateOwnerReferences(objectAt(next, "metadata").value("ownerReferences", json()), errs);
  validateFinalizers(objectAt(next, "metadata").value("finalizers", json()), errs);
  for (FieldError& e : kindUpdateErrors(r, next, old)) errs.push_back(std::move(e));
  return errs;
}

std::optional<Reply> invalidDryRun(const std::string& options_kind,
                                   const std::vector<std::string>& values) {
  for (const std::string& v : values) {
    if (v == "All") continue;
    return invalidReply("meta.k8s.io", options_kind, "",
                        {notSupported("dryRun", json(values), {"All"})});
  }
  return std::nullopt;
}

}  // namespace ekco::kubesim
