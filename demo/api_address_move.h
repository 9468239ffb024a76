// The demo's move of the cluster onto the internal load balancer: `ekco change-load-balancer
// --internal` (EKCO's command) on cp-1, carried out by the running agents, narrated.
//
// Set up from the start, so that the agents run on hosts kubeadm could have joined: a cluster CA
// and each primary's apiserver.crt naming its address (made by openssl), ekco-kubesim listening
// as each primary's apiserver at <ip>:6443 with that certificate
// (kubesim::ServerOptions::more_apiservers), and every node's kubelet.conf (a primary's
// admin.conf and kube-apiserver manifest too) at cp-1's address. For the move itself: a mock
// systemd on a private D-Bus per node (tests/fakes/systemd_bus.h) whose kubelet.service restarts
// a thread playing kubelet answers by renewing the node's Lease, and a real HAProxy run from the
// config cp-1's agent rendered as the load balancer at 127.0.0.1:6444.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/kubesim/server/server.h"

namespace ekco::demo {

struct MoveNode {
  std::string name;
  std::string ip;
  bool primary = false;
  std::filesystem::path root;  // its host root
};

class ApiAddressMove {
 public:
  // The primaries' PKI under their host roots (`work` for the CA's scratch files); null, said
  // with `why`, when openssl cannot make it.
  static std::unique_ptr<ApiAddressMove> prepare(const std::filesystem::path& work,
                                                 const std::vector<MoveNode>& primaries,
                                                 std::string& why);
  ~ApiAddressMove();
  ApiAddressMove(const ApiAddressMove&) = delete;
  ApiAddressMove& operator=(const ApiAddressMove&) = delete;

  // ekco-kubesim's listeners for the primaries' apiservers, at <ip>:6443, and the token of the
  // nodes' kubeconfigs (kubernetes-admin, system:masters).
  std::vector<kubesim::ApiserverListener> apiservers() const;
  kubesim::TokenUser adminToken() const;
  // kubeadm's files on `node` (written before its agent starts): kubelet.conf at cp-1's
  // apiserver with adminToken(); on a primary also admin.conf and the kube-apiserver manifest
  // (--advertise-address, --secure-port) the certificate steps read.
  void writeHostFiles(const MoveNode& node) const;

  struct Run {
    std::string ekco;                  // the binary
    std::string config;                // the agents' config file
    std::filesystem::path source;      // the source tree (its tests/units/systemd_mock.py)
    std::vector<MoveNode> nodes;       // the live nodes, cp-1 first
    std::vector<std::string> exclude;  // nodes the move leaves alone (--exclude)
    kubesim::Server* api = nullptr;
    std::function<void(const std::string&)> say;
    std::function<void(const std::string&)> problem;
  };
  // The move: systemd and kubelet on each node, HAProxy, the command (its output said line by
  // line), then what changed: the kubeconfigs, the certificates (openssl), kubelet's restarts.
  void run(const Run& r);

 private:
  ApiAddressMove() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ekco::demo
