// The fault matrix (issue 24): two real `ekco agent` processes (cp-1, cp-2) with the automatic
// purge on, each talking to ekco-kubesim through its own TLS fault proxy
// (tests/fakes/fault_proxy.h), as the ServiceAccount kurl/ekco under deploy/'s RBAC. The cluster
// has a dead primary, cp-3, whose purge the min-ready guard forbids and on which a pod stuck
// Terminating appears during each fault (force-deleting it is the right action), and a worker,
// flap-w, that is unreachable when each fault starts and Ready again 300 ms into it: a leader
// that trusted a stale cache would find it dead after the 3 s toleration and purge a healthy
// node (defect 2).
//
// For each fault: no wrong action (nothing deleted but the stuck pods; every other node and pod
// still there; no purge started), readiness truthful (an API on which every request fails makes
// both agents not ready within kNotReadyBound; a working one leaves the leader ready with the
// truth in its caches by the end of the fault; and never, once kStaleBound has passed since
// flap-w turned Ready, does the leader say ready while its caches still have flap-w
// unreachable), recovery within kRecoveryBound of the fault's
// end (both ready, the Lease renewed, the stuck pod cleared, flap-w Ready in the leader's
// picture), and the request rate bounded (kMaxRequestsPerSecond per agent, in the busiest second
// of the fault and the recovery). One table on stdout; every row asserted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agent/serve/health_server.h"
#include "kube/decode/timestamp.h"
#include "tests/agent/process_support.h"
#include "tests/agent/sa_client.h"
#include "tests/fakes/fault_proxy.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using fakes::Fault;
using fakes::FaultMode;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

using testing::kEkcoServiceAccount;
using testing::kEkcoToken;
const std::vector<std::string> kAgents = {"cp-1", "cp-2"};
// Pods that must outlive every fault (running; one on the dead node) and the nodes they are on.
const std::vector<std::pair<std::string, std::string>> kKeep = {
    {"web-cp1", "cp-1"}, {"web-w1", "worker-1"}, {"web-flap", "flap-w"}, {"web-cp3", "cp-3"}};

// The bounds, with margin for an ASan build on a loaded 2-core machine. The product's own:
// API silence noticed after max(lease 3 s, 3 x 500 ms retry) + 1 s request timeout; caches
// back off to at most 3 s.
constexpr milliseconds kNotReadyBound{8000};
constexpr milliseconds kRecoveryBound{5000};
constexpr std::int64_t kMaxRequestsPerSecond = 50;
// How long a ready agent's picture may lag the API: the product notices a silent API after
// 4 s (above), plus a sampling margin. Past it, "ready" with flap-w still unreachable in the
// leader's caches is a lie.
constexpr milliseconds kStaleBound{5000};
// How long each fault is held at least: past flap-w's toleration and kStaleBound, so several
// samples fall where a stale "ready" would be caught.
constexpr milliseconds kHoldAtLeast{7000};

// What a fault leaves of the API, and so what the agents must say.
enum class Api {
  kUsable,        // requests succeed (slowly, or after retries): ready, the truth seen
  kUnusable,      // every request fails: both agents not ready within kNotReadyBound
  kWatchesBroken  // lists work, watches do not: never ready on a stale picture
};

struct Row {
  Fault fault{};
  Api api = Api::kUsable;
  milliseconds stale_bound = kStaleBound;
  milliseconds hold = kHoldAtLeast;
  // Results.
  std::string wrong = "none";
  int wrong_count = 0;
  std::string readiness{};
  std::optional<milliseconds> recovery{};
  std::int64_t peak = 0;
  std::vector<std::string> failures{};
};

json node(const std::string& name, bool control_plane) {
  return kubesim::readyNodeObject(name, "10.0.0.1", control_plane);
}

std::string stamp(base::WallTime t) { return kube::formatRfc3339(t); }

std::string ms(milliseconds d) {
  return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000);
}

class FaultMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-faults-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const base::WallTime now = wall_.wallNow();
    std::vector<json> objects = {
        node("cp-1", true), node("cp-2", true),
        kubesim::unreachableNode(node("cp-3", true), stamp(now - std::chrono::hours(1))),
        node("worker-1", false), node("flap-w", false)};
    for (const auto& [name, on] : kKeep)
      objects.push_back(kubesim::runningPodObject("default", name, on));
    ASSERT_NO_FATAL_FAILURE(
        testing::startAsEkco({.dir = dir_.string(), .objects = std::move(objects)}, server_));
    std::ofstream(dir_ / "config.yaml") << "leader_election_lease_duration: 3s\n"
                                           "leader_election_renew_deadline: 2s\n"
                                           "leader_election_retry_period: 500ms\n"
                                           "node_unreachable_toleration: 3s\n"
                                           "clear_pod_deletion_grace: 1s\n"
                                           "purge_dead_nodes: true\n"
                                           "min_ready_master_nodes: 3\n"
                                           "storm_guard_percent: 60\n"
                                           "auto_resource_scaling: false\n";
    for (const std::string& name : kAgents) {
      auto proxy = fakes::FaultProxy::start({.upstream_port = server_->port(),
                                             .upstream_ca_pem = server_->pki().ca_cert_pem,
                                             .cert_pem = server_->pki().server_cert_pem,
                                             .key_pem = server_->pki().server_key_pem});
      ASSERT_TRUE(proxy) << proxy.error().message();
      const fs::path kubeconfig = dir_ / (name + ".kubeconfig");
      std::ofstream(kubeconfig) << kubesim::renderTokenKubeconfig(server_->pki(), (*proxy)->url(),
                                                                  "ekco", kEkcoToken);
      proxies_[name] = std::move(*proxy);
      const fs::path root = dir_ / ("root-" + name);
      fs::create_directories(root / "etc/kubernetes");
      std::ofstream(root / "etc/kubernetes/kubelet.conf") << "# joined\n";
      const pid_t pid =
          testing::spawnLogged({EKCO_BIN, "agent", "--config", (dir_ / "config.yaml").string(),
                                "--kubeconfig", kubeconfig.string(), "--node-name", name,
                                "--host-root", root.string(), "--socket", socket(name)},
                               log(name));
      ASSERT_GT(pid, 0);
      pids_[name] = pid;
    }
  }

  void TearDown() override {
    for (auto& [name, pid] : pids_) testing::killAndReap(pid);
    for (auto& [name, proxy] : proxies_) proxy->stop();
    if (server_) server_->stop();
    fs::remove_all(dir_);
  }

  std::string socket(const std::string& name) const { return (dir_ / (name + ".sock")).string(); }
  std::string log(const std::string& name) const { return (dir_ / (name + ".log")).string(); }
  std::string logs() const {
    std::string out;
    for (const auto& name : kAgents)
      out += "--- " + name + "\n" + testing::readWholeFile(log(name));
    return out;
  }

  bool ready(const std::string& name) {
    auto reply = queryHealthSocket(socket(name), "/readyz", milliseconds(1000));
    return reply && reply->status == 200;
  }
  bool allReady() {
    return std::all_of(kAgents.begin(), kAgents.end(), [&](const auto& n) { return ready(n); });
  }
  bool noneReady() {
    return std::none_of(kAgents.begin(), kAgents.end(), [&](const auto& n) { return ready(n); });
  }
  json lease() {
    auto l = server_->get("leases.coordination.k8s.io", "kurl", "ekco-leader");
    return l ? *l : json(nullptr);
  }
  // The agent holding the Lease ("" when none).
  std::string leader() {
    const json l = lease();
    if (!l.is_object()) return "";
    const std::string holder = l["spec"].value("holderIdentity", "");
    for (const auto& name : kAgents) {
      if (holder.rfind(name + "_", 0) == 0) return name;
    }
    return "";
  }
  // Whether the leader's caches watch flap-w's pods (it sees flap-w unhealthy), or nullopt
  // when it cannot say.
  std::optional<bool> leaderSeesFlapUnhealthy() {
    const std::string l = leader();
    if (l.empty()) return std::nullopt;
    auto reply = queryHealthSocket(socket(l), "/status", milliseconds(1000));
    if (!reply || reply->status != 200) return std::nullopt;
    const json s = json::parse(reply->body, nullptr, false);
    if (!s.is_object() || !s.value("is_leader", false)) return std::nullopt;
    for (const auto& c : s.value("caches", json::array())) {
      if (c.value("name", "") == "pods on flap-w") return c.value("synced", false);
    }
    return false;
  }

  void setFault(const Fault& f) {
    for (auto& [name, proxy] : proxies_) proxy->setFault(f);
  }
  std::int64_t peak(Clock::time_point from, Clock::time_point to) {
    std::int64_t p = 0;
    for (auto& [name, proxy] : proxies_) p = std::max(p, proxy->peakPerSecond(from, to));
    return p;
  }

  // Everything deleted or changed that must not have been, since the start.
  std::vector<std::string> wrongActions() {
    std::vector<std::string> out;
    for (const char* n : {"cp-1", "cp-2", "cp-3", "worker-1", "flap-w"}) {
      auto got = server_->get("nodes", "", n);
      if (!got) {
        out.push_back(std::string("node ") + n + " deleted");
      } else if ((*got)["metadata"]
                     .value("annotations", json::object())
                     .contains("ekco.kurl.sh/purge-started")) {
        out.push_back(std::string("purge of ") + n + " started");
      }
    }
    for (const auto& [name, on] : kKeep) {
      if (!server_->get("pods", "default", name)) out.push_back("pod " + name + " deleted");
    }
    for (const auto& r : server_->requestLog()) {
      if (r.user != kEkcoServiceAccount || (r.verb != "delete" && r.verb != "deletecollection")) {
        continue;
      }
      if (r.resource == "pods" && r.name.rfind("stuck-", 0) == 0) continue;  // the right action
      out.push_back(fmt::format("{} {}/{} ({})", r.verb, r.resource, r.name, r.code));
    }
    return out;
  }

  void runRow(int index, Row& row);

  fs::path dir_;
  base::SystemClock wall_;
  std::unique_ptr<kubesim::Server> server_;
  std::map<std::string, std::unique_ptr<fakes::FaultProxy>> proxies_;
  std::map<std::string, pid_t> pids_;
  std::size_t wrong_seen_ = 0;
};

void FaultMatrixTest::runRow(int index, Row& row) {
  auto fail = [&](const std::string& why) { row.failures.push_back(why); };
  if (!testing::eventually([&] { return allReady() && !leader().empty(); }, seconds(30))) {
    fail("not ready with a leader before the fault");
    return;
  }
  // flap-w stops reporting now; wait until the leader sees it unhealthy.
  ASSERT_TRUE(server_->put(kubesim::unreachableNode(
      node("flap-w", false), stamp(std::chrono::floor<seconds>(wall_.wallNow())))));
  if (!testing::eventually([&] { return leaderSeesFlapUnhealthy() == true; }, seconds(10))) {
    fail("the leader never saw flap-w unreachable");
  }

  // The fault. 300 ms in, flap-w is Ready again and a pod is stuck on the dead cp-3.
  const auto start = Clock::now();
  setFault(row.fault);
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(server_->put(node("flap-w", false)));
  const std::string stuck = "stuck-" + std::to_string(index);
  json pod = kubesim::runningPodObject("default", stuck, "cp-3");
  pod["metadata"]["deletionTimestamp"] = stamp(wall_.wallNow() - std::chrono::minutes(10));
  pod["metadata"]["deletionGracePeriodSeconds"] = 30;
  ASSERT_TRUE(server_->put(pod));
  const auto truth_changed = Clock::now();

  // Hold it, sampling readiness: at least kHoldAtLeast; an unusable API until both agents say
  // not ready (or the bound is long past).
  std::optional<milliseconds> not_ready_after;
  int samples = 0;
  int ready_samples = 0;
  int stale_ready = 0;  // samples past kStaleBound: the leader ready on a stale picture
  const bool unusable = row.api == Api::kUnusable;
  while (true) {
    const auto now = Clock::now();
    const bool none = noneReady();
    if (none && !not_ready_after) {
      not_ready_after = std::chrono::duration_cast<milliseconds>(now - start);
    }
    const std::string l = leader();
    const bool leader_ready = !l.empty() && ready(l);
    ++samples;
    if (leader_ready) ++ready_samples;
    if (leader_ready && now - truth_changed > row.stale_bound &&
        leaderSeesFlapUnhealthy() == true) {
      ++stale_ready;
    }
    const bool held = now - start >= row.hold;
    if (held && (!unusable || not_ready_after)) break;
    if (now - start > std::max<milliseconds>(row.hold, kNotReadyBound + seconds(2))) break;
    std::this_thread::sleep_for(milliseconds(200));
  }
  // A working API: by now the leader is ready and its picture has flap-w Ready again.
  std::optional<bool> stale_at_end;
  bool leader_ready_at_end = false;
  if (row.api == Api::kUsable) {
    stale_at_end = leaderSeesFlapUnhealthy();
    leader_ready_at_end = !leader().empty() && ready(leader());
  }

  // Lifted.
  const json lease_before = lease();
  setFault({});
  const auto lifted = Clock::now();
  const auto recovered = [&] {
    const json l = lease();
    return allReady() && !leader().empty() && l.is_object() &&
           l["metadata"].value("resourceVersion", "") !=
               (lease_before.is_object() ? lease_before["metadata"].value("resourceVersion", "")
                                         : "") &&
           !server_->get("pods", "default", stuck) && leaderSeesFlapUnhealthy() == false;
  };
  if (testing::eventually(recovered, kRecoveryBound * 4)) {
    row.recovery = std::chrono::duration_cast<milliseconds>(Clock::now() - lifted);
  }
  row.peak = peak(start, Clock::now());

  // Judge.
  if (stale_ready > 0) {
    fail(fmt::format("readiness: the leader said ready on a stale picture in {} samples",
                     stale_ready));
  }
  if (unusable) {
    row.readiness = not_ready_after ? "not ready after " + ms(*not_ready_after) : "stayed ready";
    if (!not_ready_after || *not_ready_after > kNotReadyBound) {
      fail("readiness: not both agents not ready within " + ms(kNotReadyBound));
    }
  } else {
    row.readiness = fmt::format("leader ready {}/{}", ready_samples, samples);
  }
  if (stale_ready > 0) row.readiness += fmt::format(", {} stale", stale_ready);
  if (row.api == Api::kUsable) {
    if (!leader_ready_at_end) fail("readiness: the leader was not ready at the end of the fault");
    if (stale_at_end != false) {
      fail("readiness: the leader's picture still had flap-w unreachable " +
           ms(std::chrono::duration_cast<milliseconds>(lifted - truth_changed)) +
           " after it was Ready");
    }
  }
  if (!row.recovery || *row.recovery > kRecoveryBound) {
    fail("recovery: not within " + ms(kRecoveryBound) + " of the fault's end");
  }
  if (row.peak > kMaxRequestsPerSecond) {
    fail(fmt::format("request rate: {} req/s in one second (bound {})", row.peak,
                     kMaxRequestsPerSecond));
  }
  const auto wrong = wrongActions();
  if (wrong.size() > wrong_seen_) {
    row.wrong_count = static_cast<int>(wrong.size() - wrong_seen_);
    row.wrong.clear();
    for (std::size_t i = wrong_seen_; i < wrong.size(); ++i)
      row.wrong += (i > wrong_seen_ ? ", " : "") + wrong[i];
    wrong_seen_ = wrong.size();
    fail("wrong actions: " + row.wrong);
  }
}

TEST_F(FaultMatrixTest, NoWrongActionTruthfulReadinessRecoveryAndBoundedRateUnderEveryFault) {
  std::vector<Row> rows = {
      {.fault = {.mode = FaultMode::kPass}},
      {.fault = {.mode = FaultMode::kRefuse}, .api = Api::kUnusable},
      {.fault = {.mode = FaultMode::kHang}, .api = Api::kUnusable},
      {.fault = {.mode = FaultMode::kSlow, .latency = milliseconds(200)}},
      {.fault = {.mode = FaultMode::kReset}, .api = Api::kUnusable},
      // Half the requests fail: a cache's watch and relist can fail several times running, each
      // retry backing off (up to 3 s, and a 429's Retry-After), so the picture may still lag at
      // kHoldAtLeast (seen under CI-like load: 6.9 s; under the full suite: 9.7 s, four
      // failures in a row).
      // Held longer, so the end-of-fault check judges the truth, not that coin flip; a stale
      // "ready" is still counted from kStaleBound on.
      {.fault = {.mode = FaultMode::k429, .rate = 0.5}, .hold = seconds(14)},
      {.fault = {.mode = FaultMode::k500, .rate = 0.5}, .hold = seconds(14)},
      {.fault = {.mode = FaultMode::k500, .rate = 1.0}, .api = Api::kUnusable},
      {.fault = {.mode = FaultMode::kTruncate}, .api = Api::kUnusable},
      // A watch is given up after 8 MiB without a newline (kube/watch.h), or sooner when the
      // agent's buffer budget is spent, then the cache watches again: until then it looks
      // connected. Reading 8 MiB on each of an agent's watches takes ASan agents seconds here,
      // so the picture may lag longer than kStaleBound.
      {.fault = {.mode = FaultMode::kEndlessLine},
       .api = Api::kWatchesBroken,
       .stale_bound = seconds(12),
       .hold = seconds(15)},
  };
  const auto began = Clock::now();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    runRow(static_cast<int>(i), rows[i]);
    if (HasFatalFailure()) break;
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - began);

  std::ostringstream table;
  table << fmt::format("| {:<14} | {:<14} | {:<24} | {:<8} | {:>10} | {:<7} |\n", "fault",
                       "wrong actions", "readiness", "recovery", "peak req/s", "verdict");
  table << "|----------------|----------------|--------------------------|----------|-----------:|-"
           "--------|\n";
  for (const Row& r : rows) {
    table << fmt::format(
        "| {:<14} | {:<14} | {:<24} | {:<8} | {:>10} | {:<7} |\n", fakes::describeFault(r.fault),
        r.wrong_count == 0 ? "none" : std::to_string(r.wrong_count), r.readiness,
        r.recovery ? ms(*r.recovery) : "none", r.peak, r.failures.empty() ? "ok" : "FAIL");
  }
  table << fmt::format(
      "bounds: not ready within {} when every request fails, recovery within {}, at most {} "
      "requests/s per agent; {} rows in {}\n",
      ms(kNotReadyBound), ms(kRecoveryBound), kMaxRequestsPerSecond, rows.size(), ms(took));
  std::cout << table.str() << std::flush;
  bool any = false;
  for (const Row& r : rows) {
    for (const auto& f : r.failures) {
      ADD_FAILURE() << fakes::describeFault(r.fault) << ": " << f;
      any = true;
    }
  }
  if (any) std::cout << logs();
}

}  // namespace
}  // namespace ekco::agent
