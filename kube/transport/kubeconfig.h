// Where the API server is and how to authenticate: a kubeconfig file or the in-cluster service
// account, read into a Connection (kube/transport/connection.h).
//
// Files are read through HostFs. Two filesystems are involved because the agent may run in a
// DaemonSet pod with the host mounted at /host: `process_fs` is this process's own view ("/":
// --kubeconfig, KUBECONFIG, the service-account directory), `host_fs` is the host under
// --host-root (kubeadm's /etc/kubernetes/*.conf and the files they name, such as kubelet.conf's
// /var/lib/kubelet/pki/kubelet-client-current.pem). Files a kubeconfig names are read from the
// same filesystem as the kubeconfig; relative names are relative to its directory, as kubectl
// does.
//
// Supported: certificate-authority(-data), insecure-skip-tls-verify, tls-server-name,
// client-certificate(-data), client-key(-data), token, tokenFile. Not supported (an error, not
// silently ignored): exec and auth-provider credential plugins, username/password, proxy-url.
//
// Errors are one line naming the file and the field, e.g.
//   kubeconfig /x/admin.conf: context "foo" not found
// with kNotFound for missing files/entries, kParse for malformed YAML or base64 and
// kInvalidArgument for unsupported or contradictory settings. Nothing throws.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/transport/connection.h"

namespace ekco::kube {

// The environment variables the loader consults (KUBECONFIG, KUBERNETES_SERVICE_HOST,
// KUBERNETES_SERVICE_PORT), passed in so tests control them.
using Environment = std::map<std::string, std::string>;

// The process's values of the variables above (the composition root calls this once).
Environment processEnvironment();

inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";
inline constexpr std::string_view kAdminConf = "/etc/kubernetes/admin.conf";
inline constexpr std::string_view kKubeletConf = "/etc/kubernetes/kubelet.conf";

struct ConnectionSources {
  const hostfs::HostFs& process_fs;
  const hostfs::HostFs& host_fs;
  Environment env{};
  std::string explicit_kubeconfig{};  // --kubeconfig; "" when not given
  std::string context{};              // --context; "" means current-context
  // What relative --kubeconfig and KUBECONFIG paths are relative to (the process's cwd).
  std::string working_dir = "/";
};

// Resolution order, first match wins:
//   (1) explicit_kubeconfig (process_fs);
//   (2) KUBECONFIG (process_fs): only the first non-empty entry of a colon-separated list is
//       read (kubectl merges them all; ekco does not need that);
//   (3) in-cluster, when KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are both set;
//   (4) /etc/kubernetes/admin.conf on the host (host_fs), if it exists;
//   (5) /etc/kubernetes/kubelet.conf on the host (host_fs), if it exists.
// A source that is chosen and fails is an error; later sources are not tried then (a broken
// --kubeconfig must not silently become admin.conf). Nothing found is kNotFound.
base::Result<Connection> loadConnection(const ConnectionSources& sources);

// The node's own credentials, whatever else the process has: the host's
// /etc/kubernetes/kubelet.conf (host_fs), the kubelet's identity system:node:<name>, which
// kube-apiserver's Node authorizer and NodeRestriction admission confine to this node (its own
// Node object, the pods bound to it). With KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT
// set (a pod) the server is the in-cluster one: kubelet.conf's may be an address only the host's
// network reaches (kURL's internal load balancer, https://localhost:6444), and kubeadm's
// apiserver certificate names the kubernetes Service's IP for the cluster CA kubelet.conf
// trusts. kNotFound when the host has no kubelet.conf.
base::Result<Connection> loadNodeConnection(const hostfs::HostFs& host_fs, const Environment& env);

// One kubeconfig file (`path` in `fs`). `context` "" means its current-context.
// A tokenFile is kept in Connection::token_file (re-read by the transport) when `fs` is the
// process's filesystem (token_file_readable_later); otherwise it is read once, into token.
base::Result<Connection> loadKubeconfig(const hostfs::HostFs& fs, std::string_view path,
                                        std::string_view context = {},
                                        bool token_file_readable_later = true);

// The in-cluster service account: server from the environment (an IPv6 host is bracketed),
// CA and token from `dir` in `fs`. The token file is also kept in token_file so a rotated
// token is picked up.
base::Result<Connection> loadInCluster(const hostfs::HostFs& fs, const Environment& env,
                                       std::string_view dir = kServiceAccountDir);

// Strict standard base64 (RFC 4648, padding optional, whitespace ignored); nullopt if invalid.
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace ekco::kube
