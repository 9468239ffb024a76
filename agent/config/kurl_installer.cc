#include "agent/config/kurl_installer.h"
#include "base/strings.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace ekco::agent {
namespace {

// An add-on is present in a kURL spec when its section names a version (kURL's install.sh
// tests `$ROOK_VERSION`, `$CONTOUR_VERSION`, ...).
bool addonPresent(const YAML::Node& spec, const char* addon) {
  YAML::Node a = spec[addon];
  return a && a.IsMap() && a["version"] && a["version"].IsScalar() &&
         !a["version"].Scalar().empty();
}

bool yamlTrue(const YAML::Node& n) {
  if (!n || !n.IsScalar()) return false;
  std::string s = base::asciiLower(n.Scalar());
  return s == "true" || s == "yes" || s == "on";
}

class Converter {
 public:
  Converter(const YAML::Node& spec, std::string name) : spec_(spec), name_(std::move(name)) {}

  KurlConversion run() {
    const YAML::Node ekco = spec_["ekco"];
    const bool rook = addonPresent(spec_, "rook");
    const bool contour = addonPresent(spec_, "contour");
    const bool openebs_local_pv =
        addonPresent(spec_, "openebs") && yamlTrue(spec_["openebs"]["isLocalPVEnabled"]);
    const bool minio = addonPresent(spec_, "minio");
    const bool kotsadm = addonPresent(spec_, "kotsadm");

    // Whether the add-on a field needs is there: MinIO's and kotsadm's HA also need OpenEBS's
    // local PV.
    const std::map<std::string_view, bool> present = {{"", true},
                                                      {"rook", rook},
                                                      {"contour", contour},
                                                      {"minio", minio && openebs_local_pv},
                                                      {"kotsadm", kotsadm && openebs_local_pv}};
    // What kURL's configmap template renders before any spec.ekco field is consulted.
    for (const KurlField& f : kurlFields()) {
      if (f.how == KurlHow::kPresence) set(f.key, present.at(f.needs), std::string(f.path));
    }
    if (rook) mapRook();
    if (minio) {
      if (YAML::Node ns = spec_["minio"]["namespace"];
          ns && ns.IsScalar() && !ns.Scalar().empty()) {
        loader_.setText("minio_namespace", ns.Scalar(), where(ns, "spec.minio.namespace"));
      }
    }

    if (ekco && !ekco.IsNull()) {
      if (!ekco.IsMap()) {
        problems_.push_back({where(ekco, "spec.ekco"), "", "want a mapping"});
      } else {
        mapEkco(ekco, present);
      }
    }

    KurlConversion out;
    out.config = loader_.finish();
    out.problems = problems_;
    out.problems.insert(out.problems.end(), loader_.problems().begin(), loader_.problems().end());
    out.notices = notices_;
    out.notices.insert(out.notices.end(), loader_.notices().begin(), loader_.notices().end());
    return out;
  }

 private:
  std::string where(const YAML::Node& n, std::string_view field) const {
    return fmt::format("{}:{} ({})", name_, n.Mark().line + 1, field);
  }

  void set(std::string_view key, bool value, const std::string& source) {
    loader_.setText(key, value ? "true" : "false", source);
  }

  void mapRook() {
    const YAML::Node r = spec_["rook"];
    if (YAML::Node n = r["minimumNodeCount"]; n) {
      loader_.setText("rook_minimum_node_count", n.Scalar(),
                      where(n, "spec.rook.minimumNodeCount"));
    }
    if (YAML::Node n = r["storageClassName"]; n && n.IsScalar()) {
      loader_.setText("rook_storage_class", n.Scalar(), where(n, "spec.rook.storageClassName"));
    }
    if (YAML::Node n = r["nodes"]; n && !n.IsNull()) {
      // kURL passes the node list to EKCO as YAML text ($ROOK_NODES).
      YAML::Emitter e;
      e << n;
      loader_.setText("rook_storage_nodes", e.c_str(), where(n, "spec.rook.nodes"));
    }
    // kURL's template gives Rook 1.0.4 clusters the node-critical PriorityClass.
    if (YAML::Node v = r["version"]; v && v.IsScalar() && v.Scalar() == "1.0.4") {
      loader_.setText("rook_priority_class", "node-critical", where(v, "spec.rook.version"));
    }
  }

  // Reads a spec boolean strictly; reports a problem at `src` (and returns nullopt) if it is not
  // one.
  std::optional<bool> specBool(const YAML::Node& n, const std::string& src) {
    if (n.IsScalar()) {
      std::string s = base::asciiLower(n.Scalar());
      if (s == "true" || s == "yes" || s == "on") return true;
      if (s == "false" || s == "no" || s == "off") return false;
    }
    problems_.push_back({src, "", "want true or false"});
    return std::nullopt;
  }

  void mapEkco(const YAML::Node& ekco, const std::map<std::string_view, bool>& present) {
    // spec.ekco field → what it does, from kurlFields().
    using Handler = std::function<void(const YAML::Node&, const std::string&)>;
    auto direct = [this](std::string_view key) -> Handler {
      return [this, key](const YAML::Node& n, const std::string& src) {
        if (!n.IsScalar()) {
          problems_.push_back({src, "", "want a single value"});
          return;
        }
        loader_.setText(key, n.Scalar(), src);
      };
    };
    // A `should…`/`…ShouldDisable…` flag: the config key is its negation, and only applies
    // when the add-on it concerns is present (as kURL's template renders it).
    auto negated = [this](std::string_view key, bool applies) -> Handler {
      return [this, key, applies](const YAML::Node& n, const std::string& src) {
        if (auto b = specBool(n, src)) set(key, applies && !*b, src);
      };
    };
    auto boolean = [this](std::string_view key) -> Handler {
      return [this, key](const YAML::Node& n, const std::string& src) {
        if (auto b = specBool(n, src)) set(key, *b, src);
      };
    };
    auto ignored = [this](std::string_view why) -> Handler {
      return [this, why](const YAML::Node&, const std::string& src) {
        notices_.push_back({src, "", std::string(why)});
      };
    };
    auto list = [this](std::string_view key) -> Handler {
      return [this, key](const YAML::Node& n, const std::string& src) {
        if (n.IsNull()) return;
        if (!n.IsSequence()) {
          problems_.push_back({src, "", "want a list of \"original=overridden\" strings"});
          return;
        }
        std::string joined;
        for (const auto& item : n) {
          if (!item.IsScalar()) {
            problems_.push_back({src, "", "want a list of \"original=overridden\" strings"});
            return;
          }
          if (item.Scalar().find(',') != std::string::npos) {
            problems_.push_back(
                {src, "", "entry " + base::quoteForMessage(item.Scalar()) + " contains a comma"});
            return;
          }
          if (!joined.empty()) joined += ',';
          joined += item.Scalar();
        }
        loader_.setText(key, joined, src);
      };
    };
    constexpr std::string_view kPrefix = "spec.ekco.";
    std::vector<std::pair<std::string_view, Handler>> fields;
    for (const KurlField& f : kurlFields()) {
      if (!f.path.starts_with(kPrefix)) continue;
      const std::string_view field = f.path.substr(kPrefix.size());
      switch (f.how) {
        case KurlHow::kValue:
          fields.emplace_back(field, direct(f.key));
          break;
        case KurlHow::kBoolean:
          fields.emplace_back(field, boolean(f.key));
          break;
        case KurlHow::kNegated:
          fields.emplace_back(field, negated(f.key, present.at(f.needs)));
          break;
        case KurlHow::kList:
          fields.emplace_back(field, list(f.key));
          break;
        case KurlHow::kNotAKey:
          fields.emplace_back(field, ignored(f.why));
          break;
        case KurlHow::kPresence:
          break;
      }
    }
    std::set<std::string> seen;
    for (const auto& kv : ekco) {
      const std::string field = kv.first.Scalar();
      const std::string src = where(kv.first, "spec.ekco." + field);
      if (!seen.insert(field).second) {
        problems_.push_back({src, "", "duplicate field"});
        continue;
      }
      auto it = std::find_if(fields.begin(), fields.end(),
                             [&](const auto& f) { return f.first == field; });
      if (it == fields.end()) {
        problems_.push_back({src, "", "unknown spec.ekco field"});
        continue;
      }
      it->second(kv.second, src);
    }
  }

  const YAML::Node& spec_;
  std::string name_;
  ConfigLoader loader_;
  std::vector<ConfigProblem> problems_;
  std::vector<ConfigNotice> notices_;
};

}  // namespace

const std::vector<KurlField>& kurlFields() {
  static const std::vector<KurlField> fields = {
      // What kURL's configmap template renders from the add-ons present (addonPresent: the
      // section names a version), before any spec.ekco field.
      {"spec.rook", KurlHow::kPresence, "maintain_rook_storage_nodes", "rook"},
      {"spec.rook", KurlHow::kPresence, "reconcile_rook_mds_placement", "rook"},
      {"spec.rook", KurlHow::kPresence, "reconcile_ceph_csi_resources", "rook"},
      {"spec.contour", KurlHow::kPresence, "restart_failed_envoy_pods", "contour"},
      {"spec.minio", KurlHow::kPresence, "enable_ha_minio", "minio",
       "OpenEBS's local PV: spec.openebs.isLocalPVEnabled"},
      {"spec.kotsadm", KurlHow::kPresence, "enable_ha_kotsadm", "kotsadm",
       "OpenEBS's local PV: spec.openebs.isLocalPVEnabled"},
      // The add-on sections' own fields (Converter::mapRook, the MinIO namespace).
      {"spec.rook.minimumNodeCount", KurlHow::kValue, "rook_minimum_node_count", "rook"},
      {"spec.rook.storageClassName", KurlHow::kValue, "rook_storage_class", "rook"},
      {"spec.rook.nodes", KurlHow::kValue, "rook_storage_nodes", "rook", "as YAML text"},
      {"spec.rook.version", KurlHow::kValue, "rook_priority_class", "rook",
       "node-critical for Rook 1.0.4"},
      {"spec.minio.namespace", KurlHow::kValue, "minio_namespace", "minio"},
      // spec.ekco: the fields of the kurlkinds Ekco struct, plus kotsadmShouldDisableManagement,
      // which kURL's yamltobash reads.
      {"spec.ekco.version", KurlHow::kNotAKey, "", "",
       "not a config key: the ekco package version is chosen by the installer"},
      {"spec.ekco.s3Override", KurlHow::kNotAKey, "", "",
       "not a config key: an installer download location"},
      {"spec.ekco.nodeUnreachableToleration", KurlHow::kValue, "node_unreachable_toleration"},
      {"spec.ekco.minReadyMasterNodeCount", KurlHow::kValue, "min_ready_master_nodes"},
      {"spec.ekco.minReadyWorkerNodeCount", KurlHow::kValue, "min_ready_worker_nodes"},
      {"spec.ekco.rookShouldUseAllNodes", KurlHow::kNegated, "maintain_rook_storage_nodes", "rook"},
      {"spec.ekco.rookShouldDisableReconcileMDSPlacement", KurlHow::kNegated,
       "reconcile_rook_mds_placement", "rook"},
      {"spec.ekco.rookShouldDisableReconcileCephCSIResources", KurlHow::kNegated,
       "reconcile_ceph_csi_resources", "rook"},
      {"spec.ekco.shouldDisableRebootServices", KurlHow::kBoolean, "disable_reboot_service"},
      {"spec.ekco.shouldDisableClearNodes", KurlHow::kNegated, "clear_dead_nodes"},
      {"spec.ekco.shouldEnablePurgeNodes", KurlHow::kBoolean, "purge_dead_nodes"},
      {"spec.ekco.autoUpgradeSchedule", KurlHow::kValue, "auto_upgrade_schedule"},
      {"spec.ekco.enableInternalLoadBalancer", KurlHow::kBoolean, "enable_internal_load_balancer"},
      {"spec.ekco.shouldDisableRestartFailedEnvoyPods", KurlHow::kNegated,
       "restart_failed_envoy_pods", "contour"},
      {"spec.ekco.envoyPodsNotReadyDuration", KurlHow::kValue, "envoy_pods_not_ready_duration"},
      {"spec.ekco.minioShouldDisableManagement", KurlHow::kNegated, "enable_ha_minio", "minio"},
      {"spec.ekco.kotsadmShouldDisableManagement", KurlHow::kNegated, "enable_ha_kotsadm",
       "kotsadm"},
      {"spec.ekco.podImageOverrides", KurlHow::kList, "pod_image_overrides"},
  };
  return fields;
}

namespace {

// "Rook", "MinIO with OpenEBS's local PV", ...: a KurlField::needs for people.
std::string addonName(std::string_view needs) {
  if (needs == "rook") return "Rook";
  if (needs == "contour") return "Contour";
  if (needs == "minio") return "MinIO with OpenEBS's local PV";
  if (needs == "kotsadm") return "KOTS with OpenEBS's local PV";
  return std::string(needs);
}

}  // namespace

std::string describeKurlField(const KurlField& f) {
  std::string how;
  switch (f.how) {
    case KurlHow::kValue:
      how = "its value";
      break;
    case KurlHow::kBoolean:
      how = "its boolean";
      break;
    case KurlHow::kNegated:
      how =
          f.needs.empty() ? std::string("negated") : "negated; false without " + addonName(f.needs);
      break;
    case KurlHow::kList:
      how = "its list, comma-joined";
      break;
    case KurlHow::kPresence:
      how = "true when " + addonName(f.needs) + " is present";
      break;
    case KurlHow::kNotAKey:
      return "not configuration (a warning says so): " + std::string(f.why);
  }
  if (!f.why.empty()) how += "; " + std::string(f.why);
  return how;
}

KurlConversion configFromKurlInstaller(std::string_view yaml, const std::string& name) {
  KurlConversion bad;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message may quote the offending byte raw ("unknown escape character: \x00").
    bad.problems.push_back({fmt::format("{}:{}", name, e.mark.line + 1), "",
                            "malformed YAML: " + base::escapeForMessage(e.msg)});
    return bad;
  }
  if (!root.IsMap()) {
    bad.problems.push_back({name, "", "not a kURL Installer (want a YAML mapping)"});
    return bad;
  }
  YAML::Node kind = root["kind"];
  if (!kind || !kind.IsScalar() || kind.Scalar() != "Installer") {
    bad.problems.push_back({name, "", "not a kURL Installer (kind must be Installer)"});
    return bad;
  }
  YAML::Node api = root["apiVersion"];
  if (!api || !api.IsScalar() ||
      (api.Scalar() != "cluster.kurl.sh/v1beta1" && api.Scalar() != "kurl.sh/v1beta1")) {
    bad.problems.push_back(
        {name, "", "not a kURL Installer (apiVersion must be cluster.kurl.sh/v1beta1)"});
    return bad;
  }
  YAML::Node spec = root["spec"];
  if (!spec || !spec.IsMap()) {
    bad.problems.push_back({name, "", "the Installer has no spec mapping"});
    return bad;
  }
  try {
    return Converter(spec, name).run();
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on unexpected shapes (e.g. indexing a scalar); keep it a problem.
    bad.problems.push_back({fmt::format("{}:{}", name, e.mark.line + 1), "",
                            "unexpected structure: " + base::escapeForMessage(e.msg)});
    return bad;
  }
}

}  // namespace ekco::agent
