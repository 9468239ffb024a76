// A renewal run on one control-plane node (`ekco certs renew`, and the certificates controller):
// which certificates, under the disruption Lease, the static pods restarted, and the result
// verified before it counts; a failed verification restores the previous certificates.
//
// Order:
//   1. Repair what an interrupted run left (agent/features/certs/certs.h).
//   2. Inspect; choose: the named certificates (an unknown name is an error), else every one
//      inside the TTL; --force takes them whatever their expiry. Missing ones, external CAs and
//      unreadable ones are reported and skipped (an unreadable named one is an error).
//   3. Dry run: say what would be renewed and restarted; stop.
//   4. Take the Lease `ekco-disruption` (agent/policy/disruption_lease.h), waiting up to
//      lease_wait while another primary holds it. An API that cannot be reached (unavailable,
//      timed out) is not a reason to leave certificates to expire: the run goes on without the
//      Lease and says so. Any other refusal (RBAC, no such namespace) stops the run.
//   5. Renew each (backup, atomic writes), one Event per certificate on the Node.
//   6. Restart the static pods EKCO's mapping names: the manifest in manifests_dir gets the
//      annotation ekco.kurl.sh/certificates-renewed-at=<stamp>, so its content (and with it the
//      static pod's hash) changes and kubelet replaces the pod (EKCO's move-out-and-back could
//      be missed by kubelet's polling).
//   7. Verify: each restarted component's mirror pod (<component>-<node> in kube-system) carries
//      that stamp and is Ready; a renewed apiserver or etcd serving certificate is the one the
//      server presents in a TLS handshake (the addresses in their manifests, else 127.0.0.1:6443
//      and 127.0.0.1:2379). All within verify_timeout.
//   8. A failed verification restores every certificate of this run from its backup, restarts
//      the same pods again and is an error that says so.
//   9. Release the Lease.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/features/certs/certs.h"
#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"
#include "pki/certificate.h"

namespace ekco::agent {

inline constexpr std::string_view kCertsRenewedAnnotation = "ekco.kurl.sh/certificates-renewed-at";
inline constexpr std::string_view kDefaultManifestsDir = "/etc/kubernetes/manifests";

struct CertRenewalOptions {
  InspectOptions inspect{};
  std::string manifests_dir = std::string(kDefaultManifestsDir);
  std::vector<std::string> names{};  // empty: every certificate inside the TTL
  // A re-issue with other names instead of a renewal (`ekco regen-cert`: names = {apiserver},
  // force): each chosen certificate keeps its expiry; the Event is CertificateReissued.
  std::optional<AltNameChange> alt_names{};
  bool force = false;
  bool dry_run = false;
  std::string node_name{};
  std::string lease_namespace = "kurl";
  std::chrono::milliseconds lease_wait{std::chrono::minutes(5)};
  std::chrono::milliseconds verify_timeout{std::chrono::minutes(3)};
  std::chrono::milliseconds poll{std::chrono::seconds(2)};
};

struct CertRenewalDeps {
  hostfs::HostFs& fs;
  kube::KubeClient& kube;
  const base::Clock& clock;
  // The certificate a TLS server presents (pki/probe.h's presentedCertificate in production).
  std::function<base::Result<pki::Certificate>(const std::string& host, int port)> probe;
  // Sleeps between tries for the Lease; false when the caller is stopping, which ends the run
  // before anything is changed (kCancelled). Empty: a plain sleep. Verification, once the
  // certificates are written, is not cut short: it runs to verify_timeout.
  std::function<bool(std::chrono::milliseconds)> wait{};
};

struct CertRenewalReport {
  std::vector<RenewedCert> renewed{};
  std::vector<std::string> restarted{};  // static pods
  std::vector<std::string> lines{};      // for people: what was done or would be, in order
  // "<name>: <why>" for each certificate that should have been renewed and could not be: named,
  // or inside rotate_certs_ttl, or unreadable (a corrupt PEM may hide an expiry). `ekco certs
  // renew` exits 1 when there is any.
  std::vector<std::string> not_renewed{};
};

[[nodiscard]] base::Result<CertRenewalReport> runCertRenewal(const CertRenewalOptions& options,
                                                             const CertRenewalDeps& deps);

// host:port of a component's TLS endpoint read from its static pod manifest: kube-apiserver's
// --advertise-address and --secure-port, etcd's first https --listen-client-urls entry;
// the defaults when the manifest does not say.
struct Endpoint {
  std::string host{};
  int port = 0;
};
Endpoint apiserverEndpoint(std::string_view manifest_yaml);
Endpoint etcdEndpoint(std::string_view manifest_yaml);

// The manifest with metadata.annotations[key] = value (other content kept); kParse naming
// `source` when it is not a Pod manifest.
[[nodiscard]] base::Result<std::string> annotateManifest(std::string_view manifest_yaml,
                                                         std::string_view key,
                                                         std::string_view value,
                                                         std::string_view source);

}  // namespace ekco::agent
