#include "agent/features/certs/certs.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "base/ip_address.h"
#include "base/log/log.h"
#include "kube/decode/timestamp.h"
#include "kube/transport/kubeconfig.h"
#include "pki/renew.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

std::string join(std::string_view dir, std::string_view name) {
  std::string out(dir);
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out + "/" + std::string(name);
}

std::string backupRoot(const InspectOptions& o) { return join(o.certificates_dir, kCertBackupDir); }

// File names inside a backup directory: flat, from the certificate's name.
std::string backupCertName(const CertSpec& s) {
  return s.in_kubeconfig() ? s.name : s.name + ".crt";
}
std::string backupKeyName(const CertSpec& s) { return s.name + ".key"; }
std::string journalName(const CertSpec& s) { return std::string(kCertJournalFile) + "." + s.name; }

// The pair as it is on disk now (for a kubeconfig: decoded from it).
struct OnDisk {
  std::string file_text{};  // the .crt, or the whole kubeconfig
  std::string key_text{};   // the .key ("" for a kubeconfig)
  std::string cert_pem{};
  std::string key_pem{};
  EmbeddedPair embedded{};
};

Result<OnDisk> readPair(const hostfs::HostFs& fs, const CertSpec& spec) {
  OnDisk d;
  auto text = fs.read(spec.cert_path);
  if (!text) return std::move(text).error();
  d.file_text = std::move(*text);
  if (spec.in_kubeconfig()) {
    auto pair = readEmbeddedPair(d.file_text, spec.cert_path);
    if (!pair) return std::move(pair).error();
    d.cert_pem = pair->cert_pem;
    d.key_pem = pair->key_pem;
    d.embedded = std::move(*pair);
  } else {
    auto key = fs.read(spec.key_path);
    if (!key) return std::move(key).error();
    d.key_text = std::move(*key);
    d.cert_pem = d.file_text;
    d.key_pem = d.key_text;
  }
  return d;
}

// Replaces the one occurrence of `from` (a base64 field's value) in `text`.
Result<std::string> replaceField(std::string text, const std::string& from, const std::string& to,
                                 std::string_view source) {
  const std::size_t at = text.find(from);
  if (from.empty() || at == std::string::npos || text.find(from, at + 1) != std::string::npos) {
    return Error(fmt::format("{}: cannot locate the embedded certificate data to replace", source),
                 ErrorCode::kParse);
  }
  text.replace(at, from.size(), to);
  return text;
}

std::optional<std::string> scalar(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  if (!v || !v.IsScalar()) return std::nullopt;
  return v.Scalar();
}

}  // namespace

std::vector<CertSpec> kubeadmCertificates(std::string_view pki, std::string_view k8s) {
  const auto ca = [&](std::string_view name) {
    const std::string base = name == "etcd-ca" ? join(pki, "etcd/ca") : join(pki, name);
    return std::pair{base + ".crt", base + ".key"};
  };
  const auto file = [&](std::string name, std::string_view rel, std::string_view ca_name,
                        std::vector<std::string> restart) {
    auto [ca_crt, ca_key] = ca(ca_name);
    return CertSpec{.name = std::move(name),
                    .cert_path = join(pki, rel) + ".crt",
                    .key_path = join(pki, rel) + ".key",
                    .ca = std::string(ca_name),
                    .ca_cert_path = ca_crt,
                    .ca_key_path = ca_key,
                    .restart = std::move(restart)};
  };
  const auto conf = [&](std::string name, std::vector<std::string> restart) {
    auto [ca_crt, ca_key] = ca("ca");
    return CertSpec{.name = name,
                    .cert_path = join(k8s, name),
                    .key_path = "",
                    .ca = "ca",
                    .ca_cert_path = ca_crt,
                    .ca_key_path = ca_key,
                    .restart = std::move(restart)};
  };
  // EKCO's restart mapping (ekco.md §3.6): the serving certificates of the apiserver and etcd
  // are reloaded from disk by the components themselves.
  return {
      conf("admin.conf", {}),
      file("apiserver", "apiserver", "ca", {}),
      file("apiserver-etcd-client", "apiserver-etcd-client", "etcd-ca", {"kube-apiserver"}),
      file("apiserver-kubelet-client", "apiserver-kubelet-client", "ca", {"kube-apiserver"}),
      conf("controller-manager.conf", {"kube-controller-manager"}),
      file("etcd-healthcheck-client", "etcd/healthcheck-client", "etcd-ca", {}),
      file("etcd-peer", "etcd/peer", "etcd-ca", {}),
      file("etcd-server", "etcd/server", "etcd-ca", {}),
      file("front-proxy-client", "front-proxy-client", "front-proxy-ca", {"kube-apiserver"}),
      conf("scheduler.conf", {"kube-scheduler"}),
      conf("super-admin.conf", {}),
  };
}

std::vector<CaSpec> kubeadmCas(std::string_view pki) {
  return {{"ca", join(pki, "ca.crt"), join(pki, "ca.key")},
          {"etcd-ca", join(pki, "etcd/ca.crt"), join(pki, "etcd/ca.key")},
          {"front-proxy-ca", join(pki, "front-proxy-ca.crt"), join(pki, "front-proxy-ca.key")}};
}

Result<EmbeddedPair> readEmbeddedPair(std::string_view kubeconfig, std::string_view source) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(kubeconfig));
  } catch (const YAML::Exception& e) {
    return Error(fmt::format("{}: not YAML: {}", source, e.msg), ErrorCode::kParse);
  }
  if (!doc.IsMap() || !doc["users"] || !doc["users"].IsSequence()) {
    return Error(fmt::format("{}: no users", source), ErrorCode::kParse);
  }
  // The user of the current context; a kubeadm file has exactly one.
  std::string user_name;
  if (auto current = scalar(doc, "current-context"); current && doc["contexts"].IsSequence()) {
    for (const YAML::Node& c : doc["contexts"]) {
      if (scalar(c, "name") == current && c["context"].IsMap()) {
        user_name = scalar(c["context"], "user").value_or("");
      }
    }
  }
  const YAML::Node users = doc["users"];
  YAML::Node user;
  for (const YAML::Node& u : users) {
    if ((user_name.empty() && users.size() == 1) || scalar(u, "name") == user_name) user = u;
  }
  if (!user || !user["user"].IsMap()) {
    return Error(fmt::format("{}: no user for the current context", source), ErrorCode::kParse);
  }
  EmbeddedPair pair;
  for (auto [field, data, pem] :
       {std::tuple{"client-certificate-data", &pair.cert_data, &pair.cert_pem},
        std::tuple{"client-key-data", &pair.key_data, &pair.key_pem}}) {
    auto value = scalar(user["user"], field);
    if (!value || value->empty()) {
      return Error(fmt::format("{}: the user has no embedded {}", source, field),
                   ErrorCode::kParse);
    }
    auto decoded = kube::base64Decode(*value);
    if (!decoded) {
      return Error(fmt::format("{}: {} is not valid base64", source, field), ErrorCode::kParse);
    }
    *data = *value;
    *pem = std::move(*decoded);
  }
  return pair;
}

namespace {

// Why renewing `s` would gain nothing ("" when it would): a renewed certificate never outlives
// its CA, so when the CA expires before the certificate or within a day after it, a renewal
// would only repeat at every check. The CA must be renewed first (ekco never renews a CA).
std::string notRenewable(const CertState& s, const Inspection& in) {
  for (const CertState& ca : in.authorities) {
    if (ca.name != s.ca || !ca.cert) continue;
    if (ca.cert->not_after - s.cert->not_after > std::chrono::hours(24)) return "";
    return fmt::format(
        "its CA {} expires {}, and a renewed certificate cannot outlive it: renew the CA with "
        "kubeadm (and redistribute it), then ekco renews this one",
        ca.name, kube::formatRfc3339(ca.cert->not_after));
  }
  return "";
}

}  // namespace

Inspection inspectCertificates(const hostfs::HostFs& fs, const InspectOptions& o) {
  Inspection out;
  const auto remaining = [&](const pki::Certificate& c) {
    return std::chrono::duration_cast<std::chrono::seconds>(c.not_after - o.now);
  };
  const auto keyPresent = [&](const std::string& path) {
    auto e = fs.exists(path);
    return e && *e;
  };
  for (const CaSpec& ca : kubeadmCas(o.certificates_dir)) {
    CertState s{.name = ca.name, .file = ca.cert_path};
    auto text = fs.read(ca.cert_path);
    if (!text) {
      s.missing = text.error().code() == ErrorCode::kNotFound;
      if (!s.missing) s.problem = text.error().message();
    } else if (auto cert = pki::parseCertificate(*text, ca.cert_path); !cert) {
      s.problem = cert.error().message();
    } else {
      s.cert = std::move(*cert);
      s.left = remaining(*s.cert);
      s.external_ca = !keyPresent(ca.key_path);
    }
    out.authorities.push_back(std::move(s));
  }
  for (const CertSpec& spec : kubeadmCertificates(o.certificates_dir, o.kubernetes_dir)) {
    CertState s{.name = spec.name, .file = spec.cert_path, .ca = spec.ca};
    auto exists = fs.exists(spec.cert_path);
    if (exists && !*exists) {
      s.missing = true;
      out.certificates.push_back(std::move(s));
      continue;
    }
    auto pair = readPair(fs, spec);
    if (!pair) {
      s.problem = pair.error().message();
    } else if (auto cert = pki::parseCertificate(pair->cert_pem, spec.cert_path); !cert) {
      s.problem = cert.error().message();
    } else {
      s.cert = std::move(*cert);
      s.left = remaining(*s.cert);
      if (auto match = pki::checkKeyMatches(pair->cert_pem, pair->key_pem,
                                            spec.in_kubeconfig() ? spec.cert_path : spec.key_path);
          !match) {
        s.problem = match.error().message();
      }
    }
    s.external_ca = !keyPresent(spec.ca_key_path);
    if (s.cert && s.problem.empty() && !s.external_ca) s.not_renewable = notRenewable(s, out);
    s.due =
        s.cert && s.problem.empty() && !s.external_ca && s.not_renewable.empty() && s.left < o.ttl;
    out.certificates.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> altNames(const pki::Certificate& cert) {
  std::vector<std::string> out = cert.dns_names;
  out.insert(out.end(), cert.ip_addresses.begin(), cert.ip_addresses.end());
  return out;
}

std::vector<std::string> changedAltNames(const pki::Certificate& cert,
                                         const AltNameChange& change) {
  const auto dropped = [&](const std::string& n) {
    return std::find(change.drop.begin(), change.drop.end(), n) != change.drop.end();
  };
  std::vector<std::string> dns;
  std::vector<std::string> ips;
  for (const std::string& n : cert.dns_names) {
    if (!dropped(n)) dns.push_back(n);
  }
  for (const std::string& n : cert.ip_addresses) {
    if (!dropped(n)) ips.push_back(n);
  }
  for (const std::string& n : change.add) {
    std::vector<std::string>& list = base::parseIpAddress(n) ? ips : dns;
    if (std::find(list.begin(), list.end(), n) == list.end()) list.push_back(n);
  }
  dns.insert(dns.end(), ips.begin(), ips.end());
  return dns;
}

Result<RenewedCert> renewOne(hostfs::HostFs& fs, const CertSpec& spec, const InspectOptions& o,
                             const AltNameChange* change) {
  // 1. Everything read and the new pair made before anything is written.
  auto old = readPair(fs, spec);
  if (!old) return std::move(old).error();
  auto before = pki::parseCertificate(old->cert_pem, spec.cert_path);
  if (!before) return std::move(before).error();
  EKCO_TRY(pki::checkKeyMatches(old->cert_pem, old->key_pem,
                                spec.in_kubeconfig() ? spec.cert_path : spec.key_path));
  auto ca_key_present = fs.exists(spec.ca_key_path);
  if (!ca_key_present) return std::move(ca_key_present).error();
  if (!*ca_key_present) {
    return Error(fmt::format("{}: signed by an external CA ({} is not on this host); renew it "
                             "with that CA",
                             spec.cert_path, spec.ca_key_path),
                 ErrorCode::kInvalidArgument);
  }
  auto ca_cert = fs.read(spec.ca_cert_path);
  if (!ca_cert) return std::move(ca_cert).error();
  auto ca_key = fs.read(spec.ca_key_path);
  if (!ca_key) return std::move(ca_key).error();
  auto made = pki::renewCertificate(
      {.cert_pem = old->cert_pem,
       .ca_cert_pem = *ca_cert,
       .ca_key_pem = *ca_key,
       .now = o.now,
       .key_encoding = pki::keyEncodingOf(old->key_pem),
       .source = spec.cert_path,
       .alt_names = change ? std::optional(changedAltNames(*before, *change)) : std::nullopt,
       .not_after = change ? std::optional(before->not_after) : std::nullopt});
  if (!made) return std::move(made).error();
  auto after = pki::parseCertificate(made->cert_pem, spec.cert_path);
  if (!after) return std::move(after).error();
  std::string new_file_text;
  if (spec.in_kubeconfig()) {
    auto replaced = replaceField(old->file_text, old->embedded.cert_data,
                                 pki::base64Encode(made->cert_pem), spec.cert_path);
    if (!replaced) return std::move(replaced).error();
    auto both = replaceField(std::move(*replaced), old->embedded.key_data,
                             pki::base64Encode(made->key_pem), spec.cert_path);
    if (!both) return std::move(both).error();
    new_file_text = std::move(*both);
  }

  // 2. The backup, with the journal last.
  // "20261126T011500Z": sortable, one directory per renewal run.
  const std::string dir = join(backupRoot(o), kube::formatCompactUtc(o.now));
  EKCO_TRY(fs.makeDirs(dir, 0700));
  const hostfs::WriteOptions secret{.mode = 0600};
  EKCO_TRY(fs.write(join(dir, backupCertName(spec)), old->file_text, secret));
  if (!spec.in_kubeconfig())
    EKCO_TRY(fs.write(join(dir, backupKeyName(spec)), old->key_text, secret));
  EKCO_TRY(fs.write(join(dir, journalName(spec)), spec.name + "\n", secret));

  // 3. The new files: the key first, so a crash in between leaves a pair that does not match,
  // which the repair restores.
  auto mode_of = [&](const std::string& path, std::uint32_t fallback) {
    auto info = fs.stat(path);
    return info ? info->mode : fallback;
  };
  if (spec.in_kubeconfig()) {
    EKCO_TRY(fs.write(spec.cert_path, new_file_text, {.mode = mode_of(spec.cert_path, 0600)}));
  } else {
    EKCO_TRY(fs.write(spec.key_path, made->key_pem, {.mode = 0600}));
    EKCO_TRY(fs.write(spec.cert_path, made->cert_pem, {.mode = mode_of(spec.cert_path, 0644)}));
  }

  // 4. Done: the journal goes; old backups beyond the last kKeptBackups go too.
  EKCO_TRY(fs.remove(join(dir, journalName(spec))));
  if (auto entries = fs.list(backupRoot(o)); entries && entries->size() > kKeptBackups) {
    for (std::size_t i = 0; i + kKeptBackups < entries->size(); ++i) {
      const std::string old_dir = join(backupRoot(o), (*entries)[i]);
      auto files = fs.list(old_dir);
      if (!files) continue;
      // A directory with a journal is an interrupted renewal's: kept for the repair.
      if (std::any_of(files->begin(), files->end(),
                      [](const std::string& f) { return f.starts_with(kCertJournalFile); })) {
        continue;
      }
      for (const std::string& f : *files) (void)fs.remove(join(old_dir, f));
      if (auto removed = fs.removeEmptyDir(old_dir); !removed) {
        base::logWarn("cannot prune a certificate backup", {{"error", removed.error().message()}});
      }
    }
  }
  return RenewedCert{.name = spec.name,
                     .backup_dir = dir,
                     .before = std::move(*before),
                     .after = *after,
                     .serial_after = after->serial};
}

namespace {

// The old pair written back, without the journal (the caller holds it).
base::Status writeBackup(hostfs::HostFs& fs, const CertSpec& spec, std::string_view backup_dir) {
  auto cert = fs.read(join(backup_dir, backupCertName(spec)));
  if (!cert) return std::move(cert).error().wrap("restore " + spec.name);
  if (spec.in_kubeconfig()) {
    auto info = fs.stat(spec.cert_path);
    EKCO_TRY(fs.write(spec.cert_path, *cert, {.mode = info ? info->mode : 0600}));
    return base::ok();
  }
  auto key = fs.read(join(backup_dir, backupKeyName(spec)));
  if (!key) return std::move(key).error().wrap("restore " + spec.name);
  // The certificate first: between the two writes the pair does not match, as during a renewal.
  EKCO_TRY(fs.write(spec.cert_path, *cert, {.mode = 0644}));
  EKCO_TRY(fs.write(spec.key_path, *key, {.mode = 0600}));
  return base::ok();
}

constexpr std::string_view kRestoreJournal = "restore\n";

}  // namespace

base::Status restoreFromBackup(hostfs::HostFs& fs, const CertSpec& spec,
                               std::string_view backup_dir) {
  // Journaled: a crash between the two writes leaves a journal saying "restore", and the repair
  // finishes the restore (the renewal's own journal is gone by now).
  const std::string journal = join(backup_dir, journalName(spec));
  EKCO_TRY(fs.write(journal, std::string(kRestoreJournal), {.mode = 0600}));
  EKCO_TRY(writeBackup(fs, spec, backup_dir));
  EKCO_TRY(fs.remove(journal));
  return base::ok();
}

Result<std::vector<InterruptedRenewal>> findInterruptedRenewals(const hostfs::HostFs& fs,
                                                                const InspectOptions& o) {
  std::vector<InterruptedRenewal> found;
  auto dirs = fs.list(backupRoot(o));
  if (!dirs) {
    if (dirs.error().code() == ErrorCode::kNotFound) return found;
    return std::move(dirs).error();
  }
  const std::vector<CertSpec> specs = kubeadmCertificates(o.certificates_dir, o.kubernetes_dir);
  for (const std::string& d : *dirs) {
    const std::string dir = join(backupRoot(o), d);
    auto files = fs.list(dir);
    if (!files) continue;
    for (const CertSpec& spec : specs) {
      if (std::find(files->begin(), files->end(), journalName(spec)) == files->end()) continue;
      InterruptedRenewal r{.name = spec.name, .backup_dir = dir};
      auto journal = fs.read(join(dir, journalName(spec)));
      if (journal && *journal == kRestoreJournal) {
        r.restore = true;
        r.why = "a restore from its backup was under way";
      } else {
        auto now = readPair(fs, spec);
        const bool consistent =
            now && pki::checkKeyMatches(now->cert_pem, now->key_pem, spec.cert_path);
        r.restore = !consistent;
        r.why = consistent ? "the new pair is complete" : "its key does not match it";
      }
      found.push_back(std::move(r));
    }
  }
  return found;
}

Result<std::vector<std::string>> repairInterruptedRenewals(hostfs::HostFs& fs,
                                                           const InspectOptions& o) {
  auto found = findInterruptedRenewals(fs, o);
  if (!found) return std::move(found).error();
  const std::vector<CertSpec> specs = kubeadmCertificates(o.certificates_dir, o.kubernetes_dir);
  std::vector<std::string> restored;
  for (const InterruptedRenewal& r : *found) {
    const auto spec = std::find_if(specs.begin(), specs.end(),
                                   [&](const CertSpec& s) { return s.name == r.name; });
    if (spec == specs.end()) continue;
    if (r.restore) {
      EKCO_TRY(writeBackup(fs, *spec, r.backup_dir));
      restored.push_back(r.name);
      base::logWarn("certificates: restored an interrupted renewal from its backup",
                    {{"certificate", r.name}, {"backup", r.backup_dir}, {"why", r.why}});
    }
    EKCO_TRY(fs.remove(join(r.backup_dir, journalName(*spec))));
  }
  return restored;
}

}  // namespace ekco::agent
