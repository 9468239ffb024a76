#include "agent/features/certs/cluster_secrets.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "kube/transport/kubeconfig.h"
#include "pki/issue.h"
#include "pki/renew.h"

// `auto name = *expr`, or return expr's error.
#define EKCO_TRY_ASSIGN(name, expr)                              \
  auto name##_result_ = (expr);                                  \
  if (!name##_result_) return std::move(name##_result_).error(); \
  auto name = std::move(*name##_result_)

namespace ekco::agent {

namespace {

using base::Error;
using base::ErrorCode;
using base::Result;
using kube::Json;

std::string secretName(const std::string& ns, const std::string& name) { return ns + "/" + name; }

// The secret, or nullopt when it does not exist.
Result<std::optional<Json>> readSecret(kube::KubeClient& kube, const std::string& ns,
                                       const std::string& name) {
  auto got = kube.get(kube::resources::kSecrets, ns, name);
  if (got) return std::optional<Json>(std::move(*got));
  if (got.error().code() == ErrorCode::kNotFound) return std::optional<Json>();
  return std::move(got).error().wrap("read secret " + secretName(ns, name));
}

// data[key] decoded; kParse naming the secret and key when absent or not base64.
Result<std::string> dataOf(const Json& secret, const std::string& key, const std::string& where) {
  const Json* data = secret.contains("data") ? &secret["data"] : nullptr;
  if (data == nullptr || !data->is_object() || !data->contains(key) || !(*data)[key].is_string()) {
    return Error(fmt::format("secret {}: no data.{}", where, key), ErrorCode::kParse);
  }
  auto decoded = kube::base64Decode((*data)[key].get<std::string>());
  if (!decoded) {
    return Error(fmt::format("secret {}: data.{} is not base64", where, key), ErrorCode::kParse);
  }
  return std::move(*decoded);
}

std::chrono::seconds leftAt(const pki::Certificate& cert, base::WallTime now) {
  return std::chrono::floor<std::chrono::seconds>(cert.not_after - now);
}

bool customKurlProxy(const pki::Certificate& cert) {
  const std::string_view host = kKurlProxyHost;
  const bool issuer_custom =
      !cert.issuer_common_name.empty() && !cert.issuer_common_name.starts_with(host);
  return issuer_custom || !cert.common_name.starts_with(host);
}

struct Slot {
  std::string name;
  std::string ns;
  std::string secret;
  std::string cert_key;
};

std::vector<Slot> slots(const ClusterCertsOptions& o) {
  std::vector<Slot> out;
  if (!o.contour_namespace.empty()) {
    out.push_back({"contour", o.contour_namespace, o.contour_secret, "tls.crt"});
    out.push_back({"envoy", o.contour_namespace, o.envoy_secret, "tls.crt"});
  }
  out.push_back({"registry", o.registry_namespace, o.registry_secret, "registry.crt"});
  out.push_back({"kurl-proxy", o.kurl_proxy_namespace, o.kurl_proxy_secret, "tls.crt"});
  out.push_back({"kotsadm-kubelet-client", o.kotsadm_kubelet_namespace, o.kotsadm_kubelet_secret,
                 "client.crt"});
  return out;
}

ClusterSecretState inspectOne(kube::KubeClient& kube, const hostfs::HostFs& fs,
                              const ClusterCertsOptions& o, const Slot& slot) {
  ClusterSecretState s{.name = slot.name, .secret = secretName(slot.ns, slot.secret)};
  auto secret = readSecret(kube, slot.ns, slot.secret);
  if (!secret) {
    s.problem = secret.error().message();
    return s;
  }
  if (!*secret) {
    s.note = "absent (the add-on is not installed)";
    return s;
  }
  s.present = true;
  auto pem = dataOf(**secret, slot.cert_key, s.secret);
  if (!pem) {
    s.problem = pem.error().message();
    return s;
  }
  auto cert = pki::parseCertificate(*pem, "secret " + s.secret + " data." + slot.cert_key);
  if (!cert) {
    s.problem = cert.error().message();
    return s;
  }
  s.cert = *cert;
  s.left = leftAt(*cert, o.now);
  const bool inside = s.left < o.ttl || o.force;
  if (slot.name == "kurl-proxy") {
    if (customKurlProxy(*cert)) {
      s.note = "a custom certificate: reported, never replaced";
      return s;
    }
    s.due = inside;
  } else if (slot.name == "kotsadm-kubelet-client") {
    const std::string base = o.certificates_dir + "/apiserver-kubelet-client";
    auto host_cert = fs.read(base + ".crt");
    auto host_key = fs.read(base + ".key");
    if (!host_cert || !host_key) {
      s.note = "the host's apiserver-kubelet-client pair is not readable here";
      return s;
    }
    // Every control-plane node has a pair of its own: the secret follows the freshest one (a
    // node whose pair expires sooner never overwrites it), so two nodes cannot flip it back and
    // forth.
    auto key = dataOf(**secret, "client.key", s.secret);
    const bool differs = *pem != *host_cert || !key || *key != *host_key;
    auto host = pki::parseCertificate(*host_cert, base + ".crt");
    const bool secret_pair_ok =
        key && pki::checkKeyMatches(*pem, *key, "secret " + s.secret).has_value();
    s.due = differs && host &&
            (host->not_after > cert->not_after || !secret_pair_ok || (o.force && differs));
    if (s.due) {
      s.note = "older than this host's apiserver-kubelet-client pair";
    } else if (differs) {
      s.note = "another control-plane node's pair, at least as fresh as this host's";
    }
  } else if (slot.name == "registry") {
    auto ca_key = fs.exists(o.certificates_dir + "/ca.key");
    if (!ca_key || !*ca_key) {
      s.note = "the cluster CA key is not on this host";
      return s;
    }
    s.due = inside;
  } else {
    s.due = inside;
    // Contour's CA, kept in both secrets: inside the TTL, both leaves are renewed with it.
    if (auto ca_pem = dataOf(**secret, "ca.crt", s.secret)) {
      if (auto ca = pki::parseCertificate(*ca_pem, "secret " + s.secret + " data.ca.crt")) {
        if (leftAt(*ca, o.now) < o.ttl) {
          s.due = true;
          s.note = "its CA expires " + kube::formatRfc3339(ca->not_after);
        }
      }
    }
  }
  return s;
}

// data with these keys (base64), the rest of the secret as read.
Json withData(Json secret, const std::vector<std::pair<std::string, std::string>>& entries) {
  if (!secret.contains("data") || !secret["data"].is_object()) secret["data"] = Json::object();
  for (const auto& [k, v] : entries) secret["data"][k] = pki::base64Encode(v);
  return secret;
}

class Renewer {
 public:
  Renewer(kube::KubeClient& kube, const hostfs::HostFs& fs, const ClusterCertsOptions& o,
          const SecretEventFn& event)
      : kube_(kube), fs_(fs), o_(o), event_(event) {}

  ClusterCertsReport run(const std::vector<ClusterSecretState>& states) {
    bool contour_done = false;
    for (const ClusterSecretState& s : states) {
      if (!clusterSecretSelected(o_.names, s.name)) continue;
      if (!s.problem.empty()) {
        report_.errors.push_back(s.problem);
        continue;
      }
      if (!s.due) continue;
      if (s.name == "contour" || s.name == "envoy") {
        if (contour_done) continue;
        contour_done = true;
        attempt("contour", [this] { return contour(); });
      } else if (s.name == "registry") {
        attempt(s.name, [this] { return registry(); });
      } else if (s.name == "kurl-proxy") {
        attempt(s.name, [this] { return kurlProxy(); });
      } else {
        attempt(s.name, [this] { return kubeletClient(); });
      }
    }
    return std::move(report_);
  }

 private:
  void attempt(const std::string& name, const std::function<base::Status()>& step) {
    if (auto done = step(); !done) {
      report_.errors.push_back(name + ": " + done.error().message());
      base::logError("cluster certificates: not renewed",
                     {{"certificate", name}, {"error", done.error().message()}});
    }
  }

  void say(std::string line) {
    base::logInfo("cluster certificates", {{"step", line}});
    report_.lines.push_back(std::move(line));
  }

  // Re-read right before the write; still there and still the same resourceVersion, or the
  // update conflicts.
  Result<Json> fresh(const std::string& ns, const std::string& name) {
    auto secret = readSecret(kube_, ns, name);
    if (!secret) return std::move(secret).error();
    if (!*secret) {
      return Error("secret " + secretName(ns, name) + " disappeared", ErrorCode::kNotFound);
    }
    return std::move(**secret);
  }

  base::Status write(const Json& secret, const std::string& ns, const std::string& name,
                     const std::string& what) {
    if (o_.may_write && !o_.may_write()) {
      return Error("maintenance mode is on: secret " + secretName(ns, name) + " not renewed",
                   ErrorCode::kUnavailable);
    }
    auto updated = kube_.update(kube::resources::kSecrets, ns, secret);
    if (!updated) {
      if (updated.error().code() == ErrorCode::kConflict) {
        return Error("secret " + secretName(ns, name) +
                         " changed while it was renewed (another agent?); looked at again next "
                         "check",
                     ErrorCode::kConflict);
      }
      return std::move(updated).error().wrap("update secret " + secretName(ns, name));
    }
    say("renewed " + what + " in secret " + secretName(ns, name));
    if (event_) {
      event_("CertificateRenewed", "ekco renewed " + what, ns, name, "Normal");
    }
    return base::ok();
  }

  base::Status registry() {
    const std::string& ns = o_.registry_namespace;
    const std::string& name = o_.registry_secret;
    if (o_.dry_run) {
      say("would renew the registry certificate in secret " + secretName(ns, name) +
          " and restart pods app=registry");
      return base::ok();
    }
    EKCO_TRY_ASSIGN(secret, fresh(ns, name));
    EKCO_TRY_ASSIGN(cert, dataOf(secret, "registry.crt", secretName(ns, name)));
    EKCO_TRY_ASSIGN(key, dataOf(secret, "registry.key", secretName(ns, name)));
    EKCO_TRY_ASSIGN(ca_cert, fs_.read(o_.certificates_dir + "/ca.crt"));
    EKCO_TRY_ASSIGN(ca_key, fs_.read(o_.certificates_dir + "/ca.key"));
    EKCO_TRY_ASSIGN(pair, pki::renewCertificate({.cert_pem = cert,
                                                 .ca_cert_pem = ca_cert,
                                                 .ca_key_pem = ca_key,
                                                 .now = o_.now,
                                                 .key_encoding = pki::keyEncodingOf(key),
                                                 .source = "secret " + secretName(ns, name)}));
    EKCO_TRY(write(withData(std::move(secret),
                            {{"registry.crt", pair.cert_pem}, {"registry.key", pair.key_pem}}),
                   ns, name, "the registry certificate"));
    // The registry reads its certificate at start.
    EKCO_TRY_ASSIGN(pods,
                    kube_.list(kube::resources::kPods, ns, {.label_selector = "app=registry"}));
    const Json& items = kube::jsonArray(pods, "items");
    for (const Json& pod : items) {
      const std::string pod_name = kube::jsonText(kube::jsonField(pod, "metadata"), "name");
      auto removed = kube_.remove(kube::resources::kPods, ns, pod_name);
      if (!removed && removed.error().code() != ErrorCode::kNotFound) {
        return std::move(removed).error().wrap("restart registry pod " + ns + "/" + pod_name);
      }
      say("restarted registry pod " + ns + "/" + pod_name);
    }
    return base::ok();
  }

  base::Status kurlProxy() {
    const std::string& ns = o_.kurl_proxy_namespace;
    const std::string& name = o_.kurl_proxy_secret;
    if (o_.dry_run) {
      say("would renew the kurl-proxy certificate in secret " + secretName(ns, name));
      return base::ok();
    }
    EKCO_TRY_ASSIGN(secret, fresh(ns, name));
    EKCO_TRY_ASSIGN(pem, dataOf(secret, "tls.crt", secretName(ns, name)));
    EKCO_TRY_ASSIGN(cert, pki::parseCertificate(pem, "secret " + secretName(ns, name)));
    if (customKurlProxy(cert)) return base::ok();  // replaced by someone meanwhile
    // As Go's certutil.GenerateSelfSignedCertKey: a CA "<host>-ca@<unix>" signing "<host>@<unix>",
    // the host itself among the DNS names, the chain (leaf then CA) in tls.crt.
    const long long unix_now =
        std::chrono::floor<std::chrono::seconds>(o_.now.time_since_epoch()).count();
    const std::string host(kKurlProxyHost);
    std::vector<std::string> dns = cert.dns_names;
    if (std::find(dns.begin(), dns.end(), host) == dns.end()) dns.insert(dns.begin(), host);
    const std::string source = "secret " + secretName(ns, name);
    EKCO_TRY_ASSIGN(ca,
                    pki::issueCertificate({.common_name = fmt::format("{}-ca@{}", host, unix_now),
                                           .is_ca = true,
                                           .now = o_.now,
                                           .source = source}));
    EKCO_TRY_ASSIGN(leaf,
                    pki::issueCertificate({.common_name = fmt::format("{}@{}", host, unix_now),
                                           .dns_names = dns,
                                           .ip_addresses = cert.ip_addresses,
                                           .server_auth = true,
                                           .now = o_.now,
                                           .issuer_cert_pem = ca.cert_pem,
                                           .issuer_key_pem = ca.key_pem,
                                           .source = source}));
    return write(withData(std::move(secret),
                          {{"tls.crt", leaf.cert_pem + ca.cert_pem}, {"tls.key", leaf.key_pem}}),
                 ns, name, "the kurl-proxy certificate");
  }

  base::Status kubeletClient() {
    const std::string& ns = o_.kotsadm_kubelet_namespace;
    const std::string& name = o_.kotsadm_kubelet_secret;
    if (o_.dry_run) {
      say("would copy the host's apiserver-kubelet-client pair to secret " + secretName(ns, name));
      return base::ok();
    }
    EKCO_TRY_ASSIGN(secret, fresh(ns, name));
    const std::string base = o_.certificates_dir + "/apiserver-kubelet-client";
    EKCO_TRY_ASSIGN(cert, fs_.read(base + ".crt"));
    EKCO_TRY_ASSIGN(key, fs_.read(base + ".key"));
    EKCO_TRY(pki::checkKeyMatches(cert, key, base + ".crt"));
    return write(withData(std::move(secret), {{"client.crt", cert}, {"client.key", key}}), ns, name,
                 "the kotsadm kubelet client certificate (the host's pair)");
  }

  base::Status contour() {
    const std::string& ns = o_.contour_namespace;
    if (o_.dry_run) {
      say("would renew the Contour CA and the contour and envoy certificates in " + ns +
          " and restart DaemonSet " + ns + "/envoy");
      return base::ok();
    }
    // As Contour's certgen: a CA "Project Contour" and two leaves with their service names.
    const std::string source = "secret " + secretName(ns, o_.contour_secret);
    EKCO_TRY_ASSIGN(
        ca,
        pki::issueCertificate(
            {.common_name = "Project Contour", .is_ca = true, .now = o_.now, .source = source}));
    auto leafFor = [&](const std::string& service) {
      return pki::issueCertificate(
          {.common_name = service,
           .dns_names = {service, service + "." + ns, service + "." + ns + ".svc",
                         service + "." + ns + ".svc.cluster.local"},
           .server_auth = true,
           .client_auth = true,
           .now = o_.now,
           .issuer_cert_pem = ca.cert_pem,
           .issuer_key_pem = ca.key_pem,
           .source = source});
    };
    EKCO_TRY_ASSIGN(contour_pair, leafFor("contour"));
    EKCO_TRY_ASSIGN(envoy_pair, leafFor("envoy"));
    // Both read before either is written: a pair that cannot be read is not half-written.
    EKCO_TRY_ASSIGN(contour_secret, fresh(ns, o_.contour_secret));
    EKCO_TRY_ASSIGN(envoy_secret, fresh(ns, o_.envoy_secret));
    EKCO_TRY(write(withData(std::move(contour_secret), {{"ca.crt", ca.cert_pem},
                                                        {"tls.crt", contour_pair.cert_pem},
                                                        {"tls.key", contour_pair.key_pem}}),
                   ns, o_.contour_secret, "the Contour CA and contour certificate"));
    EKCO_TRY(write(withData(std::move(envoy_secret), {{"ca.crt", ca.cert_pem},
                                                      {"tls.crt", envoy_pair.cert_pem},
                                                      {"tls.key", envoy_pair.key_pem}}),
                   ns, o_.envoy_secret, "the envoy certificate"));
    // Envoy reads its certificate at start (ekco#40): a rollout restart, as kubectl does it.
    const Json patch = {
        {"spec",
         {{"template",
           {{"metadata",
             {{"annotations",
               {{"kubectl.kubernetes.io/restartedAt", kube::formatRfc3339(o_.now)}}}}}}}}}};
    auto patched = kube_.patch(kube::resources::kDaemonSets, ns, "envoy",
                               kube::PatchType::kStrategicMerge, patch);
    if (!patched && patched.error().code() != ErrorCode::kNotFound) {
      return std::move(patched).error().wrap("restart DaemonSet " + ns + "/envoy");
    }
    if (patched) say("restarted DaemonSet " + ns + "/envoy");
    return base::ok();
  }

  kube::KubeClient& kube_;
  const hostfs::HostFs& fs_;
  const ClusterCertsOptions& o_;
  const SecretEventFn& event_;
  ClusterCertsReport report_;
};

}  // namespace

ClusterCertsOptions clusterCertsOptions(const Config& c) {
  ClusterCertsOptions o;
  o.ttl = std::chrono::duration_cast<std::chrono::seconds>(c.rotate_certs_ttl);
  o.certificates_dir = c.certificates_dir;
  o.registry_namespace = c.registry_cert_namespace;
  o.registry_secret = c.registry_cert_secret;
  o.kurl_proxy_namespace = c.kurl_proxy_cert_namespace;
  o.kurl_proxy_secret = c.kurl_proxy_cert_secret;
  o.kotsadm_kubelet_namespace = c.kotsadm_kubelet_cert_namespace;
  o.kotsadm_kubelet_secret = c.kotsadm_kubelet_cert_secret;
  o.contour_namespace = c.contour_namespace;
  o.contour_secret = c.contour_cert_secret;
  o.envoy_secret = c.envoy_cert_secret;
  return o;
}

std::vector<ClusterSecretState> inspectClusterSecrets(kube::KubeClient& kube,
                                                      const hostfs::HostFs& fs,
                                                      const ClusterCertsOptions& options) {
  std::vector<ClusterSecretState> out;
  for (const Slot& slot : slots(options)) out.push_back(inspectOne(kube, fs, options, slot));
  return out;
}

ClusterCertsReport renewClusterSecrets(kube::KubeClient& kube, const hostfs::HostFs& fs,
                                       const ClusterCertsOptions& options,
                                       const std::vector<ClusterSecretState>& states,
                                       const SecretEventFn& event) {
  return Renewer(kube, fs, options, event).run(states);
}

bool clusterSecretSelected(const std::vector<std::string>& names, const std::string& state_name) {
  if (names.empty()) return true;
  const auto named = [&names](std::string_view n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  if (state_name == "contour" || state_name == "envoy") return named("contour") || named("envoy");
  return named(state_name);
}

SecretEventFn secretEventRecorder(kube::KubeClient& kube,
                                  std::function<void(const std::string& error)> failed) {
  return [&kube, failed = std::move(failed)](const std::string& reason, const std::string& message,
                                             const std::string& ns, const std::string& name,
                                             const std::string& type) {
    auto recorded = kube.recordEvent({.involved_resource = kube::resources::kSecrets,
                                      .involved_namespace = ns,
                                      .involved_name = name,
                                      .reason = reason,
                                      .message = message,
                                      .type = type});
    if (!recorded && failed) failed(recorded.error().message());
  };
}

}  // namespace ekco::agent

#undef EKCO_TRY_ASSIGN
