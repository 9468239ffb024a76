// ekco-kubesim: a test Kubernetes API server on loopback (HTTPS, client certificates), with a
// generic object store and the API conventions kubectl and ekco rely on. See
// docs in store.h for the semantics of each verb. Start it in-process:
//
//   auto server = kubesim::Server::start({.out_dir = tmp, .objects = {node}});
//   run kubectl --kubeconfig (*server)->kubeconfigPath() ...
//
// Every request runs on its own connection thread (blocking I/O, one thread per connection),
// so slow watch streams never hold up other requests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "tests/kubesim/controllers/node_lifecycle.h"
#include "tests/kubesim/rbac/rbac.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/store/store.h"

namespace ekco::kubesim {

// A scripted pods/exec reply: the first entry whose command_prefix is a prefix of the exec's
// command answers it.
struct ExecReply {
  std::vector<std::string> command_prefix{};
  std::string stdout_data{};
  std::string stderr_data{};
  int exit_code = 0;
  // Run mode (exec_run.cc): instead of the scripted output, run the exec's own command (argv
  // as the client sent it, no shell) on this machine with `run_env` added to kubesim's
  // environment, and answer its real stdout, stderr and exit status; so the rook-ceph-tools
  // pod's `ceph` is the real CLI against a real cluster (tests/ceph). Only pods whose name
  // starts with `pod_prefix` (empty: any) match a run entry.
  bool run = false;
  std::map<std::string, std::string> run_env{};
  std::string pod_prefix{};
  std::chrono::milliseconds run_timeout{std::chrono::seconds(60)};
};

struct ExecRecord {
  std::string ns{};
  std::string pod{};
  std::string container{};
  std::vector<std::string> command{};
};

// One served request, as the authorizer saw it (see RequestAttributes in rbac.h).
struct RequestRecord {
  std::string user{};  // "kubernetes-admin", "system:serviceaccount:kurl:ekco", "" (401)
  std::string verb{};  // get list watch create update patch delete deletecollection; the
                       // lower-case HTTP method for non-resource requests
  std::string api_group{};
  std::string resource{};
  std::string subresource{};
  std::string ns{};
  std::string name{};
  std::string path{};   // without the query
  int code = 0;         // HTTP status (101 for an upgraded exec, 200 for a watch stream)
  bool allowed = true;  // false: 401 or 403 from authentication/authorization
};

// Injected failures, for client robustness tests. All off by default.
struct Faults {
  std::chrono::milliseconds latency{0};           // added before every answer
  double rate_429 = 0;                            // share of requests answered 429 (Retry-After: 1)
  double rate_500 = 0;                            // share of requests answered 500
  int drop_watch_after_events = 0;                // end every watch stream after this many events
  std::chrono::milliseconds drop_watch_after{0};  // ... or after this long (open streams too)
  // While set: every API request is read and never answered (the connection stays open until
  // the fault is lifted, then closes without an answer), and open watch streams send nothing
  // (a hung API server: connections accepted, nothing comes back). /kubesim/ is exempt.
  bool hang = false;
  // While set: watch streams send no event and no bookmark (new ones send their headers first);
  // every other request is served. Watches that stalled without an error.
  bool stall_watches = false;
};

// One more listener of the cluster's API (ServerOptions::more_apiservers).
struct ApiserverListener {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port
  std::string serving_cert_file{};
  std::string serving_key_file{};
};

struct ServerOptions {
  std::string listen_address = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port
  // Where kubeconfig, ca.crt, client.crt, client.key, server.crt and server.key are written.
  // Required.
  std::string out_dir{};
  // Default: <out_dir>/kubeconfig.
  std::string kubeconfig_path{};
  std::vector<nlohmann::json> objects{};  // preloaded, as Server::put
  // Timestamps and the simulated kubelet's notion of "now". Null: the system clock. Must
  // outlive the server.
  const base::Clock* clock = nullptr;
  std::chrono::milliseconds kubelet_interval{100};
  std::chrono::milliseconds bookmark_interval{1000};
  std::size_t history_window = 10000;
  std::vector<ExecReply> exec_script{};
  Faults faults{};
  // Serve with this PKI instead of a fresh one, so several servers (apiservers behind one load
  // balancer) present the same CA and serving certificate.
  std::optional<Pki> pki = std::nullopt;
  // Serve the certificate and key in these files (e.g. a host root's pki/apiserver.{crt,key})
  // instead of the PKI's serving pair, read again at a handshake when they changed, as
  // kube-apiserver reloads its serving certificate. Client certificates are still verified
  // against the PKI's CA. Both or neither.
  std::string serving_cert_file{};
  std::string serving_key_file{};
  // More apiservers of the same cluster, as kubeadm's primaries run them: each listens on its own
  // address and port and serves its own certificate files (as serving_cert_file above), over
  // this server's one store, CA and authentication (several kube-apiservers on one etcd).
  std::vector<ApiserverListener> more_apiservers{};
  // Bearer tokens accepted ("Authorization: Bearer TOKEN"); requests with one are authorized by
  // RBAC from the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects in the store. An
  // unknown token is 401. The client certificate (kubernetes-admin, system:masters) always has
  // full access.
  std::vector<TokenUser> tokens{};
  // Requests with neither a client certificate nor a bearer token: served as system:masters
  // (kubesim's behaviour before tokens existed; logged as user "system:anonymous"), or, false,
  // as system:anonymous / system:unauthenticated under RBAC.
  bool anonymous_admin = true;
  // Request log records kept (the oldest are dropped).
  std::size_t request_log_limit = 100000;
  // The minor version /version reports (Kubernetes 1.<minor>.4).
  int minor_version = 32;
  // kube-controller-manager's node lifecycle, taint manager, pod GC, attach-detach and
  // StatefulSet controllers and the kubelets' heartbeats (node_lifecycle.h); off by default.
  ClusterControllersOptions controllers{};
};

class Server {
 public:
  [[nodiscard]] static base::Result<std::unique_ptr<Server>> start(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;
  std::string url() const;  // "https://127.0.0.1:PORT"
  // The port of ServerOptions::more_apiservers[i].
  std::uint16_t apiserverPort(std::size_t i) const;
  const std::string& kubeconfigPath() const;
  const std::string& caPem() const;
  const Pki& pki() const;
  const std::string& clientCertPem() const;
  const std::string& clientKeyPem() const;

  // Closes the listener and every connection (open watches end) and joins all threads.
  // Idempotent; the destructor calls it.
  void stop();

  // Direct store access. `resource` is "pods", "leases.coordination.k8s.io", ...
  [[nodiscard]] base::Result<nlohmann::json> put(nlohmann::json object);
  std::optional<nlohmann::json> get(std::string_view resource, std::string_view ns,
                                    std::string_view name) const;
  bool remove(std::string_view resource, std::string_view ns, std::string_view name);
  Store& store();

  // One pass of the simulated kubelet and namespace controller now (they also run every
  // kubelet_interval).
  void runKubelet();
  // The simulated kubelets and cluster controllers (ServerOptions::controllers).
  NodeLifecycle& nodeLifecycle();
  // Drops the watch event history: a watch from any resourceVersion seen so far gets 410.
  void compactHistory();
  // The next watch request gets 410 Gone (an ERROR event with reason Expired).
  void forceGoneOnNextWatch();
  void setFaults(const Faults& faults);
  std::vector<ExecRecord> execLog() const;
  // The most recent requests (at most request_log_limit), oldest first; also served at
  // GET /kubesim/v1/request-log (DELETE clears it).
  std::vector<RequestRecord> requestLog() const;
  void clearRequestLog();
  // Writes a kubeconfig (same cluster and CA as kubeconfigPath()) whose user authenticates with
  // `token`.
  [[nodiscard]] base::Result<void> writeTokenKubeconfig(const std::string& path,
                                                        const std::string& token) const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Parses a YAML or JSON stream of objects (multi-document YAML, `---` separated; List kinds are
// flattened) into JSON objects.
[[nodiscard]] base::Result<std::vector<nlohmann::json>> parseObjects(std::string_view text);
// Every object in the *.yaml files of `dir` (sorted by name, as `kubectl create -f DIR` reads
// them): deploy/, deploy-rook-ceph/, deploy-monitoring/ loaded into a simulated cluster. An
// error names the file.
[[nodiscard]] base::Result<std::vector<nlohmann::json>> loadManifestDir(const std::string& dir);
// A YAML or JSON list of {command: [prefix...], stdout, stderr, exitCode}.
[[nodiscard]] base::Result<std::vector<ExecReply>> parseExecScript(std::string_view text);
// Realistic nodes and pods for scale runs: nodes node-0..N-1 (Ready, labels, a control-plane
// taint on the first), pods spread round-robin with spec.nodeName, ownerReferences, volumes.
std::vector<nlohmann::json> generateCluster(int nodes, int pods);

// Objects the tests, benchmarks and the demo build alike:
// An Active Namespace NAME, as the API server creates one.
nlohmann::json namespaceObject(const std::string& name);
// A ConfigMap NAMESPACE/NAME holding `data` (a JSON object of strings).
nlohmann::json configMapObject(const std::string& ns, const std::string& name, nlohmann::json data);
// A Running pod NAMESPACE/NAME bound to `node`, one container.
nlohmann::json runningPodObject(const std::string& ns, const std::string& name,
                                const std::string& node,
                                nlohmann::json labels = nlohmann::json::object(),
                                nlohmann::json annotations = nlohmann::json::object());
// A Ready Node NAME labelled kubernetes.io/hostname (and node-role.kubernetes.io/control-plane
// when `control_plane`), with the InternalIP `internal_ip` ("" = no addresses).
nlohmann::json readyNodeObject(const std::string& name, const std::string& internal_ip = "",
                               bool control_plane = false);
// `node` as the node lifecycle controller leaves a node that stopped reporting at `since`
// (RFC 3339): Ready=Unknown from then, and the unreachable NoExecute (timeAdded) and NoSchedule
// taints beside its other taints.
nlohmann::json unreachableNode(nlohmann::json node, const std::string& since);
// default/kubernetes's EndpointSlice NAME as the apiservers' endpoint reconciler keeps it: one
// ready endpoint per address, port "https".
nlohmann::json kubernetesEndpointSlice(const std::string& name,
                                       const std::vector<std::string>& addresses, int port);
// kube-node-lease/<node>: the kubelet's heartbeat Lease, renewed at `renew_time` (RFC 3339 with
// microseconds, as kubelets write it).
nlohmann::json nodeLeaseObject(const std::string& node, const std::string& renew_time);
// A primary's /etc/kubernetes/manifests/kube-apiserver.yaml as kubeadm writes it, with the two
// flags ekco reads the apiserver's address from (--advertise-address, --secure-port): for host
// roots whose apiserver is a kubesim listener.
std::string kubeApiserverManifest(const std::string& advertise_address, int port);

// A loopback TCP port nobody listens on right now at `address` (bind to port 0, read it back,
// close).
[[nodiscard]] base::Result<std::uint16_t> freeLoopbackPort(
    const std::string& address = "127.0.0.1");

}  // namespace ekco::kubesim
