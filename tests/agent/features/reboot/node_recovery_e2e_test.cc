// Fast recovery after a planned shutdown, end to end (issue 20): a real `ekco agent` (the leader,
// on node-a), the real `ekco shutdown` / `ekco startup` commands with a host root per node, and
// ekco-kubesim simulating the kubelets' heartbeats, the node lifecycle controller, the taint
// manager, the pod GC, the attach-detach controller and a StatefulSet with a volume
// (tests/kubesim/controllers/node_lifecycle.h), every Kubernetes timing scaled by kScale (40 s of
// node-monitor-grace-period → 4 s). The StatefulSet lives in a namespace ekco shutdown leaves
// alone (shutdown_excluded_namespaces, as the storage providers' are), so its pod is still on the
// node when the node goes silent: what the out-of-service taint is for.
//
//   - With the beacon: the pod is gone from the node and running on another one (its volume
//     attached there) in under 60 s × kScale of the node going silent; `ekco status` lists the
//     node as tainted; the node boots (a new boot id), `ekco startup` removes ekco's taint and
//     the beacon and uncordons.
//   - Without the beacon: the node is never tainted out-of-service; the pod waits for the
//     Kubernetes path (the taint manager's 300 s, clear-nodes, the attach-detach controller's
//     6 minutes).
//   - A node that comes back without rebooting (the same boot id): ekco's taint stays until its
//     kubelet reports Ready, then the leader removes it and logs a partition.
//   - A person's out-of-service taint is never removed.
//   - Kubernetes 1.27: no taint; the leader force-deletes the node's pods instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

constexpr double kScale = 0.1;
const std::string kBootA = "0a0a0a0a-0000-4000-8000-00000000000a";
const std::string kBootB1 = "0b0b0b0b-0000-4000-8000-0000000000b1";
const std::string kBootB2 = "0b0b0b0b-0000-4000-8000-0000000000b2";
const std::string kBootC = "0c0c0c0c-0000-4000-8000-00000000000c";

json nodeJson(const std::string& name, bool unschedulable = false) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
            {"spec", json::object()},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (unschedulable) n["spec"]["unschedulable"] = true;
  return n;
}

std::vector<json> clusterObjects() {
  std::vector<json> objects = {
      kubesim::namespaceObject("kurl"), kubesim::namespaceObject("storage"),
      nodeJson("node-a", /*unschedulable=*/true),  // the leader's node takes no workload
      nodeJson("node-b"), nodeJson("node-c")};
  for (json& o : kubesim::statefulSetWithVolume("storage", "db", 3)) objects.push_back(o);
  return objects;
}

class NodeRecoveryE2eTest : public ::testing::Test {
 protected:
  void start(int minor_version = 32) {
    std::string tmpl = (fs::temp_directory_path() / "ekco-recovery-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto server =
        kubesim::Server::start({.out_dir = (dir_ / "sim").string(),
                                .objects = clusterObjects(),
                                .kubelet_interval = milliseconds(50),
                                .minor_version = minor_version,
                                .controllers = kubesim::ClusterControllersOptions::scaled(kScale)});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    server_->nodeLifecycle().startKubelet("node-a", kBootA);
    server_->nodeLifecycle().startKubelet("node-b", kBootB1);
    server_->nodeLifecycle().startKubelet("node-c", kBootC);
    for (const auto& [node, boot] :
         {std::pair{"node-a", kBootA}, std::pair{"node-b", kBootB1}, std::pair{"node-c", kBootC}}) {
      const fs::path root = dir_ / node;
      fs::create_directories(root / "etc/kubernetes");
      fs::create_directories(root / "proc/sys/kernel/random");
      std::ofstream(root / "etc/kubernetes/kubelet.conf") << "# joined\n";
      std::ofstream(root / "proc/mounts") << "/dev/sda1 / ext4 rw 0 0\n";
      writeBootId(node, boot);
    }
    // Every duration of the product scaled like the cluster's (5m → 30s, 30s → 3s, 15s →
    // 1.5s); leader election short so the test starts fast.
    std::ofstream(dir_ / "config.yaml") << "leader_election_lease_duration: 3s\n"
                                           "leader_election_renew_deadline: 2s\n"
                                           "leader_election_retry_period: 500ms\n"
                                           "node_unreachable_toleration: 30s\n"
                                           "clear_pod_deletion_grace: 3s\n"
                                           "shutdown_out_of_service_grace: 1500ms\n"
                                           "shutdown_excluded_namespaces: [kube-system, storage]\n"
                                           "shutdown_unmount_timeout: 5s\n"
                                           "startup_api_timeout: 5s\n";
    ASSERT_TRUE(testing::eventually([&] { return dbOn() == "node-b" && dbRunning(); }, seconds(10)))
        << "the StatefulSet's pod never ran on node-b";
    log_ = (dir_ / "agent.log").string();
    socket_ = (dir_ / "a.sock").string();
    agent_ =
        testing::spawnLogged({EKCO_BIN, "agent", "--config", (dir_ / "config.yaml").string(),
                              "--kubeconfig", server_->kubeconfigPath(), "--node-name", "node-a",
                              "--host-root", (dir_ / "node-a").string(), "--socket", socket_},
                             log_);
    ASSERT_GT(agent_, 0);
    ASSERT_TRUE(testing::eventually(
        [&] {
          json s = status();
          return s.is_object() && s.value("is_leader", false) && s["node_recovery"].is_object() &&
                 s["node_recovery"].value("synced", false) && s["clear_nodes"].is_object() &&
                 s["clear_nodes"].value("synced", false);
        },
        seconds(30)))
        << testing::readWholeFile(log_);
  }

  void TearDown() override {
    testing::killAndReap(agent_);
    if (server_) server_->stop();
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  void writeBootId(const std::string& node, const std::string& id) {
    std::ofstream(dir_ / node / "proc/sys/kernel/random/boot_id") << id << "\n";
  }

  // `ekco shutdown|startup` for `node` as a process; its exit code (its log goes to the test's).
  int command(const std::string& verb, const std::string& node) {
    const std::string log = (dir_ / (verb + "-" + node + ".log")).string();
    const pid_t pid = testing::spawnLogged(
        {EKCO_BIN, verb, "--config", (dir_ / "config.yaml").string(), "--kubeconfig",
         server_->kubeconfigPath(), "--node-name", node, "--host-root", (dir_ / node).string()},
        log);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code != 0) std::cerr << testing::readWholeFile(log);
    return code;
  }

  json status() {
    auto reply = queryHealthSocket(socket_, "/status", milliseconds(2000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  }
  json node(const std::string& name) { return server_->get("nodes", "", name).value_or(json()); }
  bool hasTaint(const std::string& name, const std::string& key) {
    for (const json& t : node(name)["spec"].value("taints", json::array())) {
      if (t.value("key", "") == key) return true;
    }
    return false;
  }
  bool outOfService(const std::string& name) {
    return hasTaint(name, "node.kubernetes.io/out-of-service");
  }
  std::string annotation(const std::string& name, const std::string& key) {
    return node(name)["metadata"].value("annotations", json::object()).value(key, "");
  }
  std::optional<json> db() { return server_->get("pods", "storage", "db-0"); }
  std::string dbOn() {
    auto p = db();
    return p ? (*p)["spec"].value("nodeName", "") : "";
  }
  bool dbRunning() {
    auto p = db();
    return p && !(*p)["metadata"].contains("deletionTimestamp") &&
           (*p)["status"].value("phase", "") == "Running";
  }
  std::string dbUid() {
    auto p = db();
    return p ? (*p)["metadata"].value("uid", "") : "";
  }
  int events(const std::string& reason) {
    auto list = server_->store().list(*server_->store().findQualified("events"), "default", {});
    int n = 0;
    for (const json& e : list.body["items"]) n += e.value("reason", "") == reason ? 1 : 0;
    return n;
  }

  fs::path dir_;
  std::unique_ptr<kubesim::Server> server_;
  pid_t agent_ = -1;
  std::string log_;
  std::string socket_;
};

TEST_F(NodeRecoveryE2eTest, APlannedShutdownMovesTheStatefulPodInUnderAMinuteAndTheRebootUndoesIt) {
  start();
  ASSERT_EQ(command("shutdown", "node-b"), 0);
  EXPECT_EQ(annotation("node-b", "ekco.kurl.sh/shutdown-boot-id"), kBootB1);
  EXPECT_TRUE(node("node-b")["spec"].value("unschedulable", false));
  ASSERT_EQ(dbOn(), "node-b");  // its namespace is excluded: the drain left it

  // The node powers off: its kubelet goes silent.
  const std::string old_uid = dbUid();
  const auto silent = Steady::now();
  server_->nodeLifecycle().stopKubelet("node-b");
  std::optional<Steady::duration> gone_from_b;
  std::optional<Steady::duration> running_elsewhere;
  while (Steady::now() - silent < seconds(30) && !running_elsewhere) {
    if (!gone_from_b && dbUid() != old_uid) gone_from_b = Steady::now() - silent;
    if (dbOn() == "node-c" && dbRunning()) running_elsewhere = Steady::now() - silent;
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(running_elsewhere) << testing::readWholeFile(log_);
  const auto ms = [](Steady::duration d) {
    return std::chrono::duration_cast<milliseconds>(d).count();
  };
  std::cerr << "node silent -> pod gone from node-b: " << ms(*gone_from_b)
            << " ms; -> running on node-c: " << ms(*running_elsewhere) << " ms (scale " << kScale
            << "; unscaled " << ms(*running_elsewhere) / kScale / 1000 << " s)\n";
  EXPECT_LT(*running_elsewhere, milliseconds(static_cast<long>(60'000 * kScale)));
  EXPECT_TRUE(outOfService("node-b"));
  EXPECT_EQ(annotation("node-b", "ekco.kurl.sh/out-of-service-by"), "ekco");
  EXPECT_TRUE(
      testing::eventually([&] { return events("OutOfServiceTaintApplied") == 1; }, seconds(5)));
  // The volume moved with it: one attachment, on node-c.
  auto vas = server_->store().list(
      *server_->store().findQualified("volumeattachments.storage.k8s.io"), "", {});
  ASSERT_EQ(vas.body["items"].size(), 1U);
  EXPECT_EQ(vas.body["items"][0]["spec"]["nodeName"], "node-c");

  // `ekco status` on the leader lists the node, tainted, and since when.
  ASSERT_TRUE(testing::eventually(
      [&] {
        json s = status();
        if (!s.is_object() || !s["node_recovery"].is_object()) return false;
        for (const json& n : s["node_recovery"]["nodes"]) {
          if (n["node"] == "node-b" && n["state"] == "tainted" && n["since"].is_string()) {
            return true;
          }
        }
        return false;
      },
      seconds(5)));
  {
    const std::string out = (dir_ / "status.txt").string();
    const pid_t pid = testing::spawnLogged({EKCO_BIN, "status", "--socket", socket_}, out);
    ::waitpid(pid, nullptr, 0);
    const std::string text = testing::readWholeFile(out);
    EXPECT_THAT(text, HasSubstr("NODE"));
    EXPECT_THAT(text, ::testing::ContainsRegex("node-b +tainted +([0-9]+s ago|now)"));
  }

  // The node boots: a new boot id; ekco-reboot.service's start runs before the kubelet posts.
  writeBootId("node-b", kBootB2);
  ASSERT_EQ(command("startup", "node-b"), 0);
  EXPECT_FALSE(outOfService("node-b"));
  EXPECT_EQ(annotation("node-b", "ekco.kurl.sh/shutdown-at"), "");
  EXPECT_EQ(annotation("node-b", "ekco.kurl.sh/out-of-service-by"), "");
  EXPECT_FALSE(node("node-b")["spec"].value("unschedulable", false));
  server_->nodeLifecycle().startKubelet("node-b", kBootB2);
  ASSERT_TRUE(testing::eventually(
      [&] {
        json n = node("node-b");
        return n["status"]["nodeInfo"].value("bootID", "") == kBootB2 &&
               !hasTaint("node-b", "node.kubernetes.io/unreachable");
      },
      seconds(5)));
  EXPECT_FALSE(outOfService("node-b"));
  EXPECT_EQ(events("OutOfServiceTaintRemoved"), 1);
}

TEST_F(NodeRecoveryE2eTest, WithoutTheBeaconTheNodeIsNeverTaintedAndThePodWaitsForKubernetes) {
  start();
  const std::string old_uid = dbUid();
  const auto silent = Steady::now();
  server_->nodeLifecycle().stopKubelet("node-b");  // a partition, or an unplanned power loss
  // Well past the beacon path's bound: unreachable, never out of service, the pod still there.
  ASSERT_TRUE(testing::eventually(
      [&] { return hasTaint("node-b", "node.kubernetes.io/unreachable"); }, seconds(10)));
  while (Steady::now() - silent < milliseconds(static_cast<long>(120'000 * kScale))) {
    ASSERT_FALSE(outOfService("node-b")) << testing::readWholeFile(log_);
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(dbUid(), old_uid);
  EXPECT_EQ(dbOn(), "node-b");
  json s = status();
  EXPECT_TRUE(s["node_recovery"]["nodes"].empty()) << s["node_recovery"].dump();
}

TEST_F(NodeRecoveryE2eTest, ANodeBackWithoutARebootIsUntaintedOnlyOnceItsKubeletIsReady) {
  start();
  ASSERT_EQ(command("shutdown", "node-b"), 0);
  server_->nodeLifecycle().stopKubelet("node-b");  // down, but it never powers off
  ASSERT_TRUE(testing::eventually([&] { return outOfService("node-b"); }, seconds(10)))
      << testing::readWholeFile(log_);
  // Not Ready for a while: the taint stays.
  std::this_thread::sleep_for(milliseconds(static_cast<long>(20'000 * kScale)));
  EXPECT_TRUE(outOfService("node-b"));
  // The network heals: the same kubelet, the same boot.
  server_->nodeLifecycle().startKubelet("node-b", kBootB1);
  ASSERT_TRUE(testing::eventually([&] { return !outOfService("node-b"); }, seconds(10)))
      << testing::readWholeFile(log_);
  json ready;
  const json b = node("node-b");
  for (const json& c : b["status"]["conditions"]) {
    if (c["type"] == "Ready") ready = c;
  }
  EXPECT_EQ(ready["status"], "True");
  EXPECT_EQ(annotation("node-b", "ekco.kurl.sh/shutdown-boot-id"), "");
  // Logged right after the patch the test saw.
  EXPECT_TRUE(testing::eventually(
      [&] { return testing::readWholeFile(log_).find("a partition") != std::string::npos; },
      seconds(5)))
      << testing::readWholeFile(log_);
  EXPECT_TRUE(testing::eventually([&] { return events("NodePartitionEnded") == 1; }, seconds(5)));
}

TEST_F(NodeRecoveryE2eTest, APersonsOutOfServiceTaintIsNeverRemoved) {
  start();
  ASSERT_EQ(command("shutdown", "node-c"), 0);
  server_->nodeLifecycle().stopKubelet("node-c");
  json c = node("node-c");
  c["spec"]["taints"].push_back({{"key", "node.kubernetes.io/out-of-service"},
                                 {"value", "nodeshutdown"},
                                 {"effect", "NoExecute"}});
  ASSERT_TRUE(server_->put(c));  // a person attests the shutdown before ekco does
  writeBootId("node-c", "0c0c0c0c-0000-4000-8000-0000000000c2");
  ASSERT_EQ(command("startup", "node-c"), 0);
  server_->nodeLifecycle().startKubelet("node-c", "0c0c0c0c-0000-4000-8000-0000000000c2");
  std::this_thread::sleep_for(milliseconds(static_cast<long>(60'000 * kScale)));
  EXPECT_TRUE(outOfService("node-c")) << testing::readWholeFile(log_);
  EXPECT_EQ(events("OutOfServiceTaintRemoved"), 0);
  EXPECT_EQ(events("NodePartitionEnded"), 0);
}

TEST_F(NodeRecoveryE2eTest, OnKubernetes127TheLeaderForceDeletesThePodsInstead) {
  start(/*minor_version=*/27);
  ASSERT_EQ(command("shutdown", "node-b"), 0);
  const std::string old_uid = dbUid();
  const auto silent = Steady::now();
  server_->nodeLifecycle().stopKubelet("node-b");
  ASSERT_TRUE(testing::eventually([&] { return dbUid() != old_uid; }, seconds(10)))
      << testing::readWholeFile(log_);
  EXPECT_LT(Steady::now() - silent, milliseconds(static_cast<long>(60'000 * kScale)));
  EXPECT_FALSE(outOfService("node-b"));
  EXPECT_TRUE(testing::eventually(
      [&] {
        return testing::readWholeFile(log_).find("force-deleted pod of a node shut down") !=
               std::string::npos;
      },
      seconds(5)))
      << testing::readWholeFile(log_);
}

}  // namespace
}  // namespace ekco::agent
