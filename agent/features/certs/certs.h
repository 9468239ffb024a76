// The control-plane certificates of one node: what kubeadm manages under certificates_dir and
// the client certificates embedded in /etc/kubernetes/*.conf; their inspection (`ekco certs
// check`) and their renewal (`ekco certs renew`, the certificates controller).
//
// A renewal of one certificate, in order (each step's failure stops it; nothing later runs):
//   1. Read the pair and its CA pair; refuse an external CA (no CA key on the host) or a pair
//      whose key does not match its certificate; make the new pair (pki/renew.h).
//   2. Back up the old files to <certificates_dir>/.ekco-backup/<UTC timestamp>/ (0700; the
//      last kKeptBackups kept), with a `pending` journal holding the new pair's paths.
//   3. Write the key (0600), then the certificate (0644), each atomically (HostFs::write). A
//      kubeconfig holds both, so it is one atomic write.
//   4. Remove the journal. A run that finds a journal (ekco was killed between 2 and 4) first
//      repairs: a certificate whose key does not match it is restored from the backup with its
//      key, so the files are always the old pair or the new pair, never a mix. The agent's own
//      rotation repairs at its next check (control_plane_certs.h), `ekco certs renew` first.
// A restore from the backup (after a failed verification) is journaled the same way: the
// journal, saying "restore", is written again before the old pair and removed after it, so a
// crash in between is repaired by restoring, whatever the pair then is.
// Restarting the static pods and verifying the result are the caller's (certs_renewal.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "pki/certificate.h"

namespace ekco::agent {

inline constexpr std::string_view kDefaultKubernetesDir = "/etc/kubernetes";
inline constexpr std::string_view kCertBackupDir = ".ekco-backup";
inline constexpr std::string_view kCertJournalFile = "pending";
inline constexpr int kKeptBackups = 5;

// One certificate ekco manages, as host paths.
struct CertSpec {
  std::string name{};       // kubeadm's name: "apiserver", "etcd-server", "admin.conf"
  std::string cert_path{};  // the .crt, or the kubeconfig
  std::string key_path{};   // the .key; "" for a kubeconfig (the key is inside it)
  std::string ca{};         // "ca", "front-proxy-ca", "etcd-ca"
  std::string ca_cert_path{};
  std::string ca_key_path{};
  // The static pods (manifest names without .yaml) that must restart to load it (EKCO's
  // mapping); empty: the component reloads it from disk or nothing long-running uses it.
  std::vector<std::string> restart{};
  bool in_kubeconfig() const { return key_path.empty(); }
};

// kubeadm's certificates in `kubeadm certs check-expiration` order.
std::vector<CertSpec> kubeadmCertificates(std::string_view certificates_dir,
                                          std::string_view kubernetes_dir = kDefaultKubernetesDir);

// The CAs those certificates are signed by: name, cert path, key path.
struct CaSpec {
  std::string name{};  // "ca", "front-proxy-ca", "etcd-ca"
  std::string cert_path{};
  std::string key_path{};
};
std::vector<CaSpec> kubeadmCas(std::string_view certificates_dir);

// What was found of one certificate (or CA).
struct CertState {
  std::string name{};
  std::string file{};  // host path, for messages
  std::string ca{};    // "" for a CA
  std::optional<pki::Certificate> cert{};
  bool external_ca = false;  // the CA key is not on this host: ekco cannot renew it
  bool missing = false;      // no file: reported, never fatal (EKCO#250)
  std::string problem{};     // unreadable, key mismatch...: one line, names the file
  std::chrono::seconds left{0};
  // Why renewing it now would gain nothing, what to do instead: its CA expires first (a renewed
  // certificate never outlives its CA). "" when renewable. Said the same way by the Event, `ekco
  // status`, `ekco certs check` and `ekco certs renew`.
  std::string not_renewable{};
  // Would ekco renew it now: inside the TTL (or forced), readable, its CA key present, renewable.
  // Never true for a CA.
  bool due = false;
};

struct InspectOptions {
  std::string certificates_dir = "/etc/kubernetes/pki";
  std::string kubernetes_dir = std::string(kDefaultKubernetesDir);
  std::chrono::seconds ttl{std::chrono::hours(720)};
  base::WallTime now{};
};

struct Inspection {
  std::vector<CertState> certificates{};
  std::vector<CertState> authorities{};
};

// Reads every certificate and CA (never fails for one file; a problem is in its state).
Inspection inspectCertificates(const hostfs::HostFs& fs, const InspectOptions& options);

// The certificate of a kubeconfig's user (client-certificate-data) and its key
// (client-key-data), decoded; kParse naming `source` when either is absent or not base64.
struct EmbeddedPair {
  std::string cert_pem{};
  std::string key_pem{};
  std::string cert_data{};  // the base64 text as written in the file
  std::string key_data{};
};
[[nodiscard]] base::Result<EmbeddedPair> readEmbeddedPair(std::string_view kubeconfig,
                                                          std::string_view source);

struct RenewedCert {
  std::string name{};
  std::string backup_dir{};  // host path
  pki::Certificate before{};
  pki::Certificate after{};
  std::string serial_after{};
};

// A re-issue with other subjectAltNames (`ekco regen-cert`): names added and dropped (each
// canonical: pki::canonicalAltName); the subject, the other names, the usages, the key type and
// the expiry are kept.
struct AltNameChange {
  std::vector<std::string> add{};
  std::vector<std::string> drop{};
};
// The certificate's names after `change`: its DNS names less the dropped, then the added DNS
// names it lacks, then its IP addresses less the dropped, then the added ones it lacks.
std::vector<std::string> changedAltNames(const pki::Certificate& cert, const AltNameChange& change);
// Its names as they are, in that order.
std::vector<std::string> altNames(const pki::Certificate& cert);

// Renews one certificate (steps 1-4 above); with `change`, re-issues it with those names and its
// expiry. `now` stamps the backup directory and the new validity. Errors name the file; nothing
// is written before step 2, and a failure after it leaves the old pair (or, past step 3, the new
// pair) in place.
[[nodiscard]] base::Result<RenewedCert> renewOne(hostfs::HostFs& fs, const CertSpec& spec,
                                                 const InspectOptions& options,
                                                 const AltNameChange* change = nullptr);

// A journal left under <certificates_dir>/.ekco-backup by an interrupted renewal or restore.
struct InterruptedRenewal {
  std::string name{};        // the certificate
  std::string backup_dir{};  // where its journal and old pair are
  bool restore = false;      // the repair restores the old pair (else it only drops the journal)
  std::string why{};         // for people: "its key does not match it", "a restore was under way"
};

// Every journal, and what the repair would do with it; reads only.
[[nodiscard]] base::Result<std::vector<InterruptedRenewal>> findInterruptedRenewals(
    const hostfs::HostFs& fs, const InspectOptions& options);

// Step 4's repair, for every journal findInterruptedRenewals finds: a certificate that does not
// match its key, or whose restore was under way, is restored with its key from that backup; the
// journal goes. Returns the names restored.
[[nodiscard]] base::Result<std::vector<std::string>> repairInterruptedRenewals(
    hostfs::HostFs& fs, const InspectOptions& options);

// Restores `name`'s files from a backup directory (after a failed verification), journaled.
[[nodiscard]] base::Status restoreFromBackup(hostfs::HostFs& fs, const CertSpec& spec,
                                             std::string_view backup_dir);

}  // namespace ekco::agent
