#include "agent/config/config.h"

#include "agent/config/keys.h"
#include "agent/config/validate.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/log/log.h"
#include "base/os/file_read.h"
#include "base/strings.h"

namespace ekco::agent {

// A value as read from any source, before it is given a type.
struct RawValue {
  enum class Shape { kScalar, kNull, kSequence, kMap };
  Shape shape = Shape::kScalar;
  std::string scalar;              // kScalar
  std::vector<std::string> items;  // kSequence (only scalar items)
  bool items_scalar = true;        // false if a sequence item was itself a list or map
};

namespace {

using base::asciiLower;
using base::asciiUpper;
using base::trimSpace;

base::Result<bool> toBool(const RawValue& v) {
  if (v.shape != RawValue::Shape::kScalar) return base::Error("want true or false");
  // YAML 1.1 booleans, as yaml-cpp and Go's yaml decoders accept them for a bool field.
  std::string s = asciiLower(trimSpace(v.scalar));
  if (s == "true" || s == "yes" || s == "on" || s == "y") return true;
  if (s == "false" || s == "no" || s == "off" || s == "n") return false;
  return base::Error("want true or false, got " + base::quoteForMessage(v.scalar));
}

base::Result<int64_t> toInt(const RawValue& v) {
  if (v.shape != RawValue::Shape::kScalar) return base::Error("want an integer");
  std::string_view s = trimSpace(v.scalar);
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    return base::Error("want an integer, got " + base::quoteForMessage(v.scalar));
  }
  if (out < 0) return base::Error(fmt::format("must not be negative (got {})", out));
  return out;
}

base::Result<Duration> toDuration(const RawValue& v) {
  if (v.shape != RawValue::Shape::kScalar) {
    return base::Error("want a duration such as 90s, 5m or 1h30m");
  }
  auto d = base::parseDuration(trimSpace(v.scalar));
  if (!d) {
    return base::Error(d.error().message() + " (want a duration such as 90s, 5m or 1h30m)");
  }
  if (d->count() < 0) {
    // The duration as parsed, not the raw text (which may carry whitespace and control
    // characters around it).
    return base::Error(fmt::format("must not be negative (got {})", base::formatDuration(*d)));
  }
  return *d;
}

base::Result<std::string> toString(const RawValue& v) {
  if (v.shape == RawValue::Shape::kNull) return std::string();
  if (v.shape != RawValue::Shape::kScalar) return base::Error("want a string");
  return v.scalar;
}

base::Result<std::vector<std::string>> toStringList(const RawValue& v) {
  std::vector<std::string> out;
  switch (v.shape) {
    case RawValue::Shape::kNull:
      return out;
    case RawValue::Shape::kMap:
      return base::Error("want a list of strings");
    case RawValue::Shape::kSequence:
      if (!v.items_scalar) return base::Error("want a list of strings");
      return v.items;
    case RawValue::Shape::kScalar: {
      // kURL renders lists comma-joined into one string ("a=b,c=d"), and env/flags do too.
      std::string_view s = v.scalar;
      while (!trimSpace(s).empty()) {
        size_t comma = s.find(',');
        std::string_view item = trimSpace(s.substr(0, comma));
        if (!item.empty()) out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
      }
      return out;
    }
  }
  return out;
}

RawValue rawFromYaml(const YAML::Node& node) {
  RawValue v;
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      v.shape = RawValue::Shape::kNull;
      break;
    case YAML::NodeType::Scalar:
      v.shape = RawValue::Shape::kScalar;
      v.scalar = node.Scalar();
      break;
    case YAML::NodeType::Sequence:
      v.shape = RawValue::Shape::kSequence;
      for (const auto& item : node) {
        if (item.IsScalar()) {
          v.items.push_back(item.Scalar());
        } else {
          v.items_scalar = false;
        }
      }
      break;
    case YAML::NodeType::Map:
      v.shape = RawValue::Shape::kMap;
      break;
  }
  return v;
}

std::string sourceOf(const std::map<std::string, std::string>& sources, std::string_view key) {
  auto it = sources.find(std::string(key));
  return it == sources.end() ? std::string("default") : it->second;
}

}  // namespace

std::string ConfigProblem::toString() const {
  // An unknown or duplicate key is named as the file spelled it, and a kURL field name is part
  // of its source: both are escaped, so a problem stays one line whatever the file held (the
  // message quotes the values it shows itself).
  if (key.empty()) return fmt::format("{}: {}", base::escapeForMessage(source), message);
  return fmt::format("{}: {}: {}", base::escapeForMessage(source), base::escapeForMessage(key),
                     message);
}

const std::vector<KeyInfo>& configKeys() {
  static const std::vector<KeyInfo> infos = [] {
    std::vector<KeyInfo> out;
    for (const KeyDef& d : keyDefs()) out.push_back(d.info);
    return out;
  }();
  return infos;
}

ConfigLoader::ConfigLoader() = default;

void ConfigLoader::loadFile(const std::string& path, bool optional) {
  auto text = base::readSmallFile(path, kMaxConfigFileBytes);
  if (!text) {
    if (text.error().code() == base::ErrorCode::kNotFound) {
      if (!optional) problems_.push_back({path, "", "cannot read the file (does it exist?)"});
      return;
    }
    // The problem names the file already: "/etc/ekco/config.yaml: larger than 1 MiB; ...".
    std::string_view message = text.error().message();
    if (message.starts_with(path + ": ")) message.remove_prefix(path.size() + 2);
    problems_.push_back({path, "", std::string(message)});
    return;
  }
  loadYaml(*text, path);
}

void ConfigLoader::loadYaml(std::string_view text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    // yaml-cpp marks are 0-based; editors count from 1.
    // yaml-cpp's message may quote the offending byte raw ("unknown escape character: \x00").
    problems_.push_back({fmt::format("{}:{}", name, e.mark.line + 1), "",
                         "malformed YAML: " + base::escapeForMessage(e.msg)});
    return;
  }
  if (root.IsNull()) return;  // an empty file means "all defaults"
  if (!root.IsMap()) {
    problems_.push_back({fmt::format("{}:{}", name, root.Mark().line + 1), "",
                         "the file must be a mapping of key: value"});
    return;
  }
  std::set<std::string> seen;
  for (const auto& kv : root) {
    std::string where = fmt::format("{}:{}", name, kv.first.Mark().line + 1);
    if (!kv.first.IsScalar()) {
      problems_.push_back({where, "", "keys must be plain strings"});
      continue;
    }
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) {
      problems_.push_back({where, key, "duplicate key"});
      continue;
    }
    const KeyDef* def = findKey(key);
    if (def == nullptr) {
      problems_.push_back({where, key, "unknown key"});
      continue;
    }
    RawValue raw = rawFromYaml(kv.second);
    if (raw.shape == RawValue::Shape::kNull && def->info.kind != ValueKind::kString &&
        def->info.kind != ValueKind::kStringList) {
      problems_.push_back({where, key, "missing value"});
      continue;
    }
    // Point at the value's line when it has one (a block list starts below its key).
    std::string value_where = where;
    if (!kv.second.IsNull() && kv.second.Mark().line >= 0) {
      value_where = fmt::format("{}:{}", name, kv.second.Mark().line + 1);
    }
    assign(*def, raw, value_where);
  }
}

namespace {
// Where a key is explained: its entry in the generated reference.
std::string docPointer(const std::string& key) { return "(see " + keyReferencePage(key) + ")"; }
}  // namespace

void ConfigLoader::assign(const KeyDef& def, const RawValue& raw, const std::string& source) {
  const std::string key(def.info.key);
  if (def.info.ignored) {
    // The help of an ignored key starts "Ignored: ..." already (it is also `--help`'s text).
    std::string_view why = def.info.help;
    if (why.starts_with("Ignored: ")) why.remove_prefix(9);
    notices_.push_back({source, key, "ignored: " + std::string(why) + " " + docPointer(key)});
    sources_[key] = source;
    return;
  }
  if (!def.info.alias_of.empty()) {
    auto s = toString(raw);
    if (!s) {
      problems_.push_back({source, key, s.error().message()});
      return;
    }
    notices_.push_back({source, key, fmt::format("deprecated: use {}", def.info.alias_of)});
    alias_values_[std::string(def.info.alias_of)] = {*s, source};
    return;
  }
  auto fail = [&](const base::Error& e) {
    problems_.push_back({source, key, e.message()});
    return false;
  };
  bool ok = std::visit(
      [&](auto member) -> bool {
        using M = decltype(member);
        if constexpr (std::is_same_v<M, std::monostate>) {
          return true;
        } else if constexpr (std::is_same_v<M, bool Config::*>) {
          auto b = toBool(raw);
          if (!b) return fail(b.error());
          cfg_.*member = *b;
        } else if constexpr (std::is_same_v<M, int64_t Config::*>) {
          auto n = toInt(raw);
          if (!n) return fail(n.error());
          cfg_.*member = *n;
        } else if constexpr (std::is_same_v<M, Duration Config::*>) {
          auto d = toDuration(raw);
          if (!d) return fail(d.error());
          cfg_.*member = *d;
        } else if constexpr (std::is_same_v<M, std::string Config::*>) {
          auto s = toString(raw);
          if (!s) return fail(s.error());
          cfg_.*member = *s;
        } else {
          auto l = toStringList(raw);
          if (!l) return fail(l.error());
          cfg_.*member = *l;
        }
        return true;
      },
      def.field);
  if (!ok) return;
  sources_[key] = source;
  if (!def.info.compat.empty() && !hasDefaultValue(def)) {
    notices_.push_back(
        {source, key,
         "no effect in ekco: " + std::string(def.info.compat) + " " + docPointer(key)});
  }
}

bool ConfigLoader::hasDefaultValue(const KeyDef& def) const {
  static const Config defaults;
  return std::visit(
      [&](auto member) -> bool {
        if constexpr (std::is_same_v<decltype(member), std::monostate>) {
          return true;
        } else {
          return cfg_.*member == defaults.*member;
        }
      },
      def.field);
}

void ConfigLoader::setText(std::string_view key, std::string_view value,
                           const std::string& source) {
  // Text from the environment or a flag is typed like a YAML scalar, except that it is never
  // YAML-parsed: "a=b,c=d" and "" keep their literal meaning.
  const KeyDef* def = findKey(key);
  if (def == nullptr) {
    problems_.push_back({source, std::string(key), "unknown key"});
    return;
  }
  RawValue raw;
  raw.scalar = std::string(value);
  assign(*def, raw, source);
}

void ConfigLoader::loadEnvironment(const std::vector<std::string>& env) {
  std::map<std::string, std::string> vars;
  for (const std::string& e : env) {
    size_t eq = e.find('=');
    if (eq == std::string::npos) continue;
    vars[e.substr(0, eq)] = e.substr(eq + 1);
  }
  // EKCO read any key from its bare upper-case name through viper's AutomaticEnv; only
  // LOG_LEVEL is known to be set that way (kURL's Deployment), so only it is honoured bare,
  // and before EKCO_LOG_LEVEL so the prefixed spelling wins.
  if (auto it = vars.find("LOG_LEVEL"); it != vars.end()) {
    setText("log_level", it->second, "environment LOG_LEVEL");
  }
  for (const KeyDef& d : keyDefs()) {
    const std::string name = keyEnvironmentVariable(d.info.key);
    if (auto it = vars.find(name); it != vars.end()) {
      setText(d.info.key, it->second, "environment " + name);
    }
  }
}

void ConfigLoader::setFlag(std::string_view key, std::string_view value) {
  setText(key, value, "flag " + keyFlag(key));
}

std::string keyEnvironmentVariable(std::string_view key) { return "EKCO_" + asciiUpper(key); }

std::string keyFlag(std::string_view key) {
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string keyReferenceAnchor(std::string_view key) { return "key-" + std::string(key); }

std::string keyReferencePage(std::string_view key) {
  return "docs/configuration.md#" + keyReferenceAnchor(key);
}

Config ConfigLoader::finish() {
  Config& c = cfg_;
  auto problem = [&](std::string_view key, std::string message) {
    problems_.push_back({sourceOf(sources_, key), std::string(key), std::move(message)});
  };

  // A deprecated spelling counts only when the current key is unset (EKCO's init.go copies
  // contour_cert_namespace into contour_namespace only then).
  for (const auto& [target, value] : alias_values_) {
    if (sources_.count(target) != 0) continue;
    if (const KeyDef* def = findKey(target)) {
      if (auto* member = std::get_if<std::string Config::*>(&def->field)) {
        c.** member = value.first;
        sources_[target] = value.second;
      }
    }
  }

  checkConfigRules(c, problem,
                   [this](std::string_view key) { return sources_.count(std::string(key)) != 0; });
  return c;
}

}  // namespace ekco::agent
