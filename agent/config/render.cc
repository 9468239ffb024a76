// `ekco config show`: a Config as YAML, every key in the table's order.
#include <algorithm>
#include <set>
#include <string>
#include <type_traits>
#include <variant>

#include <yaml-cpp/yaml.h>

#include "agent/config/config.h"
#include "agent/config/keys.h"
#include "base/strings.h"

namespace ekco::agent {
namespace {

// True when a YAML 1.1 reader (yaml-cpp's emitter does not check) could take the plain scalar
// for something other than a string: empty, null, a boolean, or anything number-like ("123",
// "1.4.3", "17:30" is a base-60 integer in YAML 1.1). Such strings are written double-quoted.
bool mightReadAsNonString(const std::string& s) {
  if (s.empty()) return true;
  static const std::set<std::string> kWords = {"~",  "null", "true", "false", "yes",
                                               "no", "on",   "off",  "y",     "n"};
  if (kWords.count(base::asciiLower(s)) != 0) return true;
  char c = s.front();
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.';
}

// `d`'s value in `cfg`, as `config show` writes it.
void emitValue(YAML::Emitter& out, const Config& cfg, const KeyDef& d) {
  std::visit(
      [&](auto member) {
        using M = decltype(member);
        if constexpr (std::is_same_v<M, std::monostate>) {
          out << YAML::Null;
        } else if constexpr (std::is_same_v<M, bool Config::*>) {
          out << (cfg.*member);
        } else if constexpr (std::is_same_v<M, int64_t Config::*>) {
          out << static_cast<long long>(cfg.*member);
        } else if constexpr (std::is_same_v<M, Duration Config::*>) {
          out << base::formatDuration(cfg.*member);
        } else if constexpr (std::is_same_v<M, std::string Config::*>) {
          const std::string& s = cfg.*member;
          if (mightReadAsNonString(s)) {
            out << YAML::DoubleQuoted << s;
          } else {
            out << s;
          }
        } else {
          out << YAML::Flow << YAML::BeginSeq;
          for (const std::string& s : cfg.*member) out << s;
          out << YAML::EndSeq;
        }
      },
      d.field);
}

}  // namespace

std::string renderConfigYaml(const Config& cfg) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const KeyDef& d : keyDefs()) {
    if (d.info.ignored || !d.info.alias_of.empty()) continue;
    out << YAML::Key << std::string(d.info.key) << YAML::Value;
    emitValue(out, cfg, d);
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string renderKeyValue(const Config& cfg, const KeyDef& d) {
  if (d.info.ignored || !d.info.alias_of.empty()) return "";
  YAML::Emitter out;
  emitValue(out, cfg, d);
  return out.c_str();
}

Config redactSecrets(Config cfg) {
  if (!cfg.storage_migration_auth_token.empty()) cfg.storage_migration_auth_token = "<redacted>";
  std::string& url = cfg.auto_upgrade_url;
  const std::size_t scheme_end = url.find("://");
  if (scheme_end != std::string::npos) {
    const std::size_t authority = scheme_end + 3;
    const std::size_t authority_end = std::min(url.find_first_of("/?#", authority), url.size());
    const std::size_t at = url.rfind('@', authority_end - 1);
    if (at != std::string::npos && at >= authority) {
      const std::size_t colon = url.find(':', authority);
      if (colon != std::string::npos && colon < at) url.replace(colon + 1, at - colon - 1, "xxxxx");
    }
  }
  return cfg;
}

}  // namespace ekco::agent
