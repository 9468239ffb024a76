#include "agent/features/certs/certs_renewal.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/policy/disruption_lease.h"
#include "base/duration.h"
#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

std::string manifestPath(const CertRenewalOptions& o, std::string_view component) {
  std::string dir = o.manifests_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/" + std::string(component) + ".yaml";
}

// The value of a "--flag=value" argument in the first container's command or args.
std::optional<std::string> flagValue(const YAML::Node& pod, std::string_view flag) {
  const YAML::Node containers = pod["spec"]["containers"];
  if (!containers || !containers.IsSequence() || containers.size() == 0) return std::nullopt;
  const std::string prefix = "--" + std::string(flag) + "=";
  for (const char* field : {"command", "args"}) {
    const YAML::Node list = containers[0][field];
    if (!list || !list.IsSequence()) continue;
    for (const YAML::Node& a : list) {
      if (!a.IsScalar()) continue;
      const std::string& s = a.Scalar();
      if (s.starts_with(prefix)) return s.substr(prefix.size());
    }
  }
  return std::nullopt;
}

std::optional<YAML::Node> loadYaml(std::string_view text) {
  try {
    YAML::Node n = YAML::Load(std::string(text));
    if (n.IsMap()) return n;
  } catch (const YAML::Exception&) {
  }
  return std::nullopt;
}

std::optional<int> parsePort(std::string_view s) {
  int port = 0;
  if (s.empty() || s.size() > 5) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535) return std::nullopt;
  return port;
}

// "[::1]" -> "::1"; "0.0.0.0" / "::" (listen on all) -> the loopback of that family.
std::string probeHost(std::string host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

bool podReadyWith(const json& pod, std::string_view stamp) {
  const json& annotations = kube::jsonField(kube::jsonField(pod, "metadata"), "annotations");
  if (kube::jsonText(annotations, kCertsRenewedAnnotation) != stamp) return false;
  const json& conditions = kube::jsonField(kube::jsonField(pod, "status"), "conditions");
  if (!conditions.is_array()) return false;
  return std::any_of(conditions.begin(), conditions.end(), [](const json& c) {
    return kube::jsonText(c, "type") == "Ready" && kube::jsonText(c, "status") == "True";
  });
}

class Run {
 public:
  Run(const CertRenewalOptions& o, const CertRenewalDeps& d) : o_(o), d_(d) {}

  Result<CertRenewalReport> run() {
    // 1. A dry run only says what the repair would do: it writes nothing.
    if (o_.dry_run) {
      auto found = findInterruptedRenewals(d_.fs, o_.inspect);
      if (!found) return std::move(found).error().wrap("find an interrupted renewal");
      for (const InterruptedRenewal& r : *found) {
        if (r.restore) {
          say(fmt::format("would restore {} from its backup {} ({})", r.name, r.backup_dir, r.why));
        }
      }
    } else {
      auto repaired = repairInterruptedRenewals(d_.fs, o_.inspect);
      if (!repaired) return std::move(repaired).error().wrap("repair an interrupted renewal");
      for (const std::string& name : *repaired) {
        say(fmt::format("restored {} from its backup (a renewal had been interrupted)", name));
      }
    }
    // 2.
    auto chosen = choose();
    if (!chosen) return std::move(chosen).error();
    if (chosen->empty()) {
      say("nothing to renew");
      return std::move(report_);
    }
    std::set<std::string> restarts;
    for (const CertSpec& s : *chosen) restarts.insert(s.restart.begin(), s.restart.end());
    // 3.
    if (o_.dry_run) {
      for (const CertSpec& s : *chosen) {
        if (!o_.alt_names) {
          say("would renew " + s.name);
          continue;
        }
        auto text = d_.fs.read(s.cert_path);
        auto cert = text ? pki::parseCertificate(*text, s.cert_path)
                         : Result<pki::Certificate>(std::move(text).error());
        if (!cert) return std::move(cert).error();
        say(fmt::format("would re-issue {} with the names {} (now {}), keeping its expiry {}",
                        s.name, fmt::join(changedAltNames(*cert, *o_.alt_names), ", "),
                        fmt::join(altNames(*cert), ", "), kube::formatRfc3339(cert->not_after)));
      }
      for (const std::string& r : restarts) say("would restart static pod " + r);
      return std::move(report_);
    }
    // 4.
    DisruptionLease lease(d_.kube, d_.clock,
                          {.ns = o_.lease_namespace, .holder = o_.node_name + "/certificates"});
    bool holding = false;
    if (auto taken = lease.acquireWithin(o_.lease_wait, o_.poll, d_.wait); taken) {
      holding = true;
    } else if (const ErrorCode code = taken.error().code();
               code != ErrorCode::kUnavailable && code != ErrorCode::kTimeout) {
      // Held by another primary, or the API refuses (RBAC, no namespace): not renewed.
      return std::move(taken).error().wrap("not renewed");
    } else {
      base::logWarn("certificates: renewing without the disruption lease",
                    {{"error", taken.error().message()}});
      say("the API cannot be reached (" + taken.error().message() +
          "): renewing without the disruption lease");
    }
    auto outcome = renewRestartVerify(*chosen);
    if (holding) {
      if (auto released = lease.release(); !released) {
        base::logWarn("certificates: disruption lease not released (it expires by itself)",
                      {{"error", released.error().message()}});
      }
    }
    if (!outcome) return std::move(outcome).error();
    return std::move(report_);
  }

 private:
  void say(std::string line) {
    base::logInfo("certificates", {{"node", o_.node_name}, {"step", line}});
    report_.lines.push_back(std::move(line));
  }
  void notRenewed(const std::string& name, const std::string& why) {
    report_.not_renewed.push_back(name + ": " + why);
  }

  Result<std::vector<CertSpec>> choose() {
    const std::vector<CertSpec> specs =
        kubeadmCertificates(o_.inspect.certificates_dir, o_.inspect.kubernetes_dir);
    for (const std::string& name : o_.names) {
      if (std::none_of(specs.begin(), specs.end(),
                       [&](const CertSpec& s) { return s.name == name; })) {
        std::string known;
        for (const CertSpec& s : specs) known += (known.empty() ? "" : ", ") + s.name;
        return Error(fmt::format("unknown certificate \"{}\"; known: {}", name, known),
                     ErrorCode::kInvalidArgument);
      }
    }
    const Inspection in = inspectCertificates(d_.fs, o_.inspect);
    std::vector<CertSpec> chosen;
    for (const CertSpec& spec : specs) {
      const bool named = std::find(o_.names.begin(), o_.names.end(), spec.name) != o_.names.end();
      if (!o_.names.empty() && !named) continue;
      const auto st = std::find_if(in.certificates.begin(), in.certificates.end(),
                                   [&](const CertState& s) { return s.name == spec.name; });
      if (st == in.certificates.end()) continue;
      const bool inside_ttl = o_.force || st->left < o_.inspect.ttl;
      if (st->missing) {
        say(fmt::format("missing certificate {} ({}); skipped", spec.name, st->file));
        if (named) notRenewed(spec.name, "missing (" + st->file + ")");
        continue;
      }
      if (!st->problem.empty()) {
        if (named) return Error(st->problem, ErrorCode::kUnknown);
        say(fmt::format("cannot renew {}: {}", spec.name, st->problem));
        notRenewed(spec.name, st->problem);
        continue;
      }
      if (st->external_ca) {
        say(fmt::format("{} is signed by an external CA ({}); left alone", spec.name,
                        spec.ca_key_path));
        if (named) notRenewed(spec.name, "signed by an external CA (" + spec.ca_key_path + ")");
        continue;
      }
      // Its CA expires first: a renewal gains nothing, so ekco does not choose it; a person who
      // names it gets it renewed (a new key, say), told that.
      const bool capped = !st->not_renewable.empty();
      if (capped && !named && inside_ttl) {
        say(fmt::format("{} is not renewed: {}", spec.name, st->not_renewable));
        notRenewed(spec.name, st->not_renewable);
        continue;
      }
      if (!o_.force && !st->due && !(capped && named && inside_ttl)) {
        say(fmt::format("{} has {} until expiration, more than rotate_certs_ttl; skipped",
                        spec.name, base::formatDuration(st->left)));
        continue;
      }
      if (capped)
        say(fmt::format("{} is renewed as named, though {}", spec.name, st->not_renewable));
      chosen.push_back(spec);
    }
    return chosen;
  }

  base::Status restart(const std::set<std::string>& components, const std::string& stamp) {
    for (const std::string& c : components) {
      const std::string path = manifestPath(o_, c);
      auto text = d_.fs.read(path);
      if (!text) return std::move(text).error().wrap("restart " + c);
      auto annotated = annotateManifest(*text, kCertsRenewedAnnotation, stamp, path);
      if (!annotated) return std::move(annotated).error();
      auto info = d_.fs.stat(path);
      EKCO_TRY(d_.fs.write(path, *annotated, {.mode = info ? info->mode : 0600}));
      say("restarting static pod " + c);
    }
    return base::ok();
  }

  // Polls until every check passes; the first failing check's reason at the deadline.
  base::Status verify(const std::set<std::string>& components, const std::string& stamp) {
    const base::MonoTime deadline = d_.clock.monoNow() + o_.verify_timeout;
    std::string why;
    while (true) {
      why = firstUnverified(components, stamp);
      if (why.empty()) return base::ok();
      if (d_.clock.monoNow() + o_.poll > deadline) break;
      std::this_thread::sleep_for(o_.poll);
    }
    return Error(
        fmt::format("not verified within {}: {}", base::formatDuration(o_.verify_timeout), why),
        ErrorCode::kTimeout);
  }

  std::string firstUnverified(const std::set<std::string>& components, const std::string& stamp) {
    for (const std::string& c : components) {
      const std::string pod = c + "-" + o_.node_name;
      auto got = d_.kube.get(kube::resources::kPods, "kube-system", pod);
      if (!got) return fmt::format("mirror pod kube-system/{}: {}", pod, got.error().message());
      if (!podReadyWith(*got, stamp)) {
        return fmt::format("mirror pod kube-system/{} is not yet Ready with {}={}", pod,
                           kCertsRenewedAnnotation, stamp);
      }
    }
    for (const RenewedCert& r : report_.renewed) {
      std::optional<Endpoint> at;
      if (r.name == "apiserver") {
        auto m = d_.fs.read(manifestPath(o_, "kube-apiserver"));
        at = apiserverEndpoint(m ? *m : "");
      } else if (r.name == "etcd-server") {
        auto m = d_.fs.read(manifestPath(o_, "etcd"));
        at = etcdEndpoint(m ? *m : "");
      }
      if (!at) continue;
      auto presented = d_.probe(at->host, at->port);
      if (!presented) return presented.error().message();
      if (presented->serial != r.serial_after) {
        return fmt::format("{}:{} still presents serial {} (the new {} has {})", at->host, at->port,
                           presented->serial, r.name, r.serial_after);
      }
    }
    return "";
  }

  base::Status renewRestartVerify(const std::vector<CertSpec>& chosen) {
    // 5.
    for (const CertSpec& spec : chosen) {
      auto renewed = renewOne(d_.fs, spec, o_.inspect, o_.alt_names ? &*o_.alt_names : nullptr);
      if (!renewed) {
        // Those renewed before it stay renewed (each is whole); they still need their restarts.
        base::logWarn("certificates: renewal failed",
                      {{"certificate", spec.name}, {"error", renewed.error().message()}});
        if (report_.renewed.empty()) return std::move(renewed).error();
        say("renewal of " + spec.name + " failed: " + renewed.error().message());
        break;
      }
      if (o_.alt_names) {
        const std::string names = fmt::format("{}", fmt::join(altNames(renewed->after), ", "));
        say(fmt::format("re-issued {} with the names {} (were {}), valid until {}, backup in {}",
                        spec.name, names, fmt::join(altNames(renewed->before), ", "),
                        kube::formatRfc3339(renewed->after.not_after), renewed->backup_dir));
        event("CertificateReissued",
              fmt::format("Re-issued {} on {} with the names {}", spec.name, o_.node_name, names),
              "Normal");
      } else {
        say(fmt::format("renewed {}: valid until {} (was {}), backup in {}", spec.name,
                        kube::formatRfc3339(renewed->after.not_after),
                        kube::formatRfc3339(renewed->before.not_after), renewed->backup_dir));
        event("CertificateRenewed",
              fmt::format("Renewed {} on {}: valid until {}", spec.name, o_.node_name,
                          kube::formatRfc3339(renewed->after.not_after)),
              "Normal");
      }
      report_.renewed.push_back(std::move(*renewed));
    }
    std::set<std::string> needed;
    for (const RenewedCert& r : report_.renewed) {
      for (const CertSpec& s : chosen) {
        if (s.name == r.name) needed.insert(s.restart.begin(), s.restart.end());
      }
    }
    // 6.
    const std::string stamp = kube::formatRfc3339(d_.clock.wallNow());
    EKCO_TRY(restart(needed, stamp));
    report_.restarted.assign(needed.begin(), needed.end());
    // 7.
    auto verified = verify(needed, stamp);
    if (verified) {
      say("verified: the restarted components are Ready and the servers present the new "
          "certificates");
      return base::ok();
    }
    // 8.
    base::logError("certificates: verification failed, restoring the previous certificates",
                   {{"error", verified.error().message()}});
    for (const RenewedCert& r : report_.renewed) {
      for (const CertSpec& s : chosen) {
        if (s.name != r.name) continue;
        if (auto restored = restoreFromBackup(d_.fs, s, r.backup_dir); !restored) {
          return std::move(restored).error().wrap(
              "verification failed (" + verified.error().message() + ") and restoring " + s.name);
        }
      }
    }
    const std::string again = kube::formatRfc3339(d_.clock.wallNow() + std::chrono::seconds(1));
    EKCO_TRY(restart(needed, again));
    event("CertificateRenewalFailed",
          "Renewal on " + o_.node_name + " not verified (" + verified.error().message() +
              "); the previous certificates were restored",
          "Warning");
    return Error("verification failed: " + verified.error().message() +
                     "; the previous certificates were restored from their backups",
                 ErrorCode::kUnavailable);
  }

  void event(const std::string& reason, const std::string& message, const std::string& type) {
    if (o_.node_name.empty()) return;
    auto recorded = d_.kube.recordEvent({.involved_resource = kube::resources::kNodes,
                                         .involved_name = o_.node_name,
                                         .reason = reason,
                                         .message = message,
                                         .type = type});
    if (!recorded) base::logWarn("event not recorded", {{"error", recorded.error().message()}});
  }

  const CertRenewalOptions& o_;
  const CertRenewalDeps& d_;
  CertRenewalReport report_;
};

}  // namespace

Endpoint apiserverEndpoint(std::string_view manifest) {
  Endpoint e{.host = "127.0.0.1", .port = 6443};
  if (auto pod = loadYaml(manifest)) {
    if (auto a = flagValue(*pod, "advertise-address")) e.host = probeHost(*a);
    if (auto p = flagValue(*pod, "secure-port")) {
      if (auto port = parsePort(*p)) e.port = *port;
    }
  }
  return e;
}

Endpoint etcdEndpoint(std::string_view manifest) {
  Endpoint e{.host = "127.0.0.1", .port = 2379};
  auto pod = loadYaml(manifest);
  if (!pod) return e;
  auto urls = flagValue(*pod, "listen-client-urls");
  if (!urls) return e;
  std::string_view rest = *urls;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view url = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (!url.starts_with("https://")) continue;
    url.remove_prefix(8);
    url = url.substr(0, url.find('/'));
    const std::size_t colon = url.rfind(':');
    if (colon == std::string_view::npos) continue;
    auto port = parsePort(url.substr(colon + 1));
    if (!port) continue;
    return Endpoint{.host = probeHost(std::string(url.substr(0, colon))), .port = *port};
  }
  return e;
}

Result<std::string> annotateManifest(std::string_view manifest, std::string_view key,
                                     std::string_view value, std::string_view source) {
  auto pod = loadYaml(manifest);
  if (!pod || !(*pod)["metadata"].IsMap() || !(*pod)["spec"].IsMap()) {
    return Error(fmt::format("{}: not a static pod manifest (no metadata and spec)", source),
                 ErrorCode::kParse);
  }
  YAML::Node metadata = (*pod)["metadata"];
  if (!metadata["annotations"] || !metadata["annotations"].IsMap()) {
    metadata["annotations"] = YAML::Node(YAML::NodeType::Map);
  }
  metadata["annotations"][std::string(key)] = std::string(value);
  YAML::Emitter out;
  out << *pod;
  if (!out.good()) {
    return Error(fmt::format("{}: cannot write the manifest: {}", source, out.GetLastError()),
                 ErrorCode::kParse);
  }
  return std::string(out.c_str()) + "\n";
}

Result<CertRenewalReport> runCertRenewal(const CertRenewalOptions& options,
                                         const CertRenewalDeps& deps) {
  return Run(options, deps).run();
}

}  // namespace ekco::agent
