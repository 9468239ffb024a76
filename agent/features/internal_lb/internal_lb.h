// The internal load balancer, node side: every agent keeps its own node's HAProxy static pod
// (/etc/kubernetes/manifests/haproxy.yaml) and its config (/etc/haproxy/haproxy.cfg) in step with
// the cluster's kube-apiservers, and makes the running HAProxy load a new config without
// restarting the pod or dropping established connections.
//
// Discovery (first source that has endpoints, once every source has listed):
//   1. EndpointSlices of the `default/kubernetes` Service (label kubernetes.io/service-name);
//   2. the `default/kubernetes` Endpoints (clusters without discovery.k8s.io/v1);
//   3. the InternalIP of every node labelled node-role.kubernetes.io/control-plane or /master,
//      port 6443.
// Never an empty backend (kURL#3614): with no endpoint known, the last written config stays; a
// node without one falls back to its own kube-apiserver when it is a primary (the static pod
// manifest kube-apiserver.yaml exists), and otherwise refuses and reports it.
//
// Reload: haproxy/reload.h (SIGUSR2 to the HAProxy master found through /proc).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "agent/features/internal_lb/apiserver_watch.h"
#include "base/clock.h"
#include "base/result.h"
#include "haproxy/reload.h"
#include "haproxy/render.h"
#include "hostfs/host_fs.h"
#include "kube/decode/records.h"

namespace ekco::agent {

inline constexpr std::string_view kHaproxyConfigPath = "/etc/haproxy/haproxy.cfg";
inline constexpr std::string_view kHaproxyManifestPath = "/etc/kubernetes/manifests/haproxy.yaml";
inline constexpr std::string_view kApiserverManifestPath =
    "/etc/kubernetes/manifests/kube-apiserver.yaml";

struct DiscoveredApiservers {
  bool settled = false;                        // every source has listed
  std::vector<haproxy::Endpoint> endpoints{};  // sorted, de-duplicated
  std::string source{};  // "endpointslices", "endpoints", "nodes", or "" when none had any
};

// The decision above, pure.
DiscoveredApiservers discoverApiservers(const ObservedApiservers& observed);

// Informer projections. An EndpointSlice gives each ready address (conditions.ready not false)
// with the port named "https" (else its only port; none: 6443); an Endpoints object gives each
// ready address of each subset the same way. Addresses that are not valid IPs are kParse errors
// naming the object, so a garbage object is reported and skipped, never rendered.
base::Result<std::vector<haproxy::Endpoint>> endpointsOfSlice(const nlohmann::json& slice);
base::Result<std::vector<haproxy::Endpoint>> endpointsOfEndpoints(const nlohmann::json& endpoints);
// InternalIP:6443 of each node (nodes without an InternalIP are skipped).
std::vector<haproxy::Endpoint> endpointsOfNodes(const std::vector<kube::NodeRecord>& nodes);

// This node's own kube-apiserver, read from its static pod manifest (nullopt: not a primary).
// The kubeadm annotation kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint, else
// --bind-address (unless a wildcard) or --advertise-address with --secure-port, else
// 127.0.0.1:6443 (kube-apiserver listens on every address by default). A manifest that is not
// YAML is an error naming the file.
base::Result<std::optional<haproxy::Endpoint>> localApiserver(const hostfs::HostFs& fs);

// True when the process's network namespace has the IPv6 loopback address (reads
// <proc>/net/if_inet6; false when IPv6 is disabled or the file is missing).
bool hasIpv6Loopback(const hostfs::HostFs& process_fs);

// Makes the running HAProxy load the config; an interface so tests can count reloads.
class HaproxyReloader {
 public:
  virtual ~HaproxyReloader() = default;
  virtual base::Result<haproxy::ReloadResult> reload() = 0;
};

// The real one: haproxy::reloadHaproxy on `config_path` (the config as this process sees it).
std::unique_ptr<HaproxyReloader> makeProcReloader(std::string config_path, const base::Clock& clock,
                                                  haproxy::ReloadOptions options = {});

struct InternalLbOptions {
  std::string image = std::string(haproxy::kDefaultImage);
  std::string bind = "127.0.0.1:6444";
  bool bind_ipv6_loopback = false;
  bool dry_run = false;
  // A new endpoint set is applied once unchanged for this long (0: at once).
  std::chrono::milliseconds settle{100};
};

class InternalLoadBalancer : public Controller {
 public:
  InternalLoadBalancer(hostfs::HostFs& fs, std::function<ObservedApiservers()> observe,
                       HaproxyReloader& reloader, const base::Clock& clock,
                       InternalLbOptions options);

  std::string name() const override { return "internal-lb"; }
  base::Result<ReconcileResult> reconcile() override;

  // For /status: the backends this node's HAProxy was last given, where they came from, when,
  // and the last reload.
  nlohmann::json status() const override;

 private:
  base::Result<ReconcileResult> apply(const std::vector<haproxy::Endpoint>& endpoints,
                                      const std::string& source);

  hostfs::HostFs& fs_;
  std::function<ObservedApiservers()> observe_;
  HaproxyReloader& reloader_;
  const base::Clock& clock_;
  InternalLbOptions options_;

  // The discovered set being waited on (settle), and since when (reconcile's thread only).
  std::vector<haproxy::Endpoint> settling_;
  base::MonoTime settling_since_{};

  mutable std::mutex mu_;
  bool loaded_ = false;                      // the existing config was read once
  std::vector<haproxy::Endpoint> backends_;  // in the config on disk
  std::string source_;                       // where they came from ("file" before the first write)
  std::optional<base::WallTime> written_at_;
  bool reload_pending_ = false;  // written but not yet handed to a running HAProxy
  std::string last_reload_;
  std::optional<base::WallTime> reloaded_at_;
  std::string problem_;  // why the config could not be brought up to date, or ""
};

ControllerSpec internalLbSpec();

}  // namespace ekco::agent
