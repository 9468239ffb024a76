// The clear-nodes leader controller (agent/clear_nodes.h):
//   - the pure plan over tables;
//   - the controller against ekco-kubesim in-process on a ManualClock: force deletes only once
//     both thresholds have passed, requeue_after is the exact time to the next threshold, Events
//     are recorded, dry run deletes nothing, the storm guard blocks and reports, the second guard
//     (cache re-read, leader freshness) prevents a delete;
//   - randomized cluster states against the in-memory API: never a delete of a pod on a live
//     node, never during a storm, never early, never a missed one, always the exact wake-up;
//   - a real `ekco agent` against kubesim: a stuck pod on an unreachable node is gone within the
//     threshold + 1 s (the reaction latency is printed).
#include "agent/controllers/clear_nodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "base/log.h"
#include "hostfs/local_host_fs.h"
#include "kube/curl_transport.h"
#include "kube/kubeconfig.h"
#include "kube/objects.h"
#include "kube/rest_client.h"
#include "kube/timestamp.h"
#include "tests/agent/process_support.h"
#include "tests/fakes/fake_kube.h"
#include "tests/kubesim/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using base::Error;
using base::ErrorCode;
using kube::Atom;
using kube::testing::FakeKube;
using kube::testing::Verb;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

const base::WallTime kT0 = base::WallTime(seconds(1'700'000'000));

// --- records for the pure tests -----------------------------------------------------------

kube::NodeRecord nodeRecord(const std::string& name, const std::string& ready,
                            std::optional<base::WallTime> taint_added = std::nullopt,
                            std::optional<base::WallTime> ready_since = std::nullopt) {
  kube::NodeRecord n{.name = Atom(name)};
  n.conditions.push_back(
      {.type = Atom("Ready"), .status = Atom(ready), .last_transition_time = ready_since});
  if (taint_added) {
    n.taints.push_back(
        {.key = Atom(kTaintUnreachable), .effect = Atom("NoExecute"), .time_added = taint_added});
  }
  return n;
}

kube::PodRecord podRecord(const std::string& name, const std::string& node,
                          std::optional<base::WallTime> deleted = std::nullopt,
                          std::optional<std::int64_t> grace = 30) {
  return {.ns = Atom("default"),
          .name = name,
          .uid = "uid-" + name,
          .node_name = Atom(node),
          .phase = Atom("Running"),
          .deletion_timestamp = deleted,
          .deletion_grace_period_seconds = deleted ? grace : std::nullopt};
}

std::vector<std::string> names(const std::vector<PodToClear>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.pod.name);
  return out;
}

TEST(ClearPlan, APodDeletedInYear9999IsNotYetDueAndNothingOverflows) {
  // Defect: deletionTimestamp 9999-12-31 overflowed into 1816 and the pod was force-deleted
  // ("terminating since 1816"). Parsed as the informer parses it.
  const ClearRules rules{.node_unreachable_toleration = minutes(5),
                         .pod_deletion_grace = std::chrono::hours(2562047),
                         .storm_guard_percent = 55};
  auto far = kube::parseRfc3339("9999-12-31T23:59:59Z");
  ASSERT_TRUE(far);
  const std::vector<kube::NodeRecord> nodes = {nodeRecord("a", "True"), nodeRecord("b", "True"),
                                               nodeRecord("dead", "Unknown", kT0, kT0)};
  const std::vector<kube::PodRecord> pods = {podRecord("future", "dead", *far),
                                             podRecord("normal", "dead", kT0 - minutes(10))};
  const ClearPlan p = planClear(nodes, pods, kT0 + std::chrono::hours(24), rules);
  EXPECT_TRUE(names(p.due).empty());
  // Both saturate at the end of time, so they tie and sort by name.
  EXPECT_EQ(names(p.pending), (std::vector<std::string>{"future", "normal"}));
  ASSERT_TRUE(p.next);
  EXPECT_GT(*p.next, kT0 + std::chrono::hours(24));
  const ClearRules normal{.node_unreachable_toleration = minutes(5),
                          .pod_deletion_grace = seconds(30),
                          .storm_guard_percent = 55};
  const ClearPlan q = planClear(nodes, pods, kT0 + std::chrono::hours(24), normal);
  EXPECT_EQ(names(q.due), std::vector<std::string>{"normal"});
  EXPECT_EQ(names(q.pending), std::vector<std::string>{"future"});
}

TEST(ClearPlan, BothThresholdsMustPassAndTheNextIsTheEarliestPendingOne) {
  const ClearRules rules{.node_unreachable_toleration = minutes(5),
                         .pod_deletion_grace = seconds(30),
                         .storm_guard_percent = 55};
  const std::vector<kube::NodeRecord> nodes = {
      nodeRecord("a", "True"), nodeRecord("b", "Unknown", kT0, kT0 - seconds(40)),
      nodeRecord("c", "False"),  // not ready but reachable: the kubelet finishes its pods
      nodeRecord("d", "Unknown", std::nullopt, kT0 + minutes(1)),  // condition fallback
  };
  const std::vector<kube::PodRecord> pods = {
      podRecord("b-early", "b", kT0 - minutes(1)),       // grace long passed, node dead at +5m
      podRecord("b-late", "b", kT0 + minutes(5)),        // node dead first, grace at +5m30s
      podRecord("b-running", "b"),                       // not terminating: never
      podRecord("b-forced", "b", kT0 - minutes(10), 0),  // already force-deleted
      podRecord("a-stuck", "a", kT0 - minutes(10)),      // live node: never
      podRecord("c-stuck", "c", kT0 - minutes(10)),      // reachable node: never
      podRecord("d-stuck", "d", kT0),                    // dead at +6m
      podRecord("x-stuck", "gone", kT0 - minutes(10)),   // unknown node: never
  };
  {
    const ClearPlan p = planClear(nodes, pods, kT0 + minutes(5) - milliseconds(1), rules);
    EXPECT_TRUE(names(p.due).empty());
    EXPECT_EQ(names(p.pending), (std::vector<std::string>{"b-early", "b-late", "d-stuck"}));
    EXPECT_EQ(p.next, kT0 + minutes(5));
    EXPECT_TRUE(p.dead_nodes.empty());
    EXPECT_EQ(p.held, std::vector<std::string>{"default/b-forced"});
    EXPECT_FALSE(p.storm.active);  // 2 of 4
  }
  {
    const ClearPlan p = planClear(nodes, pods, kT0 + minutes(5), rules);
    EXPECT_EQ(names(p.due), std::vector<std::string>{"b-early"});
    EXPECT_EQ(p.next, kT0 + minutes(5) + seconds(30));
    EXPECT_EQ(p.dead_nodes, std::vector<std::string>{"b"});
    EXPECT_EQ(p.due[0].due, kT0 + minutes(5));
    EXPECT_EQ(p.due[0].node_dead_at, kT0 + minutes(5));
    EXPECT_EQ(p.due[0].grace_passed_at, kT0 - seconds(30));
  }
  {
    const ClearPlan p = planClear(nodes, pods, kT0 + minutes(6), rules);
    EXPECT_EQ(names(p.due), (std::vector<std::string>{"b-early", "b-late", "d-stuck"}));
    EXPECT_EQ(p.next, std::nullopt);
    EXPECT_EQ(p.dead_nodes, (std::vector<std::string>{"b", "d"}));
  }
  EXPECT_EQ(clearReason(planClear(nodes, pods, kT0 + minutes(6), rules).due[0], rules),
            "node b unreachable since 2023-11-14T22:13:20Z (dead after 5m); pod terminating "
            "since 2023-11-14T22:12:20Z (force-deleted after 30s)");
}

// --- against kubesim ------------------------------------------------------------------------

std::string stamp(base::WallTime t) { return kube::formatRfc3339(t); }

json nodeJson(const std::string& name, const std::string& ready,
              std::optional<base::WallTime> taint_added = std::nullopt,
              std::optional<base::WallTime> ready_since = std::nullopt) {
  json condition = {{"type", "Ready"}, {"status", ready}};
  if (ready_since) condition["lastTransitionTime"] = stamp(*ready_since);
  json spec = json::object();
  if (taint_added) {
    spec["taints"] = {{{"key", "node.kubernetes.io/unreachable"},
                       {"effect", "NoExecute"},
                       {"timeAdded", stamp(*taint_added)}},
                      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoSchedule"}}};
  }
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", spec},
          {"status", {{"conditions", {condition}}}}};
}

json podJson(const std::string& name, const std::string& node,
             std::optional<base::WallTime> deleted = std::nullopt) {
  json meta = {{"name", name}, {"namespace", "default"}};
  if (deleted) {
    meta["deletionTimestamp"] = stamp(*deleted);
    meta["deletionGracePeriodSeconds"] = 30;
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", meta},
          {"spec", {{"nodeName", node}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

class ClearNodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.setWall(kT0 + minutes(2));
    std::string tmpl = (fs::temp_directory_path() / "ekco-clear-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // The simulated kubelet stays out of the way: it would finish a terminating pod as soon as
    // its node is Ready again, racing the assertions about what the controller deleted.
    auto server = kubesim::Server::start(
        {.out_dir = dir_, .clock = &clock_, .kubelet_interval = std::chrono::hours(24)});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto process_fs = hostfs::LocalHostFs::open("/", clock_);
    ASSERT_TRUE(process_fs) << process_fs.error().message();
    process_fs_ = std::move(*process_fs);
    auto conn = kube::loadKubeconfig(*process_fs_, server_->kubeconfigPath());
    ASSERT_TRUE(conn) << conn.error().message();
    connection_ = *conn;
    auto transport = kube::CurlTransport::create(connection_, process_fs_.get(), clock_,
                                                 {.connect_timeout = seconds(5)});
    ASSERT_TRUE(transport) << transport.error().message();
    transport_ = std::move(*transport);
    client_ =
        std::make_unique<kube::RestClient>(*transport_, clock_,
                                           kube::RestClientOptions{.request_timeout = seconds(10),
                                                                   .retry = {.max_attempts = 1},
                                                                   .sleep = [](milliseconds) {},
                                                                   .random = [] { return 0.0; },
                                                                   .reporting_instance = "node-a"});
  }
  void TearDown() override {
    client_.reset();
    transport_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  void put(const json& object) { ASSERT_TRUE(server_->put(object)); }
  bool exists(const std::string& pod) { return server_->get("pods", "default", pod).has_value(); }

  // The "caches": the server's current state, projected, with optional tweaks per call (the
  // first call of a reconcile is 1, each re-check before a delete the next).
  ObservedNodes observeNodes() {
    ++node_calls_;
    ObservedNodes out{.synced = true};
    auto list = client_->list(kube::resources::kNodes, "");
    EXPECT_TRUE(list) << list.error().message();
    if (!list) return {};
    for (const json& item : (*list)["items"]) out.nodes.push_back(*kube::projectNode(item));
    if (tweak_nodes_) tweak_nodes_(out, node_calls_);
    return out;
  }
  std::vector<kube::PodRecord> observePods() {
    ++pod_calls_;
    std::vector<kube::PodRecord> out;
    auto list = client_->list(kube::resources::kPods, "");
    EXPECT_TRUE(list) << list.error().message();
    if (!list) return {};
    for (const json& item : (*list)["items"]) out.push_back(*kube::projectPod(item));
    if (tweak_pods_) tweak_pods_(out, pod_calls_);
    return out;
  }

  std::shared_ptr<ClearNodesController> controller(bool dry_run = false) {
    return std::make_shared<ClearNodesController>(
        [this] { return observeNodes(); }, [this] { return observePods(); }, *client_, clock_,
        ClearNodesOptions{.rules = {.node_unreachable_toleration = minutes(5),
                                    .pod_deletion_grace = seconds(30),
                                    .storm_guard_percent = 55},
                          .dry_run = dry_run},
        ClearNodesCallbacks{
            .is_leader_fresh = [this] { return fresh_; },
            .on_action = [this](std::string_view kind) { actions_.emplace_back(kind); },
            .on_storm = [this](bool active) { storm_gauge_ = active ? 1 : 0; }});
  }
  base::Result<ReconcileResult> run(ClearNodesController& c) {
    node_calls_ = 0;
    pod_calls_ = 0;
    return c.reconcile();
  }

  // Events (all namespaces) with this reason.
  std::vector<json> events(const std::string& reason) {
    std::vector<json> out;
    auto list = client_->list(kube::resources::kEvents, "");
    EXPECT_TRUE(list) << list.error().message();
    if (!list) return out;
    for (const json& e : (*list)["items"]) {
      if (e.value("reason", "") == reason) out.push_back(e);
    }
    return out;
  }

  base::ManualClock clock_;
  std::string dir_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  kube::Connection connection_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
  int node_calls_ = 0;
  int pod_calls_ = 0;
  std::function<void(ObservedNodes&, int)> tweak_nodes_;
  std::function<void(std::vector<kube::PodRecord>&, int)> tweak_pods_;
  bool fresh_ = true;
  std::vector<std::string> actions_;
  int storm_gauge_ = -1;
};

TEST_F(ClearNodesTest, ForceDeletesWhenBothThresholdsPassAndWakesAtTheExactMoment) {
  put(nodeJson("node-a", "True"));
  put(nodeJson("node-b", "Unknown", kT0, kT0 - seconds(40)));    // dead at T0+5m
  put(nodeJson("node-c", "False"));                              // reachable, not ready
  put(podJson("p1", "node-b", kT0 + minutes(1)));                // due at T0+5m (node)
  put(podJson("p2", "node-b", kT0 + minutes(4) + seconds(50)));  // due at T0+5m20s (grace)
  put(podJson("p3", "node-b"));                                  // running: never
  put(podJson("c1", "node-c", kT0 - minutes(10)));               // reachable node: never
  auto c = controller();

  // T0+2m: nothing yet; the wake-up is exactly at T0+5m.
  auto r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->requeue_after, milliseconds(minutes(3)));
  EXPECT_THAT(r->plan, HasSubstr("wait default/p1 on node-b until 2023-11-14T22:18:20Z (in 3m)"));

  // The manager schedules it for exactly then.
  {
    Manager manager(clock_);
    ASSERT_TRUE(manager.add(Scope::kLeader, c));
    manager.setLeader(true);
    const auto next = manager.runDue(Scope::kLeader);
    ASSERT_TRUE(next);
    EXPECT_EQ(*next - clock_.monoNow(), minutes(3));
  }

  // One millisecond early: still nothing, wake in 1 ms.
  clock_.advance(minutes(3) - milliseconds(1));
  r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->requeue_after, milliseconds(1));
  EXPECT_TRUE(exists("p1"));

  // At the threshold: p1 goes; the next wake-up is p2's, 20 s later.
  clock_.advance(milliseconds(1));
  r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists("p1"));
  EXPECT_TRUE(exists("p2"));
  EXPECT_EQ(r->requeue_after, milliseconds(seconds(20)));
  EXPECT_THAT(r->summary, HasSubstr("force-deleted 1 pods"));

  clock_.advance(seconds(20));
  r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists("p2"));
  EXPECT_EQ(r->requeue_after, std::nullopt);
  EXPECT_TRUE(exists("p3"));
  EXPECT_TRUE(exists("c1"));
  EXPECT_EQ(actions_, (std::vector<std::string>{"pod_force_deleted", "pod_force_deleted"}));
  EXPECT_EQ(storm_gauge_, 0);

  // An Event per pod, on the Pod, saying which node and why.
  const auto forced = events("ForceDeleted");
  ASSERT_EQ(forced.size(), 2U);
  std::set<std::string> about;
  for (const json& e : forced) {
    about.insert(e["involvedObject"]["name"]);
    EXPECT_EQ(e["involvedObject"]["kind"], "Pod");
    EXPECT_EQ(e["metadata"]["namespace"], "default");
    EXPECT_EQ(e["type"], "Warning");
    EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("node node-b unreachable since"));
    EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("force-deleted after 30s"));
  }
  EXPECT_EQ(about, (std::set<std::string>{"p1", "p2"}));

  const json s = c->status();
  EXPECT_EQ(s["force_deleted_total"], 2);
  EXPECT_EQ(s["dead_nodes"], json::array({"node-b"}));
  EXPECT_EQ(s["last_force_deleted"][0]["pod"], "default/p2");
  EXPECT_FALSE(s["storm_guard"]["active"].get<bool>());

  // Nothing left to do: a further run deletes nothing and asks for no wake-up.
  r = run(*c);
  ASSERT_TRUE(r);
  EXPECT_EQ(actions_.size(), 2U);
  EXPECT_EQ(r->requeue_after, std::nullopt);
}

TEST_F(ClearNodesTest, DryRunDeletesNothingAndShowsThePlan) {
  put(nodeJson("node-a", "True"));
  put(nodeJson("node-b", "Unknown", kT0 - minutes(10), kT0 - minutes(10)));
  put(podJson("p1", "node-b", kT0 - minutes(1)));
  put(podJson("p2", "node-b", kT0 + minutes(2)));  // due at T0+2m30s
  auto c = controller(/*dry_run=*/true);
  auto r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(exists("p1"));
  EXPECT_THAT(r->plan, HasSubstr("force-delete default/p1 on node-b: node node-b unreachable"));
  EXPECT_THAT(r->summary, HasSubstr("dry run: would force-delete 1 pods"));
  EXPECT_EQ(r->requeue_after, milliseconds(seconds(30)));  // p2's threshold, not p1 again
  clock_.advance(seconds(30));
  r = run(*c);
  ASSERT_TRUE(r);
  EXPECT_TRUE(exists("p1"));
  EXPECT_TRUE(exists("p2"));
  EXPECT_THAT(r->summary, HasSubstr("would force-delete 2 pods"));
  EXPECT_EQ(r->requeue_after, std::nullopt);
  EXPECT_TRUE(actions_.empty());
  EXPECT_TRUE(events("ForceDeleted").empty());
}

TEST_F(ClearNodesTest, StormGuardBlocksReportsAndRecordsOneEventPerStorm) {
  // Two of three nodes unreachable (66.7 % > 55 %): a partition looks like this too.
  put(nodeJson("node-a", "True"));
  put(nodeJson("node-b", "Unknown", kT0 - minutes(10), kT0 - minutes(10)));
  put(nodeJson("node-c", "Unknown", kT0 - minutes(10), kT0 - minutes(10)));
  put(podJson("b1", "node-b", kT0 - minutes(1)));
  put(podJson("c1", "node-c", kT0 - minutes(1)));
  auto c = controller();
  for (int i = 0; i < 3; ++i) {
    auto r = run(*c);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_THAT(r->summary,
                HasSubstr("storm guard: 2 of 3 nodes (66.7%) are unreachable, more "
                          "than storm_guard_percent 55%; clearing nothing (2 pods due)"));
    EXPECT_THAT(r->plan,
                HasSubstr("blocked by the storm guard: force-delete default/b1 on node-b"));
    clock_.advance(seconds(10));
  }
  EXPECT_TRUE(exists("b1"));
  EXPECT_TRUE(exists("c1"));
  EXPECT_TRUE(actions_.empty());
  EXPECT_EQ(storm_gauge_, 1);
  EXPECT_TRUE(c->stormActive());
  json s = c->status();
  EXPECT_TRUE(s["storm_guard"]["active"].get<bool>());
  EXPECT_THAT(s["storm_guard"]["reason"].get<std::string>(), HasSubstr("2 of 3 nodes"));
  EXPECT_EQ(s["storm_guard"]["unreachable_nodes"], json::array({"node-b", "node-c"}));
  // One Event for the storm, on the ekco-leader Lease, not one per reconcile.
  auto active = events("StormGuardActive");
  ASSERT_EQ(active.size(), 1U);
  EXPECT_EQ(active[0]["involvedObject"]["kind"], "Lease");
  EXPECT_EQ(active[0]["involvedObject"]["name"], "ekco-leader");
  EXPECT_EQ(active[0]["metadata"]["namespace"], "kurl");
  EXPECT_EQ(active[0]["type"], "Warning");

  // node-c comes back: 1 of 3, the storm is over and node-b's pod is cleared.
  put(nodeJson("node-c", "True"));
  auto r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists("b1"));
  EXPECT_TRUE(exists("c1"));
  EXPECT_EQ(storm_gauge_, 0);
  EXPECT_EQ(events("StormGuardCleared").size(), 1U);
  EXPECT_EQ(events("StormGuardActive").size(), 1U);
  EXPECT_FALSE(c->status()["storm_guard"]["active"].get<bool>());
}

TEST_F(ClearNodesTest, TheApiIsReadAgainBeforeADeleteAndAStaleCacheDeletesNothing) {
  // The caches (observeNodes/observePods) choose; the API decides. Here the caches are stale:
  // they still show what the API no longer says.
  put(nodeJson("node-a", "True"));
  put(nodeJson("node-b", "Unknown", kT0 - minutes(10), kT0 - minutes(10)));
  put(podJson("p1", "node-b"));  // the API: not terminating
  auto c = controller();
  tweak_pods_ = [](std::vector<kube::PodRecord>& pods, int) {
    for (auto& p : pods) p.deletion_timestamp = kT0 - minutes(1);  // the cache: terminating
  };
  auto r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(exists("p1"));
  EXPECT_THAT(r->summary, HasSubstr("skipped 1"));
  EXPECT_THAT(r->plan, HasSubstr("skip default/p1 on node-b: the pod is no longer terminating"));
  EXPECT_THAT(c->status()["last_skip"].get<std::string>(), HasSubstr("no longer terminating"));

  // ... or the node is back (Ready in the API, the cache still shows it dead: the defect where
  // stalled watches made the leader act on a node that had recovered).
  tweak_pods_ = nullptr;
  put(podJson("p1", "node-b", kT0 - minutes(1)));
  put(nodeJson("node-b", "True"));
  tweak_nodes_ = [](ObservedNodes& observed, int) {
    for (auto& n : observed.nodes) {
      if (n.name != "node-b") continue;
      n.conditions = {{.type = Atom("Ready"), .status = Atom("Unknown")}};
      n.taints = {{.key = Atom(kTaintUnreachable),
                   .effect = Atom("NoExecute"),
                   .time_added = kT0 - minutes(10)}};
    }
  };
  r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(exists("p1"));
  EXPECT_THAT(r->plan, HasSubstr("node node-b is no longer dead"));
  tweak_nodes_ = nullptr;
  put(nodeJson("node-b", "Unknown", kT0 - minutes(10), kT0 - minutes(10)));

  // ... or this agent is no longer a fresh leader: stop, as an error (the manager backs off).
  tweak_nodes_ = nullptr;
  fresh_ = false;
  r = run(*c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.error().message(), HasSubstr("not a fresh leader"));
  EXPECT_TRUE(exists("p1"));
  EXPECT_TRUE(actions_.empty());

  // All clear: deleted.
  fresh_ = true;
  r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists("p1"));
  EXPECT_EQ(actions_.size(), 1U);
}

TEST_F(ClearNodesTest, ARecreatedNamesakeIsNeverDeleted) {
  put(nodeJson("node-a", "True"));
  put(nodeJson("node-b", "Unknown", kT0 - minutes(10), kT0 - minutes(10)));
  put(podJson("p1", "node-b", kT0 - minutes(1)));
  auto c = controller();
  // The cache still has the old pod (another uid) when the delete goes out.
  tweak_pods_ = [](std::vector<kube::PodRecord>& pods, int) {
    for (auto& p : pods) p.uid = "old-" + p.uid;
  };
  auto r = run(*c);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(exists("p1"));  // the uid precondition failed: nothing deleted, nothing counted
  EXPECT_TRUE(actions_.empty());
}

// --- randomized states against the in-memory API
// ---------------------------------------------------

// A pod record as the API stores it, for the in-memory API (tests/fakes/fake_kube.h).
json podObject(const kube::PodRecord& p) {
  json meta = {{"name", p.name}, {"namespace", p.ns.str()}, {"uid", p.uid}};
  if (p.deletion_timestamp) meta["deletionTimestamp"] = stamp(*p.deletion_timestamp);
  if (p.deletion_grace_period_seconds) {
    meta["deletionGracePeriodSeconds"] = *p.deletion_grace_period_seconds;
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", meta},
          {"spec", {{"nodeName", p.node_name.str()}}},
          {"status", {{"phase", p.phase.str()}}}};
}

kube::PodRecord record(const json& pod) {
  auto projected = kube::projectPod(pod);
  EXPECT_TRUE(projected) << projected.error().message();
  return projected.value_or(kube::PodRecord{});
}

// The pods the fake API holds, as the pod cache would show them.
std::vector<kube::PodRecord> podsIn(const FakeKube& kube) {
  std::vector<kube::PodRecord> out;
  for (const json& pod : kube.objects(kube::resources::kPods)) out.push_back(record(pod));
  return out;
}

TEST(ClearNodesRandomized, NeverALiveNodeNeverInAStormNeverEarlyNeverMissedExactWakeUps) {
  // Thousands of force deletes and storms: counted, not printed.
  int log_lines = 0;
  base::configureLogging(base::LogOptions{.sink = [&](std::string_view) { ++log_lines; }});
  struct RestoreLogging {
    ~RestoreLogging() { base::configureLogging(base::LogOptions{}); }
  } restore_logging;
  std::mt19937_64 rng(20240607);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  auto offset = [&](int lo_s, int hi_s) {  // whole seconds, as the API writes times
    return seconds(lo_s + pick(hi_s - lo_s + 1));
  };
  int deletes = 0;
  int total_deletes = 0;
  int storms = 0;
  int wakeups = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    base::ManualClock clock(kT0);
    FakeKube kube;
    std::vector<kube::NodeRecord> nodes;  // what the node cache and a re-read of the API show
    const ClearRules rules{.node_unreachable_toleration = seconds(pick(400)),
                           .pod_deletion_grace = seconds(pick(60)),
                           .storm_guard_percent = pick(101)};
    const int node_count = 1 + pick(9);
    for (int i = 0; i < node_count; ++i) {
      const std::string name = "n" + std::to_string(i);
      const base::WallTime t = kT0 - offset(0, 600) + offset(0, 60);
      switch (pick(7)) {
        case 0:
        case 1:
          nodes.push_back(nodeRecord(name, "True", std::nullopt, t));
          break;
        case 2:
          nodes.push_back(nodeRecord(name, "False", std::nullopt, t));
          break;
        case 3:
          nodes.push_back(nodeRecord(name, "Unknown", t, t - seconds(40)));
          break;
        case 4:
          nodes.push_back(nodeRecord(name, "Unknown", std::nullopt, t));
          break;
        case 5:
          nodes.push_back(nodeRecord(name, "Unknown"));
          break;  // no time known
        default:
          nodes.push_back(nodeRecord(name, "True", t, t));
          break;  // stale taint
      }
      if (pick(5) == 0) nodes.back().unschedulable = true;
    }
    const int pod_count = pick(15);
    for (int i = 0; i < pod_count; ++i) {
      const std::string node = "n" + std::to_string(pick(node_count + 1));  // may not exist
      std::optional<base::WallTime> deleted;
      if (pick(3) != 0) deleted = kT0 - offset(0, 300) + offset(0, 60);
      kube.put(kube::resources::kPods,
               podObject(podRecord("p" + std::to_string(i), node, deleted, pick(8) == 0 ? 0 : 30)));
    }
    // Checked at the moment of every delete, against the state the fake holds then.
    kube.before_delete = [&](const json& object) {
      const kube::PodRecord pod = record(object);
      const base::WallTime now = clock.wallNow();
      auto node = std::find_if(nodes.begin(), nodes.end(),
                               [&](const kube::NodeRecord& n) { return n.name == pod.node_name; });
      ASSERT_NE(node, nodes.end()) << pod.name;
      EXPECT_TRUE(isDead(*node, now, rules.node_unreachable_toleration)) << pod.name;
      EXPECT_TRUE(isUnreachable(*node));
      EXPECT_NE(node->condition("Ready")->status, "True") << "deleted a pod on a live node";
      ASSERT_TRUE(pod.deletion_timestamp);
      EXPECT_GE(now, *pod.deletion_timestamp + rules.pod_deletion_grace) << "deleted early";
      EXPECT_NE(pod.deletion_grace_period_seconds, 0);
      EXPECT_FALSE(assessStorm(nodes, rules.storm_guard_percent).active)
          << "deleted during a storm";
    };
    ClearNodesController c(
        [&] { return ObservedNodes{.synced = true, .nodes = nodes}; }, [&] { return podsIn(kube); },
        kube, clock, {.rules = rules},
        {.read_nodes = [&]() -> base::Result<std::vector<kube::NodeRecord>> { return nodes; },
         .read_pod = [&](std::string_view ns,
                         std::string_view name) -> base::Result<std::optional<kube::PodRecord>> {
           auto pod = kube.object(kube::resources::kPods, ns, name);
           if (!pod) return std::optional<kube::PodRecord>();
           return std::optional<kube::PodRecord>(record(*pod));
         },
         .is_leader_fresh = [] { return true; }});
    // Run, then follow the wake-ups the controller asks for, as the manager would.
    for (int step = 0; step < 20; ++step) {
      const auto before = podsIn(kube);
      const base::WallTime now = clock.wallNow();
      const ClearPlan expected = planClear(nodes, before, now, rules);
      auto r = c.reconcile();
      ASSERT_TRUE(r) << r.error().message();
      if (expected.storm.active) {
        ++storms;
        EXPECT_EQ(podsIn(kube).size(), before.size());
        break;
      }
      // Nothing due is left behind.
      EXPECT_EQ(kube.deleted().size() - static_cast<std::size_t>(deletes), expected.due.size());
      deletes = static_cast<int>(kube.deleted().size());
      for (const kube::PodRecord& p : podsIn(kube)) {
        for (const PodToClear& d : expected.due) EXPECT_NE(p.uid, d.pod.uid) << "missed a pod";
      }
      // The wake-up is exactly the next threshold.
      if (!expected.next) {
        EXPECT_EQ(r->requeue_after, std::nullopt);
        break;
      }
      ASSERT_TRUE(r->requeue_after);
      EXPECT_EQ(*r->requeue_after, std::chrono::ceil<milliseconds>(*expected.next - now));
      clock.advance(*r->requeue_after);
      ++wakeups;
      // At the wake-up something is due (the pending pod crossed its threshold).
      EXPECT_FALSE(planClear(nodes, podsIn(kube), clock.wallNow(), rules).due.empty());
    }
    // Every delete is a force delete of a pod.
    for (const auto& call : kube.calls(Verb::kDelete)) {
      EXPECT_EQ(call.resource, kube::resources::kPods);
      EXPECT_EQ(call.delete_options.grace_period_seconds, 0);
    }
    total_deletes += static_cast<int>(kube.deleted().size());
    deletes = 0;
  }
  EXPECT_GT(storms, 50);
  EXPECT_GT(wakeups, 100);
  EXPECT_GT(total_deletes, 300);
  EXPECT_GT(log_lines, total_deletes);
  std::cerr << "randomized: " << total_deletes << " force deletes, " << storms << " storms, "
            << wakeups << " timed wake-ups\n";
}

// --- the real agent -------------------------------------------------------------------------

TEST(ClearNodesAgent, AStuckPodOnAnUnreachableNodeIsGoneWithinTheThresholdPlusOneSecond) {
  std::string tmpl = (fs::temp_directory_path() / "ekco-clear-agent-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  auto server =
      kubesim::Server::start({.out_dir = (dir / "sim").string(),
                              .objects = {nodeJson("node-a", "True"), podJson("a1", "node-a")}});
  ASSERT_TRUE(server) << server.error().message();
  std::ofstream(dir / "config.yaml") << "leader_election_lease_duration: 3s\n"
                                        "leader_election_renew_deadline: 2s\n"
                                        "leader_election_retry_period: 500ms\n"
                                        "node_unreachable_toleration: 2s\n"
                                        "clear_pod_deletion_grace: 1s\n";
  const fs::path root = dir / "root";
  fs::create_directories(root / "etc/kubernetes");
  std::ofstream(root / "etc/kubernetes/kubelet.conf") << "# joined\n";
  const std::string socket = (dir / "a.sock").string();
  const std::string log = (dir / "a.log").string();
  const pid_t pid =
      testing::spawnLogged({EKCO_BIN, "agent", "--config", (dir / "config.yaml").string(),
                            "--kubeconfig", (*server)->kubeconfigPath(), "--node-name", "node-a",
                            "--host-root", root.string(), "--socket", socket},
                           log);
  ASSERT_GT(pid, 0);
  struct Reaper {
    pid_t pid;
    ~Reaper() { testing::killAndReap(pid); }
  } reaper{pid};
  auto status = [&]() -> json {
    auto reply = queryHealthSocket(socket, "/status", milliseconds(2000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  };
  ASSERT_TRUE(testing::eventually(
      [&] {
        json s = status();
        return s.is_object() && s.value("is_leader", false) && s.value("ready", false) &&
               s["clear_nodes"].is_object() && s["clear_nodes"].value("synced", false);
      },
      seconds(20)))
      << testing::readWholeFile(log);

  // node-b drops off now: unreachable since T (whole seconds, as the API writes it), and its
  // pod has been terminating since T too. Threshold: T + 2s (node dead; the pod's 1 s grace
  // passed before).
  base::SystemClock wall;
  const base::WallTime t = std::chrono::floor<seconds>(wall.wallNow());
  const base::WallTime threshold = t + seconds(2);
  ASSERT_TRUE((*server)->put(podJson("b1", "node-b", t)));
  ASSERT_TRUE((*server)->put(nodeJson("node-b", "Unknown", t, t)));

  bool gone = false;
  base::WallTime gone_at{};
  const base::WallTime deadline = threshold + seconds(3);
  while (wall.wallNow() < deadline) {
    if (!(*server)->get("pods", "default", "b1")) {
      gone_at = wall.wallNow();
      gone = true;
      break;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_TRUE(gone) << testing::readWholeFile(log);
  const auto latency = std::chrono::duration_cast<milliseconds>(gone_at - threshold);
  std::cerr << "clear-nodes reaction latency (threshold -> pod gone in the store): "
            << latency.count() << " ms\n";
  EXPECT_GE(latency.count(), 0) << "deleted before the threshold";
  EXPECT_LT(latency, seconds(1));
  EXPECT_TRUE((*server)->get("pods", "default", "a1"));  // the live node's pod stays

  // The Event (recorded right after the delete), the metric and /status say so.
  auto forced = [&] {
    auto events =
        (*server)->store().list(*(*server)->store().findQualified("events"), "default", {});
    int n = 0;
    for (const json& e : events.body["items"]) {
      if (e.value("reason", "") == "ForceDeleted" && e["involvedObject"]["name"] == "b1") ++n;
    }
    return n;
  };
  EXPECT_TRUE(testing::eventually([&] { return forced() == 1; }, seconds(5)));
  ASSERT_TRUE(testing::eventually(
      [&] {
        json s = status();
        return s.is_object() && s["clear_nodes"].value("force_deleted_total", 0) == 1;
      },
      seconds(5)));
  auto metrics = queryHealthSocket(socket, "/metrics", milliseconds(2000));
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("ekco_actions_total{kind=\"pod_force_deleted\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("ekco_storm_guard 0"));
  EXPECT_THAT(testing::readWholeFile(log), HasSubstr("force-deleted pod"));

  ::kill(pid, SIGTERM);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  reaper.pid = -1;
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << testing::readWholeFile(log);
  (*server)->stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ekco::agent
