// The clear-nodes leader controller (agent/clear_nodes.h) (the pure plan and randomized states
// against the in-memory API: clear_nodes_plan_test.cc):
//   - the controller against ekco-kubesim in-process on a ManualClock: force deletes only once
//     both thresholds have passed, requeue_after is the exact time to the next threshold, Events
//     are recorded, dry run deletes nothing, the storm guard blocks and reports, the second guard
//     (cache re-read, leader freshness) prevents a delete;
//   - a real `ekco agent` against kubesim: a stuck pod on an unreachable node is gone within the
//     threshold + 1 s (the reaction latency is printed).
#include "agent/features/clear/clear_nodes.h"
#include "agent/runtime/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/objects.h"
#include "kube/decode/timestamp.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using base::ErrorCode;
using kube::Atom;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

const base::WallTime kT0 = base::WallTime(seconds(1'700'000'000));

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
    auto server = kubesim::Server::start({.out_dir = dir_,
                                          .objects = {kubesim::namespaceObject("kurl")},
                                          .clock = &clock_,
                                          .kubelet_interval = std::chrono::hours(24)});
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
        ClearNodesOptions{
            .rules = {.node_unreachable_toleration = minutes(5),
                      .pod_deletion_grace = seconds(30),
                      .storm_guard_percent = 55},
            .effects = {
                .dry_run = dry_run,
                .is_leader_fresh = [this] { return fresh_; },
                .record_event =
                    [this](const kube::EventSpec& e) { ASSERT_TRUE(client_->recordEvent(e)); },
                .count_action = [this](std::string_view kind) { actions_.emplace_back(kind); }}},
        ClearNodesCallbacks{.on_storm = [this](bool active) { storm_gauge_ = active ? 1 : 0; }});
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
  // It points at the page that explains the guard rather than repeating it (issue 38).
  EXPECT_THAT(active[0]["message"].get<std::string>(),
              ::testing::EndsWith("(see docs/features/clear-nodes.md#the-storm-guard)"));

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

// --- the real agent -------------------------------------------------------------------------

TEST(ClearNodesAgent, AStuckPodOnAnUnreachableNodeIsGoneWithinTheThresholdPlusOneSecond) {
  std::string tmpl = (fs::temp_directory_path() / "ekco-clear-agent-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  auto server =
      kubesim::Server::start({.out_dir = (dir / "sim").string(),
                              .objects = {kubesim::namespaceObject("kurl"),
                                          nodeJson("node-a", "True"), podJson("a1", "node-a")}});
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
