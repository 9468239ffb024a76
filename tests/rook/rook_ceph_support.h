// The rook-ceph controller's test cluster: ekco-kubesim as the ekco ServiceAccount with deploy/
// and deploy-rook-ceph/ RBAC enforced (a call the manifests do not grant fails the test), Ready
// nodes, kURL-shaped Rook custom resources and a rook-ceph-tools pod.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/features/rook/rook_ceph.h"
#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/records.h"
#include "kube/exec.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/sa_client.h"
#include "tests/kubesim/server/server.h"
#include "tests/rook/kurl_rook_objects.h"

namespace ekco::agent::rook_testing {

using nlohmann::json;

inline json readyNode(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"status",
           {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
            {"addresses", {{{"type", "InternalIP"}, {"address", "127.0.0.1"}}}}}}};
}

using ekco::rook_testing::kurlRookObjects;
using ekco::rook_testing::rookObject;

class RookClusterTest : public ::testing::Test {
 protected:
  void startCluster(std::vector<json> objects, std::vector<kubesim::ExecReply> exec_script = {}) {
    ASSERT_NO_FATAL_FAILURE(sa_.start(dir_.path(), std::move(objects),
                                      {"/deploy", "/deploy-rook-ceph"}, wall_, "node-1",
                                      std::move(exec_script)));
    server_ = &sa_.server();
    client_ = &sa_.client();
    exec_ = std::make_unique<kube::WebSocketExecutor>(sa_.connection());
  }
  void TearDown() override {
    // Every call the controller made is one the manifests grant.
    sa_.expectEveryRequestAllowed();
    exec_.reset();
  }

  RookCephOptions options(bool dry_run = false) {
    return RookCephOptions{.maintain_storage = true,
                           .effects = {.dry_run = dry_run,
                                       .is_leader_fresh = [this] { return leader_fresh_; },
                                       .record_event =
                                           [this](const kube::EventSpec& e) {
                                             ASSERT_TRUE(client_->recordEvent(e));
                                             events_.push_back(e.involved_name + " " + e.reason);
                                           },
                                       .count_action = [this](std::string_view) { ++actions_; }}};
  }
  std::unique_ptr<RookCephController> controller(RookCephOptions o,
                                                 kube::PodExecutor* exec = nullptr) {
    return std::make_unique<RookCephController>(
        [this] { return ObservedNodes{.synced = true, .nodes = nodes_}; }, *client_,
        exec != nullptr ? *exec : *exec_, clock_, std::move(o));
  }
  void setNodes(const std::vector<std::string>& names) {
    nodes_.clear();
    for (const auto& n : names) {
      auto record = kube::projectNode(readyNode(n));
      ASSERT_TRUE(record) << record.error().message();
      nodes_.push_back(*record);
    }
  }
  json get(const std::string& qualified, const std::string& name) const {
    auto object = server_->get(qualified, "rook-ceph", name);
    return object ? *object : json(nullptr);
  }
  json spec(const std::string& kind, const std::string& name) const {
    return get(kind + ".ceph.rook.io", name)["spec"];
  }
  std::vector<std::string> storageNodes() const {
    std::vector<std::string> out;
    const json cluster = spec("cephclusters", "rook-ceph");
    for (const json& n : cluster["storage"]["nodes"]) {
      out.push_back(n["name"]);
    }
    return out;
  }

  testing::TempDir dir_{"ekco-rook-ceph"};
  base::SystemClock wall_;
  base::ManualClock clock_;  // the hold-down's
  testing::ServiceAccountCluster sa_;
  kubesim::Server* server_ = nullptr;
  kube::RestClient* client_ = nullptr;
  std::unique_ptr<kube::WebSocketExecutor> exec_;
  std::vector<kube::NodeRecord> nodes_;
  bool leader_fresh_ = true;
  std::vector<std::string> events_;
  int actions_ = 0;
};

}  // namespace ekco::agent::rook_testing
