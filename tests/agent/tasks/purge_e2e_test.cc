// The end-to-end proof of the dead-node controllers (issue 7): ekco-kubesim in-process plus a
// real 3-member etcd 3.4 cluster with TLS on 127.0.0.11-13 (tests/fakes/etcd_cluster.h), whose
// peer URLs match the control-plane Nodes' InternalIPs:
//   A. a real `ekco agent` (leader) clears the stuck pods of a dead control-plane node within 1 s
//      of the threshold, then purges it end to end: Rook (CephCluster entry, OSD Deployments,
//      `ceph` commands in the tools pod), kubeadm-config, the etcd member, the Node;
//   B. guards: a dry-run agent and `ekco purge-node --dry-run` change nothing; a live etcd
//      member is never removed automatically;
//   C. a purge stopped after step 2 (lost the Lease) and resumed by a new leader finishes without
//      repeating the damage.
// The agents run as the ServiceAccount kurl/ekco, under exactly the RBAC rules of deploy/ and
// deploy-rook-ceph/ (kubesim enforces them): A also proves that no call the agent made was
// forbidden and that every rule granted was used (least privilege, both ways).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "agent/serve/health_server.h"
#include "agent/tasks/purge.h"
#include "base/clock.h"
#include "etcd/member.h"
#include "etcd/removal.h"
#include "hostfs/local_host_fs.h"
#include "kube/curl_transport.h"
#include "kube/exec.h"
#include "kube/rest_client.h"
#include "kube/timestamp.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/fakes/etcd_cluster.h"
#include "tests/kubesim/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kDead = 2;  // cp-3, etcd member 127.0.0.13
constexpr const char* kToken = "ekco-e2e-token";
constexpr const char* kServiceAccount = "system:serviceaccount:kurl:ekco";

// "verb resource[/subresource][.group]": what an RBAC rule grants and a request needs.
std::string permission(const std::string& verb, const std::string& group,
                       const std::string& resource) {
  return verb + " " + resource + (group.empty() ? "" : "." + group);
}

std::string stamp(base::WallTime t) { return kube::formatRfc3339(t); }

json node(const std::string& name, const std::string& ip, bool control_plane) {
  json labels = {{"kubernetes.io/hostname", name}};
  if (control_plane) labels["node-role.kubernetes.io/control-plane"] = "";
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", json::object()},
          {"status",
           {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
            {"addresses", {{{"type", "InternalIP"}, {"address", ip}}}}}}};
}

json osdDeployment(const std::string& id, const std::string& host) {
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
const std::vector<std::pair<std::string, std::string>> kStuck = {
    {"default", "web-7d9f-cp3"},
    {"rook-ceph", "rook-ceph-osd-3-5c8d"},
    {"kube-system", "kube-proxy-x3"}};

std::vector<json> clusterObjects() {
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

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

class PurgeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = etcd_.start();
    ASSERT_TRUE(started) << started.error().message();
    std::vector<json> objects = clusterObjects();
    for (const char* dir : {"/deploy", "/deploy-rook-ceph", "/deploy-monitoring"}) {
      auto loaded = kubesim::loadManifestDir(EKCO_SOURCE_DIR + std::string(dir));
      ASSERT_TRUE(loaded) << loaded.error().message();
      objects.insert(objects.end(), loaded->begin(), loaded->end());
    }
    auto server = kubesim::Server::start(
        {.out_dir = dir_.path() + "/sim",
         .objects = std::move(objects),
         .tokens = {{.token = kToken, .user = kServiceAccount, .groups = {}}}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    sa_kubeconfig_ = dir_.path() + "/sa.kubeconfig";
    auto written = server_->writeTokenKubeconfig(sa_kubeconfig_, kToken);
    ASSERT_TRUE(written) << written.error().message();
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
    for (const auto& [ns, name] : kStuck) {
      json p = kubesim::runningPodObject(ns, name, "cp-3");
      p["metadata"]["deletionTimestamp"] = stamp(t);
      p["metadata"]["deletionGracePeriodSeconds"] = 30;
      EXPECT_TRUE(server_->put(p));
    }
    EXPECT_TRUE(server_->put(kubesim::unreachableNode(node("cp-3", "127.0.0.13", true), stamp(t))));
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
  // How many times each command ran through pods/exec (as one string).
  std::map<std::string, int> execCounts(std::string* pods = nullptr) {
    std::map<std::string, int> counts;
    for (const auto& e : server_->execLog()) {
      ++counts[joined(e.command)];
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

TEST_F(PurgeE2eTest, ADeadControlPlaneNodeIsClearedThenPurgedEndToEnd) {
  ASSERT_NO_FATAL_FAILURE(startAgent());
  const std::string cp3_id = [&] {
    auto members = etcd_.client().listMembers();
    EXPECT_TRUE(members);
    for (const auto& m : members ? *members : std::vector<etcd::Member>{}) {
      if (m.name == "cp-3") return etcd::formatMemberId(m.id);
    }
    return std::string();
  }();
  ASSERT_FALSE(cp3_id.empty());

  // cp-3 dies: its etcd member is SIGKILLed, the node controller marks it unreachable.
  const base::WallTime t = killNodeCp3(/*kill_etcd=*/true);
  const base::WallTime threshold = t + seconds(3);  // node_unreachable_toleration
  base::WallTime cleared_at{};
  bool cleared = false;
  while (wall_.wallNow() < threshold + seconds(10)) {
    cleared = std::none_of(kStuck.begin(), kStuck.end(), [&](const auto& p) {
      return server_->get("pods", p.first, p.second).has_value();
    });
    if (cleared) {
      cleared_at = wall_.wallNow();
      break;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_TRUE(cleared) << agentLog();
  const auto latency = std::chrono::duration_cast<milliseconds>(cleared_at - threshold);
  std::cerr << "[e2e] clear reaction latency (threshold -> last stuck pod on cp-3 gone): "
            << latency.count() << " ms\n";
  EXPECT_GE(latency.count(), 0) << "cleared before the threshold";
  EXPECT_LT(latency, seconds(1)) << agentLog();
  EXPECT_TRUE(server_->get("pods", "kube-system", "kube-apiserver-cp-1"));

  // Then the purge, end to end (etcd may refuse for a moment while the survivors elect).
  const auto purge_start = std::chrono::steady_clock::now();
  ASSERT_TRUE(testing::eventually([&] { return !server_->get("nodes", "", "cp-3"); }, seconds(90)))
      << "cp-3 was not purged; /status: " << status().dump() << "\n"
      << agentLog();
  std::cerr << "[e2e] purge done " << fakes::EtcdCluster::secondsSince(purge_start)
            << " s after the clear\n";

  const std::string listed = memberList(0);
  EXPECT_EQ(std::count(listed.begin(), listed.end(), '\n'), 2) << listed;
  EXPECT_THAT(listed, Not(HasSubstr("cp-3")));
  EXPECT_THAT(listed, Not(HasSubstr(cp3_id)));
  EXPECT_THAT(listed, HasSubstr("cp-1"));
  EXPECT_THAT(listed, HasSubstr("cp-2"));
  EXPECT_THAT(clusterStatus(), Not(HasSubstr("cp-3")));
  EXPECT_THAT(clusterStatus(), Not(HasSubstr("127.0.0.13")));
  EXPECT_THAT(clusterStatus(), HasSubstr("cp-2"));
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"cp-1", "cp-2"}));
  EXPECT_FALSE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-3"));
  EXPECT_FALSE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-12"));
  EXPECT_TRUE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-0"));
  std::string pods;
  auto counts = execCounts(&pods);
  for (const char* id : {"3", "12"}) {
    EXPECT_GE(counts[std::string("ceph osd down ") + id], 1) << id;
    EXPECT_EQ(counts[std::string("ceph osd purge ") + id + " --yes-i-really-mean-it"], 1) << id;
  }
  EXPECT_GE(counts["ceph osd crush rm cp-3"], 1);
  EXPECT_EQ(counts.count("ceph osd purge 0 --yes-i-really-mean-it"), 0u);
  EXPECT_THAT(pods, HasSubstr("rook-ceph/rook-ceph-tools-6b4f"));
  EXPECT_THAT(pods, Not(HasSubstr("rook-ceph/rook-ceph-osd")));
  for (const auto& [cmd, n] : counts) std::cerr << "[exec] " << n << "x " << cmd << "\n";

  ASSERT_TRUE(testing::eventually(
      [&] {
        auto reasons = eventReasons("cp-3");
        return std::count(reasons.begin(), reasons.end(), "PurgeEtcdMember") == 1;
      },
      seconds(10)));
  const auto reasons = eventReasons("cp-3");
  for (const char* r : {"PurgeRook", "PurgeKubeadm", "PurgeEtcdMember"}) {
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), r), reasons.end()) << r;
  }
  for (const auto& [ns, name] : kStuck) {
    auto forced = eventReasons(name);
    EXPECT_NE(std::find(forced.begin(), forced.end(), "ForceDeleted"), forced.end()) << name;
  }
  // /status: the purge is in the history, the last entry without an error.
  json s = status();
  ASSERT_TRUE(s.is_object());
  const json& history = s["purge_dead_nodes"]["history"];
  ASSERT_FALSE(history.empty()) << s.dump();
  EXPECT_EQ(history.back()["node"], "cp-3");
  EXPECT_FALSE(history.back().contains("error")) << history.dump();
  for (const json& h : history) std::cerr << "[history] " << h.dump() << "\n";

  // Least privilege, both ways: no request of the agent was denied, and every permission the
  // RBAC rules grant was used by it in this run.
  std::set<std::string> used;
  for (const auto& r : server_->requestLog()) {
    if (r.user != kServiceAccount || r.resource.empty()) continue;
    const std::string resource = r.resource + (r.subresource.empty() ? "" : "/" + r.subresource);
    used.insert(permission(r.verb, r.api_group, resource));
    EXPECT_TRUE(r.allowed) << "forbidden: " << r.verb << " " << r.path;
  }
  std::set<std::string> granted;
  for (const char* file : {"/deploy/10-rbac.yaml", "/deploy-rook-ceph/rbac.yaml"}) {
    auto objects =
        kubesim::parseObjects(testing::readWholeFile(EKCO_SOURCE_DIR + std::string(file)));
    ASSERT_TRUE(objects);
    for (const json& o : *objects) {
      if (o["kind"] != "Role" && o["kind"] != "ClusterRole") continue;
      for (const json& rule : o["rules"]) {
        for (const json& g : rule["apiGroups"]) {
          for (const json& res : rule["resources"]) {
            for (const json& v : rule["verbs"]) {
              granted.insert(
                  permission(v.get<std::string>(), g.get<std::string>(), res.get<std::string>()));
            }
          }
        }
      }
    }
  }
  // Kubernetes before 1.31 authorizes a WebSocket exec as "get", kubesim as 1.31+ ("create").
  used.insert("get pods/exec");
  for (const auto& p : granted) {
    EXPECT_TRUE(used.contains(p)) << "granted but never used: " << p;
  }
  for (const auto& p : used) std::cerr << "[rbac] used: " << p << "\n";
}

TEST_F(PurgeE2eTest, DryRunAndGuardsChangeNothingAndALiveMemberIsNeverRemoved) {
  // Every member alive: only the Node looks dead (a kubelet down, an API partition).
  ASSERT_NO_FATAL_FAILURE(startAgent({"--dry-run"}));
  killNodeCp3(/*kill_etcd=*/false);
  ASSERT_TRUE(testing::eventually(
      [&] {
        json s = status();
        return s.is_object() && s["purge_dead_nodes"].is_object() &&
               !s["purge_dead_nodes"]["history"].empty();
      },
      seconds(30)))
      << agentLog();
  json s = status();
  const json last = s["purge_dead_nodes"]["history"].back();
  std::cerr << "[dry-run agent] " << last.dump() << "\n";
  EXPECT_EQ(last["node"], "cp-3");
  EXPECT_EQ(last["dry_run"], true);
  EXPECT_THAT(last.value("error", ""), HasSubstr("is healthy: a live member is never removed"));

  // `ekco purge-node cp-3 --dry-run --yes`: the plan, names the member and its endpoint.
  base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  base::ProcessRequest request;
  request.argv = {EKCO_BIN,
                  "purge-node",
                  "cp-3",
                  "--dry-run",
                  "--yes",
                  "--config",
                  writeConfig("cli.yaml"),
                  "--kubeconfig",
                  server_->kubeconfigPath(),
                  "--host-root",
                  etcd_.hostRoot(),
                  "--node-name",
                  "cp-1"};
  request.timeout = seconds(60);
  auto ran = runner.run(request);
  ASSERT_TRUE(ran) << ran.error().message();
  std::cerr << "[purge-node --dry-run]\n" << ran->stdout_data << ran->stderr_data;
  EXPECT_EQ(ran->exit_code, 0) << ran->stderr_data;
  std::string cp3_id;
  auto members = etcd_.client().listMembers();
  ASSERT_TRUE(members);
  for (const auto& m : *members) {
    if (m.name == "cp-3") cp3_id = etcd::formatMemberId(m.id);
  }
  EXPECT_THAT(ran->stdout_data, HasSubstr("would remove etcd member cp-3 (" + cp3_id + ")"));
  EXPECT_THAT(ran->stdout_data, HasSubstr("https://127.0.0.13:2380"));
  EXPECT_THAT(ran->stdout_data,
              HasSubstr("would remove cp-3 (127.0.0.13) from kube-system/kubeadm-config"));
  EXPECT_THAT(ran->stdout_data, HasSubstr("would run `ceph osd purge 12 --yes-i-really-mean-it`"));
  EXPECT_THAT(ran->stdout_data, HasSubstr("would delete node cp-3"));
  EXPECT_THAT(ran->stdout_data, HasSubstr("Dry run: nothing was changed."));

  // Nothing changed anywhere.
  EXPECT_EQ(etcdMemberLines(), 3);
  EXPECT_TRUE(server_->get("nodes", "", "cp-3"));
  EXPECT_EQ(clusterStatus(), kClusterStatus);
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"cp-1", "cp-2", "cp-3"}));
  EXPECT_TRUE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-3"));
  EXPECT_TRUE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-12"));
  EXPECT_TRUE(server_->execLog().empty());
  for (const auto& [ns, name] : kStuck) EXPECT_TRUE(server_->get("pods", ns, name)) << name;
  EXPECT_FALSE((*server_->get("nodes", "", "cp-3"))["metadata"].contains("annotations"));

  // The guard of the manual purge: with cp-3 Ready again and 3 ready masters at the minimum.
  request.argv = {EKCO_BIN,
                  "purge-node",
                  "cp-3",
                  "--yes",
                  "--config",
                  writeConfig("cli.yaml"),
                  "--min_ready_master_nodes",
                  "3",
                  "--kubeconfig",
                  server_->kubeconfigPath(),
                  "--host-root",
                  etcd_.hostRoot(),
                  "--node-name",
                  "cp-1"};
  // (the agent sees it Ready again too: nothing to hold back)
  ASSERT_TRUE(server_->put(node("cp-3", "127.0.0.13", true)));
  ran = runner.run(request);
  ASSERT_TRUE(ran) << ran.error().message();
  EXPECT_EQ(ran->exit_code, 1);
  EXPECT_THAT(ran->stderr_data, HasSubstr("cannot purge master: 3 ready masters"));
  EXPECT_TRUE(server_->get("nodes", "", "cp-3"));
  EXPECT_EQ(etcdMemberLines(), 3);
  EXPECT_TRUE(server_->execLog().empty());
}

TEST_F(PurgeE2eTest, AnInterruptedPurgeIsResumedWithoutRepeatingDamage) {
  killNodeCp3(/*kill_etcd=*/true);
  auto host = hostfs::LocalHostFs::open(etcd_.hostRoot(), wall_);
  ASSERT_TRUE(host);
  // One "leader" each: its own API connection, exec and etcd clients.
  struct Leader {
    std::unique_ptr<kube::CurlTransport> transport;
    std::unique_ptr<kube::RestClient> client;
    std::unique_ptr<kube::WebSocketExecutor> exec;
  };
  auto leader = [&] {
    kube::Connection conn{.server = server_->url(),
                          .ca_pem = server_->caPem(),
                          .client_cert_pem = server_->clientCertPem(),
                          .client_key_pem = server_->clientKeyPem()};
    Leader l;
    auto transport = kube::CurlTransport::create(conn, nullptr, wall_, {});
    EXPECT_TRUE(transport);
    l.transport = std::move(*transport);
    l.client = std::make_unique<kube::RestClient>(*l.transport, wall_, kube::RestClientOptions{});
    l.exec = std::make_unique<kube::WebSocketExecutor>(conn);
    return l;
  };
  std::vector<std::string> events;
  auto record = [&](const std::string& reason, const std::string&) { events.push_back(reason); };

  // The first leader loses its Lease at the third check: after Rook and kubeadm-config.
  // Its pre-flight of the etcd step may find the survivors without a leader for a moment
  // (unavailable, nothing touched): it tries again, as the controller's backoff would.
  Leader first = leader();
  base::Result<PurgeReport> stopped = base::Error("not run", base::ErrorCode::kUnknown);
  const auto first_start = std::chrono::steady_clock::now();
  while (fakes::EtcdCluster::secondsSince(first_start) < 60) {
    int checks = 0;
    stopped = purgeNode(
        {.client = *first.client, .exec = *first.exec, .fs = **host, .clock = wall_}, "cp-3",
        {.maintain_rook_storage_nodes = true,
         .may_continue = [&] { return ++checks < 3; },
         .event = record});
    if (stopped || stopped.error().code() != base::ErrorCode::kUnavailable) break;
    EXPECT_TRUE(events.empty()) << "a refused pre-flight touched something";
    std::cerr << "[pre-flight retry] " << stopped.error().message() << "\n";
    std::this_thread::sleep_for(milliseconds(500));
  }
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code(), base::ErrorCode::kCancelled) << stopped.error().message();
  EXPECT_EQ(events, (std::vector<std::string>{"PurgeRook", "PurgeKubeadm"}));
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"cp-1", "cp-2"}));
  EXPECT_THAT(clusterStatus(), Not(HasSubstr("cp-3")));
  EXPECT_FALSE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-12"));
  EXPECT_EQ(etcdMemberLines(), 3);  // not yet
  auto cp3 = server_->get("nodes", "", "cp-3");
  ASSERT_TRUE(cp3);
  EXPECT_EQ((*cp3)["metadata"]["annotations"].value(std::string(kPurgeStepAnnotation), ""),
            "kubeadm");
  const auto after_first = execCounts();

  // A new leader resumes. etcd may answer "unavailable" while the survivors elect a leader:
  // the controller retries with a backoff, so does this.
  Leader second = leader();
  base::Result<PurgeReport> resumed = base::Error("not run", base::ErrorCode::kUnknown);
  int attempts = 0;
  const auto start = std::chrono::steady_clock::now();
  while (fakes::EtcdCluster::secondsSince(start) < 60) {
    ++attempts;
    resumed = purgeNode(
        {.client = *second.client, .exec = *second.exec, .fs = **host, .clock = wall_}, "cp-3",
        {.maintain_rook_storage_nodes = true,
         .may_continue = [] { return true; },
         .event = record});
    if (resumed) break;
    std::cerr << "[resume retry] " << resumed.error().message() << "\n";
    std::this_thread::sleep_for(milliseconds(500));
  }
  ASSERT_TRUE(resumed) << resumed.error().message() << "\n" << etcd_.logs();
  std::cerr << "[resume] " << attempts << " attempt(s):\n";
  for (const auto& a : resumed->actions) std::cerr << "  " << a << "\n";
  EXPECT_TRUE(resumed->node_deleted);
  EXPECT_TRUE(resumed->warnings.empty()) << joined(resumed->warnings);
  EXPECT_FALSE(server_->get("nodes", "", "cp-3"));
  EXPECT_EQ(etcdMemberLines(), 2);
  EXPECT_THAT(memberList(1), Not(HasSubstr("cp-3")));

  // No damage repeated: each OSD purged once (by the first leader), the etcd member removed once.
  auto counts = execCounts();
  for (const auto& [cmd, n] : counts) std::cerr << "[exec] " << n << "x " << cmd << "\n";
  for (const char* id : {"3", "12"}) {
    const std::string purge = std::string("ceph osd purge ") + id + " --yes-i-really-mean-it";
    EXPECT_EQ(counts[purge], 1) << purge;
    EXPECT_EQ(counts[std::string("ceph osd down ") + id], 1) << id;
  }
  EXPECT_EQ(after_first.at("ceph osd crush rm cp-3"), 1);
  EXPECT_EQ(std::count(events.begin(), events.end(), "PurgeEtcdMember"), 1);
  EXPECT_EQ(std::count(events.begin(), events.end(), "PurgeKubeadm"), 1);

  // A third run (another leader late to the party): nothing left, nothing done.
  auto again =
      purgeNode({.client = *second.client, .exec = *second.exec, .fs = **host, .clock = wall_},
                "cp-3", {.maintain_rook_storage_nodes = true});
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_FALSE(again->node_deleted);
  EXPECT_EQ(etcdMemberLines(), 2);
  EXPECT_EQ(std::count(events.begin(), events.end(), "PurgeEtcdMember"), 1);
  EXPECT_EQ(execCounts()["ceph osd purge 12 --yes-i-really-mean-it"], 1);
}

}  // namespace
}  // namespace ekco::agent
