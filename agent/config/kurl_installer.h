// `ekco config from-kurl`: maps a kURL Installer spec (spec.ekco.* and the add-ons whose
// presence kURL's configmap template consults) onto ekco's config.yaml, the way kURL's
// addons/ekco install.sh renders EKCO's ConfigMap.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"

namespace ekco::agent {

struct KurlConversion {
  Config config;
  std::vector<ConfigProblem> problems;  // non-empty: the spec cannot be converted (exit 2)
  std::vector<ConfigNotice> notices;    // fields that have no ekco equivalent, deprecations
};

// `name` is the file name used in problem sources ("installer.yaml:14: spec.ekco.x: ...").
KurlConversion configFromKurlInstaller(std::string_view yaml, const std::string& name);

// How a kURL Installer field becomes a key: the table the conversion runs from (spec.ekco.*),
// and the rules for the add-on sections it also reads, for the configuration reference.
enum class KurlHow {
  kValue,     // the field's value
  kBoolean,   // the field's boolean
  kNegated,   // the field's boolean, negated; false when the add-on `needs` is absent
  kList,      // a list of strings, comma-joined (podImageOverrides)
  kPresence,  // true when the add-on section is present (what kURL's template renders)
  kNotAKey,   // read and reported as a notice: not a config key (`why`)
};
struct KurlField {
  std::string_view path;  // "spec.ekco.nodeUnreachableToleration", "spec.rook"
  KurlHow how = KurlHow::kValue;
  std::string_view key{};    // the key it sets ("" for kNotAKey)
  std::string_view needs{};  // the add-on it applies with: "rook", "contour", "minio", "kotsadm"
  std::string_view why{};    // kNotAKey: why; otherwise a remark for the reference
};
const std::vector<KurlField>& kurlFields();
// What the field does to its key, for people: "its value", "negated; false without Rook",
// "true when Rook is present", ...
std::string describeKurlField(const KurlField& f);

}  // namespace ekco::agent
