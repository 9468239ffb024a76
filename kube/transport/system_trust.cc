#include "kube/transport/system_trust.h"

#include <cstdlib>
#include <memory>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"

namespace ekco::kube {

namespace {

// True when `text` holds a PEM block OpenSSL loads as a trust anchor: "CERTIFICATE", and the
// "TRUSTED CERTIFICATE" and "X509 CERTIFICATE" forms its file loader also accepts.
bool hasPemCertificate(std::string_view text) {
  constexpr std::string_view kBegin = "-----BEGIN ";
  for (auto at = text.find(kBegin); at != std::string_view::npos;
       at = text.find(kBegin, at + kBegin.size())) {
    const std::string_view rest = text.substr(at + kBegin.size());
    for (const std::string_view label :
         {"CERTIFICATE-----", "TRUSTED CERTIFICATE-----", "X509 CERTIFICATE-----"}) {
      if (rest.substr(0, label.size()) == label) return true;
    }
  }
  return false;
}

std::string searchedList() {
  std::string out;
  for (const CaBundleLocation& location : kWellKnownCaBundles) {
    if (!out.empty()) out += ", ";
    out += location.path;
  }
  return out;
}

}  // namespace

SystemTrust chooseSystemTrust(const Environment& env, const BundleProbe& usable) {
  // (1) SSL_CERT_FILE: used whatever the probe says.
  if (const auto it = env.find(std::string(kSslCertFile)); it != env.end() && !it->second.empty()) {
    SystemTrust trust{.ca_file = it->second, .source = std::string(kSslCertFile)};
    if (std::string why = usable(it->second); !why.empty()) {
      trust.problem = std::string(kSslCertFile) + " is not usable: " + why +
                      "; ekco tries no other bundle: fix or unset it";
    }
    return trust;
  }
  // (2) the first usable well-known location.
  for (const CaBundleLocation& location : kWellKnownCaBundles) {
    const std::string path(location.path);
    if (usable(path).empty()) {
      return SystemTrust{.ca_file = path, .source = std::string(location.family)};
    }
  }
  // (3) none.
  return SystemTrust{.problem = "no CA bundle found: " + std::string(kSslCertFile) +
                                " is not set and none of " + searchedList() + " is usable; set " +
                                std::string(kSslCertFile) + " to the host's bundle"};
}

BundleProbe bundleProbe(const hostfs::HostFs& fs) {
  return [&fs](const std::string& path) -> std::string {
    auto text = fs.read(path);
    if (!text) return text.error().message();
    if (!hasPemCertificate(*text)) return path + " holds no PEM certificate";
    return "";
  };
}

const SystemTrust& processSystemTrust() {
  // A function-local static: initialised once, by the first caller, while others wait.
  static const SystemTrust trust = [] {
    Environment env;
    if (const char* value = std::getenv(std::string(kSslCertFile).c_str())) {
      env[std::string(kSslCertFile)] = value;
    }
    static const base::SystemClock clock;
    auto fs = hostfs::LocalHostFs::open("/", clock);
    if (!fs) {
      // Not expected ("/" always opens); every file then counts as unreadable, for this reason.
      const std::string why = fs.error().message();
      return chooseSystemTrust(env, [&why](const std::string&) { return why; });
    }
    return chooseSystemTrust(env, bundleProbe(**fs));
  }();
  return trust;
}

std::string describeSystemTrust(const SystemTrust& trust) {
  if (trust.ca_file.empty()) return "none (" + trust.problem + ")";
  std::string out = trust.ca_file + " (" + trust.source;
  if (!trust.problem.empty()) out += "; " + trust.problem;
  return out + ")";
}

}  // namespace ekco::kube
