// How to reach and authenticate to one Kubernetes API server: the result of reading a
// kubeconfig or the in-cluster service account (kube/transport/kubeconfig.h), and the input of
// every transport (REST over libcurl, exec over WebSocket).
#pragma once

#include <chrono>
#include <string>

namespace ekco::kube {

struct Connection {
  // "https://10.0.0.1:6443" (scheme, host, optional port; no trailing slash, no path).
  std::string server{};

  // Server verification. PEM text, not file names: files are read when the connection is
  // loaded, so a later change on disk is not half-seen. Empty ca_pem with insecure false means
  // the system trust store.
  std::string ca_pem{};
  bool insecure_skip_tls_verify = false;
  // Overrides the name checked against the server certificate (kubeconfig tls-server-name).
  std::string tls_server_name{};

  // Client certificate authentication (kubeadm's admin.conf, kubelet.conf, ekco-kubesim).
  std::string client_cert_pem{};
  std::string client_key_pem{};

  // Bearer token authentication. When token_file is set it is re-read (at most every
  // token_refresh) so a rotated service-account token is picked up; token is then ignored.
  std::string token{};
  std::string token_file{};
  std::chrono::seconds token_refresh{60};

  // Where this came from, for messages: "kubeconfig /etc/kubernetes/admin.conf (context
  // kubernetes-admin@kubernetes)", "in-cluster service account".
  std::string source{};
  // Read from kubeadm's kubeconfig on the host (admin.conf or kubelet.conf, sources (4) and (5)
  // of loadConnection), which a move to another API address rewrites.
  bool from_host_kubeconfig = false;
};

}  // namespace ekco::kube
