// The worker DaemonSet's agent as its own ServiceAccount (issue 34, item 4): a real `ekco agent`
// on worker-1 as system:serviceaccount:kurl:ekco-node with the DaemonSet's
// EKCO_LEADER_ELECTION_CANDIDATE=false, beside a control-plane agent on cp-1 as kurl/ekco,
// against ekco-kubesim enforcing the RBAC of deploy/ (token authentication, the RBAC
// authorizer's rules). Over the run — cp-1 leading, a HostJob on worker-1, cp-1 stopping and
// the cluster left without a leader — the worker:
//   - reports cp-1 as the leader, itself as no candidate, and runs only every-node controllers
//     (not the webhook server nor the add-ons' TLS secrets, even with their config on);
//   - runs the HostJob and writes its result;
//   - never creates or renews the Lease, even once it is released, and stays ready (it hears
//     from the API through its own reads of the Lease);
//   - makes not one request the rules forbid, and uses every permission they grant it (least
//     privilege, both ways, as purge_e2e_test.cc proves it for kurl/ekco).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "agent/serve/health_server.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr const char* kControlPlaneAccount = "system:serviceaccount:kurl:ekco";
constexpr const char* kWorkerAccount = "system:serviceaccount:kurl:ekco-node";

// "verb resource[/subresource][.group]".
std::string permission(const std::string& verb, const std::string& group,
                       const std::string& resource) {
  return verb + " " + resource + (group.empty() ? "" : "." + group);
}

// What the Roles and ClusterRoles bound to `account` in these manifests grant.
std::set<std::string> grantedTo(const std::string& account, const std::vector<json>& objects) {
  std::set<std::string> bound;  // "ClusterRole/x", "Role/ns/x"
  for (const json& o : objects) {
    if (o["kind"] != "RoleBinding" && o["kind"] != "ClusterRoleBinding") continue;
    for (const json& s : o["subjects"]) {
      if (s["kind"] != "ServiceAccount" ||
          "system:serviceaccount:" + s.value("namespace", "") + ":" + s.value("name", "") !=
              account) {
        continue;
      }
      const std::string kind = o["roleRef"].value("kind", "");
      bound.insert(kind == "Role" ? "Role/" + o["metadata"].value("namespace", "") + "/" +
                                        o["roleRef"].value("name", "")
                                  : "ClusterRole/" + o["roleRef"].value("name", ""));
    }
  }
  std::set<std::string> granted;
  for (const json& o : objects) {
    const std::string key = o["kind"] == "Role" ? "Role/" + o["metadata"].value("namespace", "") +
                                                      "/" + o["metadata"].value("name", "")
                                                : "ClusterRole/" + o["metadata"].value("name", "");
    if ((o["kind"] != "Role" && o["kind"] != "ClusterRole") || !bound.contains(key)) continue;
    for (const json& rule : o["rules"]) {
      for (const json& g : rule["apiGroups"]) {
        for (const json& r : rule["resources"]) {
          for (const json& v : rule["verbs"]) {
            granted.insert(
                permission(v.get<std::string>(), g.get<std::string>(), r.get<std::string>()));
          }
        }
      }
    }
  }
  return granted;
}

class AgentWorkerRbacTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-worker-rbac-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto deploy = kubesim::loadManifestDir(EKCO_SOURCE_DIR + std::string("/deploy"));
    ASSERT_TRUE(deploy) << deploy.error().message();
    deploy_ = *deploy;
    std::vector<json> objects = {
        kubesim::readyNodeObject("cp-1", "127.0.0.1", true),
        kubesim::readyNodeObject("worker-1", "127.0.0.2", false),
        kubesim::kubernetesEndpointSlice("kubernetes", {"127.0.0.1"}, 6443)};
    objects.insert(objects.end(), deploy_.begin(), deploy_.end());
    auto server = kubesim::Server::start(
        {.out_dir = (dir_ / "sim").string(),
         .objects = std::move(objects),
         .tokens = {{.token = "cp-token", .user = kControlPlaneAccount, .groups = {}},
                    {.token = "node-token", .user = kWorkerAccount, .groups = {}}}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    for (const char* account : {"cp", "node"}) {
      auto written =
          server_->writeTokenKubeconfig((dir_ / (std::string(account) + ".kubeconfig")).string(),
                                        std::string(account) + "-token");
      ASSERT_TRUE(written) << written.error().message();
    }
  }

  void TearDown() override {
    for (pid_t pid : {cp_, worker_}) testing::killAndReap(pid);
    server_.reset();
    fs::remove_all(dir_);
  }

  // A real agent on `node` with the account's token; `extra` config lines after the common ones.
  pid_t startAgent(const std::string& node, const std::string& account, const std::string& extra,
                   std::vector<std::string> env = {}) {
    const fs::path root = dir_ / ("root-" + node);
    fs::create_directories(root / "etc/kubernetes");
    std::ofstream(root / "etc/kubernetes/kubelet.conf") << "# joined\n";
    const fs::path config = dir_ / (node + ".yaml");
    std::ofstream(config) << "leader_election_lease_duration: 3s\n"
                             "leader_election_renew_deadline: 2s\n"
                             "leader_election_retry_period: 500ms\n"
                             "enable_host_jobs: true\n"
                             "enable_internal_load_balancer: true\n"
                             "disable_reboot_service: true\n"
                          << extra;
    return testing::spawnLogged(
        {EKCO_BIN, "agent", "--config", config.string(), "--kubeconfig",
         (dir_ / (account + ".kubeconfig")).string(), "--node-name", node, "--host-root",
         root.string(), "--socket", (dir_ / (node + ".sock")).string()},
        log(node), std::move(env));
  }

  std::string log(const std::string& node) const { return (dir_ / (node + ".log")).string(); }
  json status(const std::string& node) {
    auto reply =
        queryHealthSocket((dir_ / (node + ".sock")).string(), "/status", milliseconds(3000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  }

  fs::path dir_;
  std::vector<json> deploy_;
  std::unique_ptr<kubesim::Server> server_;
  pid_t cp_ = -1;
  pid_t worker_ = -1;
};

TEST_F(AgentWorkerRbacTest, TheWorkerAccountNeverLeadsAndNeedsNothingItIsNotGranted) {
  // (1) cp-1 leads, as the control-plane DaemonSet's agent.
  cp_ = startAgent("cp-1", "cp", "");
  ASSERT_GT(cp_, 0);
  ASSERT_TRUE(testing::eventually(
      [&] {
        json s = status("cp-1");
        return s.is_object() && s.value("is_leader", false) && s.value("ready", false);
      },
      seconds(30)))
      << testing::readWholeFile(log("cp-1"));

  // (2) The worker, configured as the ekco-node DaemonSet runs it, with the webhook's and the
  // add-on certificates' configuration on: neither may run on a worker.
  worker_ = startAgent("worker-1", "node", "pod_image_overrides: [\"a:1=b:1\"]\n",
                       {"EKCO_LEADER_ELECTION_CANDIDATE=false"});
  ASSERT_GT(worker_, 0);
  json s;
  ASSERT_TRUE(testing::eventually(
      [&] {
        s = status("worker-1");
        return s.is_object() && s.value("ready", false) && s.value("leader", "") == "cp-1";
      },
      seconds(30)))
      << s.dump() << "\n"
      << testing::readWholeFile(log("worker-1"));
  EXPECT_EQ(s["leader_candidate"], false);
  EXPECT_EQ(s["is_leader"], false);
  EXPECT_TRUE(s["webhook_server"].is_null()) << s["webhook_server"].dump();
  EXPECT_TRUE(s["cluster_certificates"].is_null());
  EXPECT_TRUE(s["clear_nodes"].is_null());
  std::set<std::string> controllers;
  for (const json& c : s["controllers"]) {
    EXPECT_EQ(c["scope"], "node") << c.dump();
    controllers.insert(c.value("name", ""));
  }
  EXPECT_TRUE(controllers.contains("host-jobs"));
  EXPECT_TRUE(controllers.contains("internal-lb"));
  EXPECT_FALSE(controllers.contains("webhook-server"));
  EXPECT_FALSE(controllers.contains("cluster-certificates"));
  EXPECT_TRUE(status("cp-1")["cluster_certificates"].is_object());

  // (3) A HostJob on the worker: it runs there and its result is written with ekco-node.
  ASSERT_TRUE(server_->put(
      {{"apiVersion", "ekco.kurl.sh/v1alpha1"},
       {"kind", "HostJob"},
       {"metadata", {{"name", "hello"}}},
       {"spec",
        {{"command", {"/bin/sh", "-c", "echo hello"}},
         {"nodeSelectorTerms",
          {{{"matchFields",
             {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"worker-1"}}}}}}}}}}}));
  json job;
  ASSERT_TRUE(testing::eventually(
      [&] {
        auto got = server_->get("hostjobs.ekco.kurl.sh", "", "hello");
        if (!got) return false;
        job = *got;
        return job.contains("status") && job["status"].value("completed", false);
      },
      seconds(30)))
      << job.dump() << "\n"
      << testing::readWholeFile(log("worker-1"));
  EXPECT_EQ(job["status"]["nodes"]["worker-1"]["phase"], "Succeeded") << job.dump();

  // (4) cp-1 stops and releases the Lease: the worker takes nothing over, and stays ready for
  // longer than any candidate's silence limit without a leader.
  ASSERT_EQ(::kill(cp_, SIGTERM), 0);
  ASSERT_EQ(::waitpid(cp_, nullptr, 0), cp_);
  cp_ = -1;
  ASSERT_TRUE(testing::eventually(
      [&] {
        s = status("worker-1");
        return s.is_object() && s["lease"].value("holder", "x").empty();
      },
      seconds(10)))
      << s.dump();
  std::this_thread::sleep_for(seconds(9));  // 3 lease durations
  s = status("worker-1");
  ASSERT_TRUE(s.is_object());
  EXPECT_TRUE(s.value("ready", false)) << s.value("ready_reason", "");
  EXPECT_EQ(s["is_leader"], false);
  auto lease = server_->get("leases.coordination.k8s.io", "kurl", "ekco-leader");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"].value("holderIdentity", "x"), "") << lease->dump();

  // (5) Least privilege, both ways, for ekco-node.
  std::set<std::string> used;
  for (const auto& r : server_->requestLog()) {
    if (r.user != kWorkerAccount || r.resource.empty()) continue;
    const std::string resource = r.resource + (r.subresource.empty() ? "" : "/" + r.subresource);
    used.insert(permission(r.verb, r.api_group, resource));
    EXPECT_TRUE(r.allowed) << "forbidden: " << r.verb << " " << r.path;
    if (r.resource == "leases") {
      EXPECT_TRUE(r.verb == "get" || r.verb == "list" || r.verb == "watch")
          << r.verb << " " << r.path;
    }
  }
  EXPECT_TRUE(used.contains("get leases.coordination.k8s.io"))
      << "the worker never read the Lease itself";
  const std::set<std::string> granted = grantedTo(kWorkerAccount, deploy_);
  ASSERT_FALSE(granted.empty());
  // Granted for what this run does not do: host commands run in the worker's pod read
  // ekco-config; the internal load balancer reads Endpoints only on a cluster without
  // EndpointSlices (tests/agent/runtime/caches_lb_sources_test.cc).
  for (const char* p : {"get configmaps", "list endpoints", "watch endpoints"}) used.insert(p);
  for (const auto& p : granted) {
    EXPECT_TRUE(used.contains(p)) << "granted to ekco-node but never used: " << p;
  }
  for (const auto& p : used) std::cerr << "[rbac] ekco-node used: " << p << "\n";
}

}  // namespace
}  // namespace ekco::agent
