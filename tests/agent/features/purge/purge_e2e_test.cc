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
#include <iostream>
#include <set>
#include <thread>

#include "tests/agent/features/purge/purge_e2e_fixture.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::kClusterStatus;
using testing::kDead;
using testing::kEkcoServiceAccount;
using testing::kStuck;
using testing::node;
using ::testing::Not;
using testing::permission;
using testing::PurgeE2eTest;

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
  // cp-3 removed; the Ready worker-1 appended by the leader's rook-ceph controller
  // (maintain_rook_storage_nodes appends every Ready node, as EKCO did).
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"cp-1", "cp-2", "worker-1"}));
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
    if (r.user != kEkcoServiceAccount || r.resource.empty()) continue;
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
  // The cluster's TLS secrets are read and written only on a control-plane host with the
  // cluster CA key and a secret inside the TTL, which this run has not:
  // tests/agent/features/certs/cluster_certs_test.cc makes those calls as this ServiceAccount.
  used.insert("get secrets");
  used.insert("update secrets");
  // The mirror pods are read by name only to verify a control-plane certificate renewal, which
  // this run does not make: tests/agent/features/certs/certs_renewal_test.cc
  // (CertsRenewalAsEkcoTest) makes it as this ServiceAccount.
  used.insert("get pods");
  // kotsadm HA and the storage migration state are used only with enable_ha_kotsadm /
  // enable_ha_minio, off here: tests/agent/features/minio/kotsadm_ha_test.cc and minio_ha_test.cc
  // make those calls as this ServiceAccount, with these rules enforced.
  for (const char* p : {"get statefulsets.apps", "patch statefulsets.apps", "get configmaps",
                        "update configmaps", "delete configmaps", "create configmaps",
                        // the API address change's progress (change_leader.h)
                        "patch configmaps"}) {
    used.insert(p);
  }
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
  EXPECT_THAT(cephChanges(), ::testing::ElementsAre());
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
  EXPECT_THAT(cephChanges(), ::testing::ElementsAre());
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
  EXPECT_TRUE(resumed->warnings.empty()) << fmt::format("{}", fmt::join(resumed->warnings, "; "));
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
