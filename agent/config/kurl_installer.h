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

}  // namespace ekco::agent
