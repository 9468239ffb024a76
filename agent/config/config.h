// ekco's configuration: EKCO's /etc/ekco/config.yaml, key for key, plus the keys for what the
// agent now owns on the host. Defaults are the documented product defaults (what kURL renders),
// not EKCO's binary flag defaults; ../shared/reference/ekco.md §2 lists both.
//
// Loading order: file, then environment (EKCO_<KEY>, and EKCO's bare LOG_LEVEL), then
// command-line flags; a later source overrides an earlier one. Loading is strict: every problem
// (unknown key, wrong type, bad duration, negative count, broken cross-key rule, malformed
// YAML) is collected as one ConfigProblem naming the key and where it came from, and the
// caller exits 2 without acting on a half-valid config.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/duration.h"
#include "base/result.h"

namespace ekco::agent {

using base::Duration;

struct Config {
  // --- Dead nodes (clear / purge) ---
  Duration node_unreachable_toleration = std::chrono::minutes(5);
  bool clear_dead_nodes = true;
  // A pod terminating on a dead node is force-deleted this long after its deletionTimestamp.
  Duration clear_pod_deletion_grace = std::chrono::seconds(30);
  // Clear and purge nothing while more than this share of the nodes is unreachable.
  int64_t storm_guard_percent = 55;
  bool purge_dead_nodes = false;
  int64_t min_ready_master_nodes = 2;
  int64_t min_ready_worker_nodes = 0;

  // --- Rook / Ceph ---
  bool maintain_rook_storage_nodes = false;
  std::string rook_storage_nodes_label;
  std::string rook_storage_nodes;
  bool reconcile_rook_mds_placement = true;
  bool reconcile_ceph_csi_resources = true;
  std::string ceph_block_pool = "replicapool";
  std::string ceph_filesystem = "rook-shared-fs";
  std::string ceph_object_store = "rook-ceph-store";
  int64_t min_ceph_pool_replication = 1;
  int64_t max_ceph_pool_replication = 3;
  // A lower host count lowers a pool's replication only once it has lasted longer than this.
  Duration ceph_pool_replication_hold_down = std::chrono::minutes(10);
  std::string rook_priority_class;
  int64_t rook_minimum_node_count = 0;
  std::string rook_storage_class = "distributed";
  std::string rook_ceph_image;

  // --- Loop ---
  Duration reconcile_interval = std::chrono::minutes(1);
  Duration reconcile_timeout = std::chrono::minutes(15);

  // --- Certificates ---
  std::string certificates_dir = "/etc/kubernetes/pki";
  bool rotate_certs = true;
  std::string rotate_certs_namespace = "kurl";
  Duration rotate_certs_check_interval = std::chrono::hours(24);
  Duration rotate_certs_ttl = std::chrono::hours(720);
  std::string registry_cert_namespace = "kurl";
  std::string registry_cert_secret = "registry-pki";
  std::string kurl_proxy_cert_namespace = "default";
  std::string kurl_proxy_cert_secret = "kotsadm-tls";
  std::string kotsadm_kubelet_cert_namespace = "default";
  std::string kotsadm_kubelet_cert_secret = "kubelet-client-cert";

  // --- Contour / Envoy ---
  std::string contour_namespace = "projectcontour";
  std::string contour_cert_secret = "contourcert";
  std::string envoy_cert_secret = "envoycert";
  bool restart_failed_envoy_pods = true;
  Duration envoy_pods_not_ready_duration = std::chrono::minutes(5);
  // Prometheus/Alertmanager replicas follow the node count (EKCO's ReconcilePrometheus, always
  // on there; agent/features/scaling/resource_scaling.h).
  bool auto_resource_scaling = true;

  // --- Internal load balancer ---
  bool enable_internal_load_balancer = false;
  std::string internal_load_balancer_haproxy_image = "haproxy:lts-alpine";
  // Where HAProxy listens. The default 127.0.0.1:6444 also gets [::1]:6444 when the node has
  // IPv6 loopback (EKCO listened on every interface).
  std::string internal_load_balancer_bind = "127.0.0.1:6444";

  // --- Admission, CSRs, MinIO, kotsadm, storage migration ---
  std::vector<std::string> pod_image_overrides;  // "original=overridden"
  // Where each agent serves the webhook (HTTPS, every address); the Service kurl/ekco maps port
  // 443 to it (agent/features/webhook/webhook_server.h).
  int64_t pod_image_overrides_port = 6445;
  // Pods in these namespaces are never sent to the webhook. Empty (the default): every pod of
  // every namespace, as EKCO did, so kube-proxy's and coredns' images can be overridden too.
  std::vector<std::string> pod_image_overrides_excluded_namespaces;
  // Who backs the Service kurl/ekco (agent/features/webhook/webhook_config.h): "pods" (the
  // DaemonSet's pods, by selector), "nodes" (the control-plane agents that answer the leader's
  // probe, listed in an EndpointSlice and Endpoints of a selector-less Service: agents from the
  // packages), or "auto": pods when the agent runs in a pod (KUBERNETES_SERVICE_HOST is set),
  // nodes otherwise.
  std::string pod_image_overrides_endpoints = "auto";
  bool auto_approve_kubelet_csrs = true;
  // When set, a kubelet serving CSR is approved only if every IP SAN is inside one of these
  // prefixes ("10.0.0.0/16"; agent/features/csr_approval/kubelet_csr_rules.h, rule ip-prefixes).
  // Empty: every IP that passes the other rules.
  std::vector<std::string> kubelet_csr_allowed_ip_prefixes;
  bool enable_ha_minio = false;
  std::string minio_namespace = "minio";
  std::string minio_util_image;
  bool enable_ha_kotsadm = false;
  std::string storage_migration_auth_token;

  // --- Host-side keys (new in ekco; kURL's host options) ---
  bool disable_reboot_service = false;
  // HostJobs (hostjobs.ekco.kurl.sh): run commands as root on selected nodes
  // (agent/features/host_jobs/host_jobs.h). Off: the agent does not even watch them.
  bool enable_host_jobs = false;
  // `ekco shutdown` / `ekco startup` (ekco-reboot.service).
  std::vector<std::string> shutdown_excluded_namespaces = {"kube-system", "rook-ceph", "openebs",
                                                           "longhorn-system"};
  Duration shutdown_unmount_timeout = std::chrono::minutes(5);
  // The leader taints a node that went down through `ekco shutdown` (its beacon) with
  // node.kubernetes.io/out-of-service once Ready is not True and its heartbeat Lease has not been
  // renewed for the grace (agent/features/reboot/node_recovery.h).
  bool shutdown_out_of_service = true;
  Duration shutdown_out_of_service_grace = std::chrono::seconds(15);
  Duration startup_api_timeout = std::chrono::minutes(10);
  std::string auto_upgrade_schedule;  // systemd calendar event; empty = off
  std::string auto_upgrade_url;
  // Accept a plain http:// auto_upgrade_url (an installer mirror without TLS). Off: https only.
  bool auto_upgrade_allow_http = false;
  std::string leader_election_namespace = "kurl";
  // false: this agent never leads (it only reads the Lease, to show who leads) and runs only the
  // every-node controllers that need no cluster-wide permissions: the worker DaemonSet's agents,
  // whose ServiceAccount ekco-node holds none (deploy/10-rbac-node.yaml).
  bool leader_election_candidate = true;
  // client-go's defaults; lease > renew deadline > retry period.
  Duration leader_election_lease_duration = std::chrono::seconds(15);
  Duration leader_election_renew_deadline = std::chrono::seconds(10);
  Duration leader_election_retry_period = std::chrono::seconds(2);
  std::string health_socket = "/run/ekco/ekco.sock";
  // GET /metrics over plain HTTP on this TCP address ("IPv4:PORT" or "[IPv6]:PORT"), for
  // Prometheus; "" = the health socket only.
  std::string metrics_address;
  std::string log_level = "info";
};

// Where a problem (or a value) came from: "config.yaml:12", "environment EKCO_X", "flag --x".
struct ConfigProblem {
  std::string source;
  std::string key;  // empty when the problem is not about one key (e.g. malformed YAML)
  std::string message;

  // "config.yaml:12: min_ready_master_nodes: must be at least 1 (got 0)"
  std::string toString() const;
};

// A non-fatal note: a deprecated or ignored key was set.
using ConfigNotice = ConfigProblem;

enum class ValueKind { kBool, kInt, kDuration, kString, kStringList };

// The key table, for documentation, `config show`, flags and env. `ignored` keys are accepted
// and do nothing (EKCO keys whose job ekco does differently); `alias_of` names the key a
// deprecated spelling feeds. A `compat` key is typed, kept and shown like any other but drives
// an EKCO feature ekco does not offer: `compat` says why, and setting it to anything but its
// default is a warning (`config check`, agent start).
struct KeyInfo {
  std::string_view key;
  ValueKind kind;
  std::string_view help;
  bool ignored = false;
  std::string_view alias_of = {};
  std::string_view compat = {};
  // EKCO had this key (false: new in ekco), and what differs from EKCO ("" : nothing).
  bool from_ekco = false;
  std::string_view ekco_note = {};
};
const std::vector<KeyInfo>& configKeys();
// A key's other spellings: its environment variable (EKCO_MIN_READY_MASTER_NODES), its flag
// (--min-ready-master-nodes; EKCO's snake_case spelling is an alias of it), its entry's anchor in
// the generated reference ("key-min_ready_master_nodes") and the address of that entry
// ("docs/configuration.md#key-min_ready_master_nodes").
std::string keyEnvironmentVariable(std::string_view key);
std::string keyFlag(std::string_view key);
std::string keyReferenceAnchor(std::string_view key);
std::string keyReferencePage(std::string_view key);

struct KeyDef;    // config.cc: a key and the Config member it sets
struct RawValue;  // config.cc: a value before it is typed

// A configuration file or kURL Installer spec is a few KiB; a larger one is refused unread.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;

// Collects values from the three sources, then validates. Use:
//   ConfigLoader loader;
//   loader.loadFile(path);  loader.loadEnvironment(environ);  loader.setFlag("min_ready...", "3");
//   auto cfg = loader.finish();   // problems() non-empty → exit 2
class ConfigLoader {
 public:
  ConfigLoader();

  // Reads a YAML mapping from a file. A missing file is a problem unless `optional`.
  void loadFile(const std::string& path, bool optional = false);
  // Same, from text; `name` is used in problem sources.
  void loadYaml(std::string_view text, const std::string& name);
  // EKCO_<UPPER_KEY> for every key, and bare LOG_LEVEL (EKCO's spelling). `env` is
  // "NAME=value" strings, as in environ.
  void loadEnvironment(const std::vector<std::string>& env);
  // A value from the command line, for `key` (snake_case) as text.
  void setFlag(std::string_view key, std::string_view value);
  // A value as text from any other source (e.g. a kURL Installer field); `source` is how
  // problems name it.
  void setText(std::string_view key, std::string_view value, const std::string& source);

  // Validates cross-key rules and returns the config. Call once.
  Config finish();

  const std::vector<ConfigProblem>& problems() const { return problems_; }
  const std::vector<ConfigNotice>& notices() const { return notices_; }
  // Keys that were set explicitly (by any source), with the source of the winning value.
  const std::map<std::string, std::string>& sources() const { return sources_; }

 private:
  void assign(const KeyDef& def, const RawValue& raw, const std::string& source);
  bool hasDefaultValue(const KeyDef& def) const;

  Config cfg_;
  // Values given under a deprecated spelling, by the key they feed: {value, source}.
  std::map<std::string, std::pair<std::string, std::string>> alias_values_;
  std::vector<ConfigProblem> problems_;
  std::vector<ConfigNotice> notices_;
  std::map<std::string, std::string> sources_;
};

// Renders the effective configuration as YAML, every key in table order, defaults filled in.
// Ignored keys are left out (they do nothing). The output passes ConfigLoader unchanged.
std::string renderConfigYaml(const Config& cfg);

// `cfg` for `config show`: secrets it may hold replaced, as Go's url.Redacted does for URLs —
// storage_migration_auth_token (when set) becomes "<redacted>", a password in auto_upgrade_url's
// userinfo "xxxxx". (`config from-kurl` writes a config to use, so it keeps them.)
Config redactSecrets(Config cfg);

// Splits and checks one pod_image_overrides entry "original=overridden".
base::Result<std::pair<std::string, std::string>> parseImageOverride(std::string_view entry);

}  // namespace ekco::agent
