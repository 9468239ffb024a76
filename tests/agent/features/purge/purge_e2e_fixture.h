// The fixture of the purge end-to-end tests (purge_e2e_test.cc, purge_kill_test.cc):
// ekco-kubesim in-process with a 3-control-plane cluster (kubeadm-config, Rook's CephCluster,
// OSD Deployments and tools pod, deploy/ RBAC), a real 3-member etcd cluster with TLS on
// 127.0.0.11-13 whose member cp-3 can be killed, and real `ekco agent` processes as the
// ServiceAccount kurl/ekco.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "agent/features/purge/purge.h"
#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "etcd/member.h"
#include "etcd/removal.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/timestamp.h"
#include "kube/exec.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/agent/sa_client.h"
#include "tests/fakes/etcd_cluster.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent::testing {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kDead = 2;  // cp-3, etcd member 127.0.0.13

// "verb resource[/subresource][.group]": what an RBAC rule grants and a request needs.
inline std::string permission(const std::string& verb, const std::string& group,
                              const std::string& resource) {
  return verb + " " + resource + (group.empty() ? "" : "." + group);
}

inline std::string stamp(base::WallTime t) { return kube::formatRfc3339(t); }

inline json node(const std::string& name, const std::string& ip, bool control_plane) {
  return kubesim::readyNodeObject(name, ip, control_plane);
}

inline json osdDeployment(const std::string& id, const std::string& host) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata",
           {{"name", "rook-ceph-osd-" + id},
            {"namespace", "rook-ceph"},
            {"labels", {{"app", "rook-ceph-osd"}, {"ceph-osd-id", id}}}}},
          {"spec",
           {{"selector", {{"matchLabels", {{"app", "rook-ceph-osd"}, {"ceph-osd-id", id}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "rook-ceph-osd"}, {"ceph-osd-id", id}}}}},
              {"spec",
               {{"nodeSelector", {{"kubernetes.io/hostname", host}}},
                {"containers", {{{"name", "osd"}, {"image", "ceph"}}}}}}}}}}};
}

constexpr const char* kClusterStatus = R"(apiEndpoints:
  cp-1: {advertiseAddress: 127.0.0.11, bindPort: 6443}
  cp-2: {advertiseAddress: 127.0.0.12, bindPort: 6443}
  cp-3: {advertiseAddress: 127.0.0.13, bindPort: 6443}
apiVersion: kubeadm.k8s.io/v1beta2
kind: ClusterStatus
)";

// The pods left on cp-3 when it died, which nothing but a force delete removes.
inline const std::vector<std::pair<std::string, std::string>> kStuck = {
    {"default", "web-7d9f-cp3"},
    {"rook-ceph", "rook-ceph-osd-3-5c8d"},
    {"kube-system", "kube-proxy-x3"}};

inline std::vector<json> clusterObjects() {
  std::vector<json> objects = {node("cp-1", "127.0.0.11", true), node("cp-2", "127.0.0.12", true),
                               node("cp-3", "127.0.0.13", true),
                               node("worker-1", "127.0.0.21", false)};
  objects.push_back(kubesim::configMapObject("kube-system", "kubeadm-config",
                                             {{"ClusterStatus", kClusterStatus}}));
  for (int i = 1; i <= 3; ++i) {
    const std::string n = std::to_string(i);
    objects.push_back(kubesim::runningPodObject(
        "kube-system", "kube-apiserver-cp-" + n, "cp-" + n,
        {{"component", "kube-apiserver"}, {"tier", "control-plane"}},
        {{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint",
          "127.0.0.1" + n + ":6443"}}));
  }
  objects.push_back(
      {{"apiVersion", "ceph.rook.io/v1"},
       {"kind", "CephCluster"},
       {"metadata", {{"name", "rook-ceph"}, {"namespace", "rook-ceph"}}},
       {"spec",
        {{"storage",
          {{"useAllNodes", false},
           {"nodes", {{{"name", "cp-1"}}, {{"name", "cp-2"}}, {{"name", "cp-3"}}}}}}}}});
  objects.push_back(osdDeployment("0", "cp-1"));
  objects.push_back(osdDeployment("3", "cp-3"));
  objects.push_back(osdDeployment("12", "cp-3"));
  objects.push_back(kubesim::runningPodObject("rook-ceph", "rook-ceph-tools-6b4f", "cp-1",
                                              {{"app", "rook-ceph-tools"}}));
  return objects;
}

class PurgeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = etcd_.start();
    ASSERT_TRUE(started) << started.error().message();
    ASSERT_NO_FATAL_FAILURE(testing::startAsEkco(
        {.dir = dir_.path(),
         .objects = clusterObjects(),
         .manifest_dirs = {"/deploy", "/deploy-rook-ceph", "/deploy-monitoring"}},
        server_));
    sa_kubeconfig_ = dir_.path() + "/sa.kubeconfig";
    // The agent's host root is the etcd fixture's: certificates_dir/etcd/healthcheck-client.*.
    fs::create_directories(etcd_.hostRoot() + "/etc/kubernetes");
    std::ofstream(etcd_.hostRoot() + "/etc/kubernetes/kubelet.conf") << "# joined\n";
  }

  void TearDown() override {
    for (pid_t& pid : agents_) testing::killAndReap(pid);
    if (server_) server_->stop();
    etcd_.stop();
  }

  // cp-3 stops reporting now (whole seconds, as the API writes it); its pods have been
  // terminating since then. Returns that moment.
  base::WallTime killNodeCp3(bool kill_etcd) {
    if (kill_etcd) etcd_.kill(kDead);
    const base::WallTime t = std::chrono::floor<seconds>(wall_.wallNow());
    // The Node first: kubesim's kubelet confirms the deletion of terminating pods on a Ready
    // node (every 100 ms), so pods put while cp-3 still looked Ready could vanish on their own.
    EXPECT_TRUE(server_->put(kubesim::unreachableNode(node("cp-3", "127.0.0.13", true), stamp(t))));
    for (const auto& [ns, name] : kStuck) {
      json p = kubesim::runningPodObject(ns, name, "cp-3");
      p["metadata"]["deletionTimestamp"] = stamp(t);
      p["metadata"]["deletionGracePeriodSeconds"] = 30;
      EXPECT_TRUE(server_->put(p));
    }
    return t;
  }

  std::string writeConfig(const std::string& file = "config.yaml", const std::string& extra = "") {
    const std::string path = dir_.path() + "/" + file;
    std::ofstream(path) << "leader_election_lease_duration: 3s\n"
                           "leader_election_renew_deadline: 2s\n"
                           "leader_election_retry_period: 500ms\n"
                           "node_unreachable_toleration: 3s\n"
                           "clear_pod_deletion_grace: 1s\n"
                           "purge_dead_nodes: true\n"
                           "maintain_rook_storage_nodes: true\n"
                           "min_ready_master_nodes: 2\n"
                           "storm_guard_percent: 60\n"
                           "enable_internal_load_balancer: true\n"
                        << extra;
    return path;
  }

  // A real `ekco agent` on cp-1; waits until it leads with its caches synced.
  void startAgent(std::vector<std::string> extra_args = {}) {
    socket_ = dir_.path() + "/a.sock";
    log_ = dir_.path() + "/agent.log";
    std::vector<std::string> args = {EKCO_BIN,       "agent",          "--config",    writeConfig(),
                                     "--kubeconfig", sa_kubeconfig_,   "--node-name", "cp-1",
                                     "--host-root",  etcd_.hostRoot(), "--socket",    socket_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const pid_t pid = testing::spawnLogged(args, log_);
    ASSERT_GT(pid, 0);
    agents_.push_back(pid);
    ASSERT_TRUE(testing::eventually(
        [&] {
          json s = status();
          return s.is_object() && s.value("is_leader", false) && s.value("ready", false) &&
                 s["clear_nodes"].is_object() && s["clear_nodes"].value("synced", false);
        },
        seconds(30)))
        << agentLog();
  }

  json status() {
    auto reply = queryHealthSocket(socket_, "/status", milliseconds(3000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  }
  std::string agentLog() { return testing::readWholeFile(log_); }

  std::vector<std::string> storageNodes() {
    std::vector<std::string> out;
    auto cluster = server_->get("cephclusters.ceph.rook.io", "rook-ceph", "rook-ceph");
    if (!cluster) return {"<no CephCluster>"};
    for (const json& n : (*cluster)["spec"]["storage"]["nodes"]) out.push_back(n.value("name", ""));
    return out;
  }
  std::string clusterStatus() {
    return (*server_->get("configmaps", "kube-system", "kubeadm-config"))["data"].value(
        "ClusterStatus", "");
  }
  // The commands run through pods/exec that change Ceph: all but the rook-ceph controller's
  // queries (`ceph osd tree`, `ceph osd pool ls|get`, `ceph osd safe-to-destroy`), which the agent
  // runs every pass once maintain_rook_storage_nodes is on, dry run included.
  std::vector<std::string> cephChanges() {
    std::vector<std::string> out;
    for (const auto& e : server_->execLog()) {
      const std::string c = fmt::format("{}", fmt::join(e.command, " "));
      bool query = false;
      for (const char* q :
           {"ceph osd tree", "ceph osd pool ls", "ceph osd pool get", "ceph osd safe-to-destroy"}) {
        query = query || c.rfind(q, 0) == 0;
      }
      if (!query) out.push_back(c);
    }
    return out;
  }
  // How many times each command ran through pods/exec (as one string).
  std::map<std::string, int> execCounts(std::string* pods = nullptr) {
    std::map<std::string, int> counts;
    for (const auto& e : server_->execLog()) {
      ++counts[fmt::format("{}", fmt::join(e.command, " "))];
      if (pods != nullptr) *pods += e.ns + "/" + e.pod + " ";
    }
    return counts;
  }
  std::vector<std::string> eventReasons(const std::string& involved) {
    std::vector<std::string> out;
    auto events = server_->store().list(*server_->store().findQualified("events"), "", {});
    for (const json& e : events.body["items"]) {
      if (e["involvedObject"].value("name", "") == involved) out.push_back(e.value("reason", ""));
    }
    return out;
  }
  // `etcdctl member list` through member i (a test failure when it fails).
  std::string memberList(int i) {
    auto listed = etcd_.memberList(etcd_.endpoint(i));
    EXPECT_TRUE(listed) << listed.error().message();
    return listed ? *listed : "";
  }
  int etcdMemberLines() {
    const std::string listed = memberList(0);
    return static_cast<int>(std::count(listed.begin(), listed.end(), '\n'));
  }

  fakes::EtcdCluster etcd_{{"cp-1", "cp-2", "cp-3"}};
  testing::TempDir dir_{"ekco-purge-e2e"};
  std::unique_ptr<kubesim::Server> server_;
  std::string sa_kubeconfig_;  // the agents': the ServiceAccount's token
  base::SystemClock wall_;
  std::vector<pid_t> agents_;
  std::string socket_;
  std::string log_;
};

}  // namespace ekco::agent::testing
