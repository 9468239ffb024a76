// The `cluster-certificates` node reconciler (rotate_certs): the cluster's TLS secrets
// (agent/features/certs/cluster_secrets.h: Contour/Envoy, registry, kurl-proxy, the kotsadm kubelet
// client), inspected at start and every rotate_certs_check_interval and renewed inside
// rotate_certs_ttl, with one Event on the Secret per renewal.
//
// It runs on every control-plane node (one whose certificates_dir holds the cluster CA key),
// not on the leader alone: the registry is re-signed by that CA key and the kotsadm kubelet
// client is copied from the host's apiserver-kubelet-client pair, files only control-plane
// hosts have, and the leader may be a worker. Each write is an update guarded by the
// resourceVersion read, so when two control-plane agents find the same secret due one update
// wins and the other conflicts and looks again next time. Elsewhere it says so and does nothing.
#pragma once

#include <nlohmann/json.hpp>

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "agent/features/certs/cluster_secrets.h"
#include "agent/serve/metrics.h"
#include "base/clock.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"

namespace ekco::agent {

struct ClusterCertsControllerOptions {
  ClusterCertsOptions secrets{};  // `now` is set at each check
  bool renew = true;              // rotate_certs
  std::chrono::milliseconds check_interval{std::chrono::hours(24)};
  std::function<void(std::string_view what, const std::string& message)> report{};
  // ekco_cluster_certificate_expiry_timestamp_seconds{name,secret} and
  // ekco_cluster_certificate_renewal_failing{node}; either may be null (tests).
  const Gauge* expiry = nullptr;
  const Gauge* failing = nullptr;
  std::string node_name{};
};

class ClusterCerts final : public Controller {
 public:
  ClusterCerts(kube::KubeClient& kube, const hostfs::HostFs& fs, const base::Clock& clock,
               ClusterCertsControllerOptions options);
  std::string name() const override { return "cluster-certificates"; }
  base::Result<ReconcileResult> reconcile() override;
  // {"control_plane", "checked_at", "secrets": [{name, secret, present, expires, days_left, due,
  //  note, problem}], "last": {renewed, errors}}
  nlohmann::json status() const override;

 private:
  void exportExpiry(const std::vector<ClusterSecretState>& states);
  void setFailing(bool failing);

  kube::KubeClient& kube_;
  const hostfs::HostFs& fs_;
  const base::Clock& clock_;
  ClusterCertsControllerOptions o_;
  mutable std::mutex mu_;
  nlohmann::json status_ = nullptr;
  std::set<std::pair<std::string, std::string>> exported_;  // {name, secret} series shown
};

ControllerSpec clusterCertsSpec();

}  // namespace ekco::agent
