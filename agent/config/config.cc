#include "agent/config/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <variant>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/log.h"
#include "base/strings.h"
#include "haproxy/image.h"
#include "haproxy/render.h"
#include "kube/curl_transport.h"
#include "units/calendar.h"

namespace ekco::agent {

using FieldPtr = std::variant<std::monostate, bool Config::*, int64_t Config::*, Duration Config::*,
                              std::string Config::*, std::vector<std::string> Config::*>;

struct KeyDef {
  KeyInfo info;
  FieldPtr field;
};

// A value as read from any source, before it is given a type.
struct RawValue {
  enum class Shape { kScalar, kNull, kSequence, kMap };
  Shape shape = Shape::kScalar;
  std::string scalar;              // kScalar
  std::vector<std::string> items;  // kSequence (only scalar items)
  bool items_scalar = true;        // false if a sequence item was itself a list or map
};

namespace {

#define EKCO_KEY(name, kind, help) \
  KeyDef { {#name, ValueKind::kind, help}, &Config::name }

// Table order is the order of `config show` and of the README table.
const std::vector<KeyDef>& keyDefs() {
  static const std::vector<KeyDef> defs = {
      EKCO_KEY(node_unreachable_toleration, kDuration,
               "How long a node must be unreachable before it is dead (cleared, or purged)"),
      EKCO_KEY(clear_dead_nodes, kBool, "Force-delete pods stuck terminating on dead nodes"),
      EKCO_KEY(clear_pod_deletion_grace, kDuration,
               "Force-delete a pod on a dead node once it has been terminating this long"),
      EKCO_KEY(storm_guard_percent, kInt,
               "Clear and purge nothing while more than this % of nodes is unreachable (0-100)"),
      EKCO_KEY(purge_dead_nodes, kBool, "Automatically purge dead nodes"),
      EKCO_KEY(min_ready_master_nodes, kInt,
               "Never purge if fewer ready primaries would remain (at least 1)"),
      EKCO_KEY(min_ready_worker_nodes, kInt, "Never purge if fewer ready workers would remain"),
      EKCO_KEY(maintain_rook_storage_nodes, kBool,
               "Add/remove nodes in CephCluster storage.nodes and scale pool replication"),
      EKCO_KEY(rook_storage_nodes_label, kString,
               "Only nodes with this label are added to Rook storage"),
      EKCO_KEY(rook_storage_nodes, kString, "Rook storage node list (YAML, as kURL renders it)"),
      EKCO_KEY(reconcile_rook_mds_placement, kBool,
               "Restore strict MDS anti-affinity once the cluster has more than one node"),
      EKCO_KEY(reconcile_ceph_csi_resources, kBool,
               "Set Ceph CSI requests/limits once the cluster has three nodes"),
      EKCO_KEY(ceph_block_pool, kString, "CephBlockPool whose replication is scaled"),
      EKCO_KEY(ceph_filesystem, kString, "CephFilesystem whose replication is scaled"),
      EKCO_KEY(ceph_object_store, kString, "CephObjectStore whose replication is scaled"),
      EKCO_KEY(min_ceph_pool_replication, kInt, "Lowest Ceph pool replication"),
      EKCO_KEY(max_ceph_pool_replication, kInt, "Highest Ceph pool replication"),
      EKCO_KEY(rook_priority_class, kString, "PriorityClass given to Rook pods (empty: none)"),
      EKCO_KEY(rook_minimum_node_count, kInt,
               "Create the Rook cluster once this many nodes exist (>2 enables)"),
      EKCO_KEY(rook_storage_class, kString, "StorageClass of the Rook cluster ekco creates"),
      EKCO_KEY(rook_ceph_image, kString, "Ceph image for the Rook cluster ekco creates"),
      EKCO_KEY(reconcile_interval, kDuration, "Fallback period of the leader's full reconcile"),
      EKCO_KEY(reconcile_timeout, kDuration, "Deadline of one reconcile (0 means 15m)"),
      EKCO_KEY(certificates_dir, kString, "Kubernetes PKI directory on the host"),
      EKCO_KEY(rotate_certs, kBool, "Renew control-plane certificates before they expire"),
      EKCO_KEY(rotate_certs_namespace, kString,
               "Namespace EKCO ran its rotate-certs pods in (kept for compatibility)"),
      EKCO_KEY(rotate_certs_check_interval, kDuration, "How often certificates are checked"),
      EKCO_KEY(rotate_certs_ttl, kDuration, "Renew a certificate when it expires within this"),
      EKCO_KEY(registry_cert_namespace, kString, "Namespace of the registry certificate secret"),
      EKCO_KEY(registry_cert_secret, kString, "Registry certificate secret"),
      EKCO_KEY(kurl_proxy_cert_namespace, kString, "Namespace of the kurl-proxy TLS secret"),
      EKCO_KEY(kurl_proxy_cert_secret, kString, "kurl-proxy TLS secret"),
      EKCO_KEY(kotsadm_kubelet_cert_namespace, kString,
               "Namespace of the kotsadm kubelet client certificate secret"),
      EKCO_KEY(kotsadm_kubelet_cert_secret, kString, "kotsadm kubelet client certificate secret"),
      EKCO_KEY(contour_namespace, kString, "Namespace of Contour and Envoy"),
      EKCO_KEY(contour_cert_secret, kString, "Contour certificate secret"),
      EKCO_KEY(envoy_cert_secret, kString, "Envoy certificate secret"),
      EKCO_KEY(restart_failed_envoy_pods, kBool,
               "Delete Envoy pods whose envoy container stays not ready"),
      EKCO_KEY(envoy_pods_not_ready_duration, kDuration,
               "How long an Envoy container may be not ready before its pod is deleted"),
      EKCO_KEY(auto_resource_scaling, kBool,
               "Set Prometheus/Alertmanager replicas to min(2 / 3, nodes) as nodes join and leave"),
      EKCO_KEY(enable_internal_load_balancer, kBool,
               "Run the HAProxy static pod on port 6444 on every node"),
      EKCO_KEY(internal_load_balancer_haproxy_image, kString, "Image of the HAProxy static pod"),
      EKCO_KEY(internal_load_balancer_bind, kString,
               "HAProxy listen address IP:PORT (loopback by default; plus [::1] when IPv6 is up)"),
      EKCO_KEY(pod_image_overrides, kStringList,
               "Pod image overrides, each \"original=overridden\""),
      EKCO_KEY(auto_approve_kubelet_csrs, kBool, "Approve kubelet serving certificate CSRs"),
      EKCO_KEY(enable_ha_minio, kBool, "Manage the HA MinIO StatefulSet"),
      EKCO_KEY(minio_namespace, kString, "Namespace of MinIO"),
      EKCO_KEY(minio_util_image, kString, "Image used for MinIO data migration"),
      EKCO_KEY(enable_ha_kotsadm, kBool, "Scale kotsadm's rqlite to three replicas"),
      EKCO_KEY(storage_migration_auth_token, kString, "Token guarding the storage migration API"),
      EKCO_KEY(disable_reboot_service, kBool,
               "Do not install ekco-reboot.service (kURL shouldDisableRebootServices)"),
      EKCO_KEY(shutdown_excluded_namespaces, kStringList,
               "Namespaces whose pods ekco shutdown does not delete"),
      EKCO_KEY(shutdown_unmount_timeout, kDuration,
               "How long ekco shutdown waits for pod PVC and CephFS volumes to unmount"),
      EKCO_KEY(startup_api_timeout, kDuration,
               "How long ekco startup waits for the API before giving up (node left cordoned)"),
      EKCO_KEY(auto_upgrade_schedule, kString,
               "systemd calendar event of ekco-upgrade.timer, e.g. \"Sat 17:30\" (empty: off)"),
      EKCO_KEY(auto_upgrade_url, kString,
               "Installer URL the upgrade checks (https; http only with auto_upgrade_allow_http)"),
      EKCO_KEY(auto_upgrade_allow_http, kBool,
               "Accept a plain http:// auto_upgrade_url, whose downloads are not verified"),
      EKCO_KEY(leader_election_namespace, kString, "Namespace of the ekco-leader Lease"),
      EKCO_KEY(leader_election_lease_duration, kDuration,
               "How long a leader's Lease holds without renewal before others may take it"),
      EKCO_KEY(leader_election_renew_deadline, kDuration,
               "The leader gives up leading when it could not renew for this long"),
      EKCO_KEY(leader_election_retry_period, kDuration,
               "How often agents try to acquire or renew the Lease"),
      EKCO_KEY(health_socket, kString, "Path of the agent's health socket"),
      EKCO_KEY(log_level, kString, "debug, info, warn or error"),
      // Accepted for compatibility, no effect: ekco does this work on the host itself.
      KeyDef{{"rotate_certs_image", ValueKind::kString,
              "Ignored: EKCO's rotate-certs pod image; ekco renews on the host", true},
             {}},
      KeyDef{{"host_task_image", ValueKind::kString,
              "Ignored: EKCO's host task pod image; ekco acts on its own host", true},
             {}},
      KeyDef{{"host_task_namespace", ValueKind::kString, "Ignored: EKCO's host task pod namespace",
              true},
             {}},
      KeyDef{{"rook_version", ValueKind::kString,
              "Ignored: the Rook version is detected from the operator image", true},
             {}},
      KeyDef{{"internal_load_balancer_port", ValueKind::kInt,
              "Ignored: EKCO never used it; set the port in internal_load_balancer_bind", true},
             {}},
      KeyDef{{"contour_cert_namespace", ValueKind::kString,
              "Deprecated spelling of contour_namespace", false, "contour_namespace"},
             {}},
  };
  return defs;
}
#undef EKCO_KEY

const KeyDef* findKey(std::string_view key) {
  for (const KeyDef& d : keyDefs()) {
    if (d.info.key == key) return &d;
  }
  return nullptr;
}

using base::asciiLower;
using base::asciiUpper;
using base::trimSpace;

base::Result<bool> toBool(const RawValue& v) {
  if (v.shape != RawValue::Shape::kScalar) return base::Error("want true or false");
  // YAML 1.1 booleans, as yaml-cpp and Go's yaml decoders accept them for a bool field.
  std::string s = asciiLower(trimSpace(v.scalar));
  if (s == "true" || s == "yes" || s == "on" || s == "y") return true;
  if (s == "false" || s == "no" || s == "off" || s == "n") return false;
  return base::Error(fmt::format("want true or false, got \"{}\"", v.scalar));
}

base::Result<int64_t> toInt(const RawValue& v) {
  if (v.shape != RawValue::Shape::kScalar) return base::Error("want an integer");
  std::string_view s = trimSpace(v.scalar);
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    return base::Error(fmt::format("want an integer, got \"{}\"", v.scalar));
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
    return base::Error(fmt::format("must not be negative (got {})", v.scalar));
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

bool isDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
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

// True when a YAML 1.1 reader (yaml-cpp's emitter does not check) could take the plain scalar
// for something other than a string: empty, null, a boolean, or anything number-like ("123",
// "1.4.3", "17:30" is a base-60 integer in YAML 1.1). Such strings are written double-quoted.
bool mightReadAsNonString(const std::string& s) {
  if (s.empty()) return true;
  static const std::set<std::string> kWords = {"~",  "null", "true", "false", "yes",
                                               "no", "on",   "off",  "y",     "n"};
  if (kWords.count(asciiLower(s)) != 0) return true;
  char c = s.front();
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.';
}

std::string sourceOf(const std::map<std::string, std::string>& sources, std::string_view key) {
  auto it = sources.find(std::string(key));
  return it == sources.end() ? std::string("default") : it->second;
}

}  // namespace

std::string ConfigProblem::toString() const {
  if (key.empty()) return fmt::format("{}: {}", source, message);
  return fmt::format("{}: {}: {}", source, key, message);
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (optional) return;
    problems_.push_back({path, "", "cannot read the file (does it exist?)"});
    return;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) {
    problems_.push_back({path, "", "read error"});
    return;
  }
  loadYaml(buf.str(), path);
}

void ConfigLoader::loadYaml(std::string_view text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    // yaml-cpp marks are 0-based; editors count from 1.
    problems_.push_back({fmt::format("{}:{}", name, e.mark.line + 1), "",
                         fmt::format("malformed YAML: {}", e.msg)});
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

void ConfigLoader::assign(const KeyDef& def, const RawValue& raw, const std::string& source) {
  const std::string key(def.info.key);
  if (def.info.ignored) {
    notices_.push_back({source, key, "ignored: " + std::string(def.info.help)});
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
  if (ok) sources_[key] = source;
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
    std::string name = "EKCO_" + asciiUpper(d.info.key);
    if (auto it = vars.find(name); it != vars.end()) {
      setText(d.info.key, it->second, "environment " + name);
    }
  }
}

void ConfigLoader::setFlag(std::string_view key, std::string_view value) {
  std::string flag(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  setText(key, value, "flag --" + flag);
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

  if (c.min_ready_master_nodes < 1) {
    problem("min_ready_master_nodes",
            fmt::format("must be at least 1 (got {})", c.min_ready_master_nodes));
  }
  if (c.storm_guard_percent > 100) {
    problem("storm_guard_percent",
            fmt::format("must be at most 100 (got {})", c.storm_guard_percent));
  }
  if (c.min_ceph_pool_replication < 1) {
    problem("min_ceph_pool_replication",
            fmt::format("must be at least 1 (got {})", c.min_ceph_pool_replication));
  }
  if (c.min_ceph_pool_replication > c.max_ceph_pool_replication) {
    problem(sources_.count("min_ceph_pool_replication") != 0 ? "min_ceph_pool_replication"
                                                             : "max_ceph_pool_replication",
            fmt::format("min_ceph_pool_replication ({}) is greater than "
                        "max_ceph_pool_replication ({})",
                        c.min_ceph_pool_replication, c.max_ceph_pool_replication));
  }
  for (auto [key, value] : {std::pair{"reconcile_interval", c.reconcile_interval},
                            std::pair{"rotate_certs_check_interval", c.rotate_certs_check_interval},
                            std::pair{"shutdown_unmount_timeout", c.shutdown_unmount_timeout},
                            std::pair{"startup_api_timeout", c.startup_api_timeout}}) {
    if (value.count() == 0) problem(key, "must be greater than 0");
  }
  // EKCO: a zero reconcile_timeout means 15 minutes.
  if (c.reconcile_timeout.count() == 0) c.reconcile_timeout = std::chrono::minutes(15);

  if (auto r = haproxy::validateImage(c.internal_load_balancer_haproxy_image); !r) {
    problem("internal_load_balancer_haproxy_image", r.error().message());
  }
  if (auto r = haproxy::parseBindAddress(c.internal_load_balancer_bind); !r) {
    problem("internal_load_balancer_bind", r.error().message());
  }
  for (const std::string& entry : c.pod_image_overrides) {
    if (auto r = parseImageOverride(entry); !r) problem("pod_image_overrides", r.error().message());
  }
  if (!c.auto_upgrade_schedule.empty()) {
    if (auto r = units::parseCalendar(c.auto_upgrade_schedule); !r) {
      // The message reads "invalid calendar event "X": <reason>" (units/calendar.h).
      problem("auto_upgrade_schedule", r.error().message() + " (see man systemd.time)");
    }
  }
  if (!c.auto_upgrade_url.empty()) {
    // The same rule `ekco upgrade` and its fetch apply (kube/curl_transport.h).
    if (std::string why = kube::urlProblem(c.auto_upgrade_url, c.auto_upgrade_allow_http);
        !why.empty()) {
      if (kube::urlProblem(c.auto_upgrade_url, /*allow_http=*/true).empty()) {
        why += "; use https://, or set auto_upgrade_allow_http: true";
      }
      problem("auto_upgrade_url",
              fmt::format("{} (got {})", why, base::quoteForMessage(c.auto_upgrade_url)));
    }
  }
  if (auto lvl = base::parseLogLevel(c.log_level); !lvl) {
    problem("log_level", lvl.error().message());
  }
  for (auto [key, value] : {std::pair{"certificates_dir", &c.certificates_dir},
                            std::pair{"health_socket", &c.health_socket}}) {
    if (value->empty() || value->front() != '/') {
      problem(key, fmt::format("want an absolute path, got \"{}\"", *value));
    }
  }
  if (c.leader_election_retry_period.count() <= 0) {
    problem("leader_election_retry_period", "must be greater than 0");
  } else if (c.leader_election_renew_deadline <= c.leader_election_retry_period) {
    problem("leader_election_renew_deadline",
            fmt::format("must be longer than leader_election_retry_period ({})",
                        base::formatDuration(c.leader_election_retry_period)));
  } else if (c.leader_election_lease_duration <= c.leader_election_renew_deadline) {
    problem("leader_election_lease_duration",
            fmt::format("must be longer than leader_election_renew_deadline ({})",
                        base::formatDuration(c.leader_election_renew_deadline)));
  }
  if (!isDnsLabel(c.leader_election_namespace)) {
    problem("leader_election_namespace",
            fmt::format("want a namespace name (RFC 1123 label), got \"{}\"",
                        c.leader_election_namespace));
  }
  for (const std::string& ns : c.shutdown_excluded_namespaces) {
    if (!isDnsLabel(ns)) {
      problem("shutdown_excluded_namespaces",
              fmt::format("want namespace names (RFC 1123 labels), got \"{}\"", ns));
    }
  }
  // Other namespaces may be left empty when their add-on is absent (kURL renders
  // minio_namespace from an unset variable), but a set one must be a valid name.
  for (auto [key, value] :
       {std::pair{"rotate_certs_namespace", &c.rotate_certs_namespace},
        std::pair{"registry_cert_namespace", &c.registry_cert_namespace},
        std::pair{"kurl_proxy_cert_namespace", &c.kurl_proxy_cert_namespace},
        std::pair{"kotsadm_kubelet_cert_namespace", &c.kotsadm_kubelet_cert_namespace},
        std::pair{"contour_namespace", &c.contour_namespace},
        std::pair{"minio_namespace", &c.minio_namespace}}) {
    if (!value->empty() && !isDnsLabel(*value)) {
      problem(key, fmt::format("want a namespace name (RFC 1123 label), got \"{}\"", *value));
    }
  }
  return c;
}

base::Result<std::pair<std::string, std::string>> parseImageOverride(std::string_view entry) {
  size_t eq = entry.find('=');
  auto bad = [&](std::string_view why) {
    return base::Error(
        fmt::format("malformed entry \"{}\": {} (want original=overridden)", entry, why),
        base::ErrorCode::kInvalidArgument);
  };
  if (eq == std::string_view::npos) return bad("no '='");
  std::string_view from = entry.substr(0, eq);
  std::string_view to = entry.substr(eq + 1);
  if (from.empty()) return bad("empty original image");
  if (to.empty()) return bad("empty overridden image");
  if (to.find('=') != std::string_view::npos) return bad("more than one '='");
  auto has_space = [](std::string_view s) {
    return std::any_of(s.begin(), s.end(),
                       [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); });
  };
  if (has_space(from) || has_space(to)) return bad("image names cannot contain spaces");
  return std::pair{std::string(from), std::string(to)};
}

std::string renderConfigYaml(const Config& cfg) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const KeyDef& d : keyDefs()) {
    if (d.info.ignored || !d.info.alias_of.empty()) continue;
    out << YAML::Key << std::string(d.info.key) << YAML::Value;
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
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace ekco::agent
