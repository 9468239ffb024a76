// Talking to etcd: the v3 JSON gateway (grpc-gateway) over HTTPS with a client certificate,
// the way kubeadm's own health checks do (certificates_dir/etcd/healthcheck-client.crt). Only
// what the purge needs: list members, remove one, and ask one member whether it is healthy.
//
// The HTTPS exchange is kube::CurlTransport (libcurl, TLS material from memory), one per base
// URL, created when first needed and kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "etcd/member.h"
#include "hostfs/host_fs.h"
#include "kube/transport/http_transport.h"

namespace ekco::etcd {

struct ClientOptions {
  // Client URLs tried in order: "https://10.0.0.1:2379", "https://[fd00::1]:2379".
  std::vector<std::string> endpoints{};
  // PEM text: the etcd CA, and the client certificate and key it signed.
  std::string ca_pem{};
  std::string cert_pem{};
  std::string key_pem{};
  // Whole exchange with one endpoint (connect, TLS, request, answer).
  std::chrono::milliseconds timeout{5000};
  // One /health probe of one member (an unreachable member costs at most this per client URL).
  std::chrono::milliseconds health_timeout{2000};
};

// Reads <certificates_dir>/etcd/ca.crt, healthcheck-client.crt and healthcheck-client.key
// (kubeadm's names; certificates_dir is a host path, /etc/kubernetes/pki by default) through
// `fs`. Endpoints are left empty. Errors name the host path; a file that holds no PEM block is
// kParse.
base::Result<ClientOptions> loadClientCertificates(const hostfs::HostFs& fs,
                                                   const std::string& certificates_dir);

// Thread-safe.
class EtcdClient {
 public:
  virtual ~EtcdClient() = default;

  // POST /v3/cluster/member/list on the first endpoint that answers.
  virtual base::Result<std::vector<Member>> listMembers() = 0;

  // POST /v3/cluster/member/remove. A member that does not exist (already removed) is
  // kNotFound; etcd refusing because the cluster would lose quorum ("etcdserver: unhealthy
  // cluster") is kUnavailable. Another endpoint is tried only when the request provably never
  // reached the first (connect or TLS failure), so a removal is never sent twice.
  virtual base::Status removeMember(std::uint64_t id) = 0;

  // GET <client URL>/health on each of the member's client URLs (with the client certificate,
  // health_timeout each): true when one answers {"health":"true"}. Unreachable, refusing TLS,
  // answering "false" or anything else, or having no client URL (never started) is false, not
  // an error.
  virtual base::Result<bool> memberHealthy(const Member& member) = 0;
};

// Makes the HTTPS transport for one base URL ("https://10.0.0.1:2379"). Tests pass a fake.
using TransportFactory = std::function<base::Result<std::unique_ptr<kube::HttpTransport>>(
    const std::string& base_url, const ClientOptions& options)>;

// The real transport factory (kube::CurlTransport with the options' TLS material).
TransportFactory curlTransportFactory();

// The endpoints are tried in order for each call, starting with the one that answered last.
// An empty endpoint list makes every list/remove call fail with kInvalidArgument.
std::unique_ptr<EtcdClient> makeEtcdClient(ClientOptions options,
                                           TransportFactory factory = curlTransportFactory());

}  // namespace ekco::etcd
