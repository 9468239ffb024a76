// ekco-bench-clear: how soon after a pod stuck terminating on a dead node crosses its threshold the
// leader's clear-nodes controller force-deletes it. Run by bench/clear.sh; prints a Markdown table
// (BENCHMARKS.md).
//
// One in-process ekco-kubesim (real clock; its simulated kubelet never runs, so nothing but the
// agent finishes a terminating pod) holds N Ready nodes with P running pods each. One real
// `ekco agent` (node-1; short leader-election timings, node_unreachable_toleration and
// clear_pod_deletion_grace from the options) is started first and waits until it leads and its
// clear-nodes controller has synced. Then, on a timeline of whole seconds (every write lands
// 20 ms after a second starts, so the stamps the API writes — whole seconds — are the moments of
// the writes):
//   - K nodes (the last K) drop off one after the other, `--stagger` seconds apart: Ready Unknown
//     and the node.kubernetes.io/unreachable taints (NoExecute with timeAdded = that second);
//   - the P pods of each such node are deleted (deletionTimestamp = that second,
//     deletionGracePeriodSeconds 30, as a kubectl delete or an eviction leaves them) at offsets
//     spread over -1 .. toleration+2 s around the moment their node dropped off. So the pod's grace
//     passes before the node is dead for some (the node's threshold decides) and after it for the
//     others (the pod's);
//   - as a control, K live nodes get the same terminating pods: they must never be deleted.
// A pod's threshold is max(timeAdded + toleration, deletionTimestamp + grace). A thread follows
// the store's pod events in-process (no HTTP in between) and records when each pod is gone; the
// reaction latency is gone − threshold. A delete before the threshold is an "early delete" (a
// bug; must be 0).
//
// The agent runs in a process group of its own and is killed (SIGKILL to the group) and reaped on
// every exit path, including SIGINT/SIGTERM/SIGHUP; the work directory is removed.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "bench/bench_support.h"
#include "kube/decode/timestamp.h"
#include "tests/kubesim/server/server.h"

extern char** environ;

namespace {

using ekco::bench::eventually;
using ekco::bench::fail;
using ekco::bench::Failure;
using ekco::bench::g_children;
using ekco::bench::readFile;
using ekco::bench::vmRssKib;

using namespace ekco;  // NOLINT
namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using WallTime = base::WallTime;

double ms(WallTime::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Nearest-rank percentile of an unsorted sample.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

std::string fmtMs(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f ms", v);
  return buf;
}

void row(const std::string& metric, const std::string& measured, const std::string& ekco) {
  std::printf("| %s | %s | %s |\n", metric.c_str(), measured.c_str(), ekco.c_str());
}

// ---------------------------------------------------------------------------------------------
// Objects.

std::string nodeName(int i) { return "node-" + std::to_string(i + 1); }

json readyNode(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// What the node lifecycle controller leaves on a node whose kubelet stopped posting at `since`.
json unreachableNode(const std::string& name, WallTime since) {
  json n = readyNode(name);
  const std::string t = kube::formatRfc3339(since);
  n["spec"]["taints"] = {
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}, {"timeAdded", t}},
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoSchedule"}}};
  n["status"]["conditions"] = {{{"type", "Ready"},
                                {"status", "Unknown"},
                                {"reason", "NodeStatusUnknown"},
                                {"lastTransitionTime", t}}};
  return n;
}

json runningPod(const std::string& name, const std::string& node) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"labels", {{"app", "bench"}}},
            {"ownerReferences",
             {{{"apiVersion", "apps/v1"},
               {"kind", "StatefulSet"},
               {"name", "bench"},
               {"uid", "bench-uid"},
               {"controller", true}}}}}},
          {"spec", {{"nodeName", node}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

// ---------------------------------------------------------------------------------------------

struct Options {
  std::string ekco{};
  int nodes = 50;
  int dead = 5;
  int pods_per_node = 20;
  int toleration_s = 3;
  int grace_s = 1;
  int stagger_ms = 1000;
  std::string work_dir{};
  bool keep = false;
};

struct PodTrack {
  std::string name{};
  int node = -1;          // index
  bool control = false;   // on a live node: must stay
  int offset_s = 0;       // deletion, relative to the node dropping off
  WallTime deleted_at{};  // deletionTimestamp
  WallTime threshold{};   // control pods: none
  WallTime written{};     // when the bench's last write that concerns it completed
  std::optional<WallTime> gone{};
};

// One write of the timeline.
struct Action {
  WallTime at{};                    // a whole second; the write happens 20 ms later
  int node = -1;                    // >= 0: the node drops off
  std::vector<std::size_t> pods{};  // else: these pods are deleted
};

// One line on why the agent is not the synced leader, from its last /status.
std::string whyNotLeading(const json& s, bool running) {
  if (!running) return "it exited";
  if (!s.is_object()) return "no answer on its /status socket";
  if (!s.value("ready", false)) return "not ready: " + s.value("ready_reason", std::string());
  if (!s.value("is_leader", false)) {
    std::string err;
    if (s.contains("lease") && s["lease"].is_object() && s["lease"]["last_error"].is_string()) {
      err = s["lease"]["last_error"].get<std::string>();
    }
    return "not the leader" + (err.empty() ? std::string() : " (lease error: " + err + ")");
  }
  return "clear-nodes did not sync";
}

int run(const Options& opt) {
  base::SystemClock clock;
  fs::path dir = opt.work_dir;
  if (dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "ekco-bench-clear-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp failed");
    dir = tmpl;
  } else {
    fs::create_directories(dir);
  }
  g_children.setWorkDir(dir, opt.keep || !opt.work_dir.empty());
  std::fprintf(stderr, "ekco-bench-clear: work directory %s\n", dir.c_str());

  const int live = opt.nodes - opt.dead;
  if (live < 1) fail("at least one node must stay alive (the agent's)");
  const int control_nodes = std::min(opt.dead, live - 1);  // node-2.., never the agent's node-1

  // The cluster: the Lease's namespace (as on a kURL cluster), N Ready nodes, P running pods
  // each.
  std::vector<json> objects = {kubesim::namespaceObject("kurl")};
  for (int i = 0; i < opt.nodes; ++i) {
    objects.push_back(readyNode(nodeName(i)));
    for (int j = 0; j < opt.pods_per_node; ++j) {
      objects.push_back(runningPod(nodeName(i) + "-p" + std::to_string(j), nodeName(i)));
    }
  }
  // The simulated kubelet never runs: it would finish the terminating control pods on live
  // nodes, and the pods deleted while their node was still Ready (offset -1).
  auto server = kubesim::Server::start({.out_dir = (dir / "sim").string(),
                                        .objects = objects,
                                        .clock = &clock,
                                        .kubelet_interval = std::chrono::hours(24),
                                        .history_window = 1'000'000});
  if (!server) fail("kubesim: " + server.error().message());
  kubesim::Server& api = **server;

  // The agent on node-1: leads at once (the only candidate).
  const fs::path home = dir / "agent";
  const fs::path root = home / "root";
  fs::create_directories(root / "etc/kubernetes");
  std::ofstream(root / "etc/kubernetes/kubelet.conf") << "# joined\n";
  std::ofstream(home / "config.yaml") << "leader_election_lease_duration: 3s\n"
                                         "leader_election_renew_deadline: 2s\n"
                                         "leader_election_retry_period: 500ms\n"
                                         "node_unreachable_toleration: "
                                      << opt.toleration_s << "s\n"
                                      << "clear_pod_deletion_grace: " << opt.grace_s << "s\n";
  const std::string log = (home / "agent.log").string();
  const std::string socket = (home / "agent.sock").string();
  const pid_t agent =
      g_children.spawn({opt.ekco, "agent", "--config", (home / "config.yaml").string(),
                        "--kubeconfig", api.kubeconfigPath(), "--node-name", nodeName(0),
                        "--host-root", root.string(), "--socket", socket},
                       log);
  if (agent <= 0) fail("cannot start " + opt.ekco);
  auto status = [&]() -> json {
    auto reply = agent::queryHealthSocket(socket, "/status", milliseconds(2000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  };
  const auto started = std::chrono::steady_clock::now();
  json last = nullptr;  // the agent's last /status: why it does not lead, if it does not
  if (!eventually(
          [&] {
            if (!g_children.running(agent)) return true;
            json s = status();
            if (s.is_object()) last = s;
            return s.is_object() && s.value("is_leader", false) && s.value("ready", false) &&
                   s["clear_nodes"].is_object() && s["clear_nodes"].value("synced", false);
          },
          seconds(30)) ||
      !g_children.running(agent)) {
    fail("the agent did not lead and sync in 30 s: " +
         whyNotLeading(last, g_children.running(agent)) + "; its log:\n" + readFile(log));
  }
  std::fprintf(stderr, "ekco-bench-clear: the agent leads, clear-nodes synced after %.0f ms\n",
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                   .count());
  std::this_thread::sleep_for(seconds(1));

  // The plan. t0: two whole seconds ahead (room for the offset -1 deletions).
  const WallTime t0 = std::chrono::floor<seconds>(clock.wallNow()) + seconds(2);
  const seconds tol(opt.toleration_s);
  const seconds grace(opt.grace_s);
  const int offsets = opt.toleration_s + 4;  // -1 .. toleration+2
  std::vector<PodTrack> pods;
  std::map<std::string, std::size_t> by_name;
  std::vector<Action> actions;
  std::vector<WallTime> dropped(static_cast<std::size_t>(opt.nodes));
  auto second = [&](WallTime t) { return std::chrono::floor<seconds>(t); };
  for (int k = 0; k < opt.dead + control_nodes; ++k) {
    const bool control = k >= opt.dead;
    const int node = control ? 1 + (k - opt.dead) : opt.nodes - opt.dead + k;
    const int slot = control ? k - opt.dead : k;
    // Whole seconds, so the staggered drop-offs are where the stamps say they are.
    const WallTime u = second(t0 + milliseconds(static_cast<std::int64_t>(slot) * opt.stagger_ms));
    dropped[static_cast<std::size_t>(node)] = u;
    if (!control) actions.push_back({.at = u, .node = node, .pods = {}});
    for (int j = 0; j < opt.pods_per_node; ++j) {
      PodTrack p{.name = nodeName(node) + "-p" + std::to_string(j),
                 .node = node,
                 .control = control,
                 .offset_s = -1 + j % offsets};
      p.deleted_at = u + seconds(p.offset_s);
      p.threshold = std::max(u + tol, p.deleted_at + grace);
      by_name[p.name] = pods.size();
      actions.push_back({.at = p.deleted_at, .node = -1, .pods = {pods.size()}});
      pods.push_back(std::move(p));
    }
  }
  // Node drop-offs first within a second, then the pods' deletions.
  std::stable_sort(actions.begin(), actions.end(), [](const Action& a, const Action& b) {
    if (a.at != b.at) return a.at < b.at;
    return a.node >= 0 && b.node < 0;
  });

  // The watcher: pod DELETED events straight from the store.
  std::atomic<bool> stop{false};
  std::mutex gone_mu;
  std::vector<std::string> unexpected;  // deleted pods the bench did not plan to be deleted
  kubesim::Store& store = api.store();
  std::uint64_t after = store.resourceVersion();
  std::thread watcher([&] {
    while (!stop.load()) {
      store.waitForChange(after, milliseconds(100));
      std::uint64_t scanned = after;
      auto events = store.eventsAfter(after, "/v1/pods", &scanned);
      const WallTime now = clock.wallNow();
      after = scanned;
      if (!events) {
        std::lock_guard lock(gone_mu);
        unexpected.push_back("(the event history was compacted)");
        continue;
      }
      std::lock_guard lock(gone_mu);
      for (const auto& e : *events) {
        if (e.type != "DELETED") continue;
        const std::string name = e.object["metadata"].value("name", "");
        auto it = by_name.find(name);
        if (it == by_name.end()) {
          unexpected.push_back(name);
          continue;
        }
        if (!pods[it->second].gone) pods[it->second].gone = now;
      }
    }
  });
  struct Join {
    std::thread& t;
    std::atomic<bool>& stop;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{watcher, stop};

  // The timeline.
  double max_write_lag_ms = 0;
  WallTime last_threshold = t0;
  for (const auto& p : pods) {
    if (!p.control) last_threshold = std::max(last_threshold, p.threshold);
  }
  std::fprintf(stderr,
               "ekco-bench-clear: %d nodes drop off from %s, %zu pods deleted (%d on live "
               "nodes); last threshold in %.1f s\n",
               opt.dead, kube::formatRfc3339(t0).c_str(), pods.size(),
               control_nodes * opt.pods_per_node, ms(last_threshold - clock.wallNow()) / 1000.0);
  for (const Action& a : actions) {
    std::this_thread::sleep_until(a.at + milliseconds(20));
    if (a.node >= 0) {
      if (!api.put(unreachableNode(nodeName(a.node), a.at))) fail("put node");
    }
    for (std::size_t i : a.pods) {
      PodTrack& p = pods[i];
      auto current = api.get("pods", "default", p.name);
      if (!current) fail("pod " + p.name + " is gone before its deletion");
      (*current)["metadata"]["deletionTimestamp"] = kube::formatRfc3339(p.deleted_at);
      (*current)["metadata"]["deletionGracePeriodSeconds"] = 30;
      if (!api.put(*current)) fail("put pod");
    }
    const WallTime done = clock.wallNow();
    max_write_lag_ms = std::max(max_write_lag_ms, ms(done - a.at));
    if (a.node >= 0) {
      for (auto& p : pods) {
        if (p.node == a.node) p.written = std::max(p.written, done);
      }
    }
    for (std::size_t i : a.pods) pods[i].written = std::max(pods[i].written, done);
  }

  // Wait for the last threshold plus a margin (2 s, or until every pod is gone).
  const auto all_gone = [&] {
    std::lock_guard lock(gone_mu);
    return std::all_of(pods.begin(), pods.end(),
                       [](const PodTrack& p) { return p.control || p.gone.has_value(); });
  };
  std::this_thread::sleep_until(last_threshold);
  eventually(all_gone, seconds(2), milliseconds(10));
  // A little longer for a late (wrong) delete of a control pod to show.
  std::this_thread::sleep_for(milliseconds(500));
  stop = true;
  watcher.join();

  const long rss = vmRssKib(agent);
  const json s = status();
  const long long agent_total = s.is_object() && s["clear_nodes"].is_object()
                                    ? s["clear_nodes"].value("force_deleted_total", -1LL)
                                    : -1LL;
  if (!g_children.running(agent)) fail("the agent exited:\n" + readFile(log));

  // Report.
  std::vector<double> latency;
  int early = 0, missed = 0, wrong = 0, late_writes = 0;
  int node_first = 0, grace_first = 0;
  double earliest = std::nan("");
  for (const auto& p : pods) {
    if (p.written >= p.threshold) ++late_writes;
    if (p.control) {
      if (p.gone) ++wrong;
      continue;
    }
    const WallTime node_dead = dropped[static_cast<std::size_t>(p.node)] + tol;
    if (p.deleted_at + grace <= node_dead) {
      ++node_first;
    } else {
      ++grace_first;
    }
    if (!p.gone) {
      ++missed;
      continue;
    }
    const double l = ms(*p.gone - p.threshold);
    if (l < 0) ++early;
    latency.push_back(l);
    earliest = std::isnan(earliest) ? l : std::min(earliest, l);
  }
  // Pods sharing a threshold (whole seconds) are due at the same moment and deleted one after
  // the other: the first of each batch shows the wake-up, the rest the cost per delete.
  std::map<WallTime, std::vector<double>> batches;
  for (const auto& p : pods) {
    if (!p.control && p.gone) batches[p.threshold].push_back(ms(*p.gone - p.threshold));
  }
  std::vector<double> first_of_batch;
  std::size_t largest = 0;
  double per_delete = 0;
  int per_delete_n = 0;
  for (auto& [at, v] : batches) {
    std::sort(v.begin(), v.end());
    first_of_batch.push_back(v.front());
    largest = std::max(largest, v.size());
    if (v.size() > 1) {
      per_delete += (v.back() - v.front()) / static_cast<double>(v.size() - 1);
      ++per_delete_n;
    }
  }
  for (const auto& name : unexpected) {
    std::fprintf(stderr, "ekco-bench-clear: unexpected delete: %s\n", name.c_str());
  }
  std::fprintf(stderr,
               "ekco-bench-clear: bench writes at most %.1f ms after their second; %d thresholds "
               "passed before the bench's write (must be 0); agent force_deleted_total %lld\n",
               max_write_lag_ms, late_writes, agent_total);

  const int dead_pods = opt.dead * opt.pods_per_node;
  std::printf("| metric | ekco agent (measured) | EKCO (reconcile every 1 min; arithmetic) |\n");
  std::printf("|---|---|---|\n");
  row("nodes; dead nodes (drop-offs " + std::to_string(opt.stagger_ms) + " ms apart)",
      std::to_string(opt.nodes) + "; " + std::to_string(opt.dead),
      std::to_string(opt.nodes) + "; " + std::to_string(opt.dead));
  row("rules: node_unreachable_toleration; pod deletion grace",
      std::to_string(opt.toleration_s) + " s; " + std::to_string(opt.grace_s) + " s",
      "5 min; 30 s");
  row("terminating pods on dead nodes (threshold set by node dead; by pod grace)",
      std::to_string(dead_pods) + " (" + std::to_string(node_first) + "; " +
          std::to_string(grace_first) + ")",
      "-");
  row("pods force-deleted; missed", std::to_string(latency.size()) + "; " + std::to_string(missed),
      "-");
  auto secs = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", v);
    return std::string(buf);
  };
  row("reaction latency (gone - threshold) p50 / p95 / p99 / max",
      fmtMs(percentile(latency, 0.5)) + " / " + fmtMs(percentile(latency, 0.95)) + " / " +
          fmtMs(percentile(latency, 0.99)) + " / " + fmtMs(percentile(latency, 1.0)),
      secs(30) + " / " + secs(57) + " / " + secs(59.4) + " / " + secs(60));
  row("earliest (gone - threshold)", fmtMs(earliest), "0 s");
  {
    char text[96];
    std::snprintf(text, sizeof text, "%zu; %zu; %s / %s; %.1f ms", batches.size(), largest,
                  fmtMs(percentile(first_of_batch, 0.5)).c_str(),
                  fmtMs(percentile(first_of_batch, 1.0)).c_str(),
                  per_delete_n > 0 ? per_delete / per_delete_n : std::nan(""));
    row("distinct thresholds; largest batch due at once; first of a batch p50 / max; then per "
        "pod",
        text, "-");
  }
  row("early deletes (before the threshold; must be 0)", std::to_string(early), "-");
  row("pods deleted that must stay (" + std::to_string(control_nodes * opt.pods_per_node) +
          " terminating on live nodes, " +
          std::to_string((opt.nodes - opt.dead - control_nodes) * opt.pods_per_node) +
          " running; must be 0)",
      std::to_string(wrong + static_cast<int>(unexpected.size())), "-");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(rss) / 1024.0);
  row("agent RSS after the run (leader, " + std::to_string(opt.nodes) + " nodes cached)", buf, "-");

  api.stop();
  return early == 0 && missed == 0 && wrong == 0 && unexpected.empty() && late_writes == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ekco-bench-clear: threshold to force delete of pods stuck on dead nodes"};
  Options opt;
  app.add_option("--ekco", opt.ekco, "the ekco binary")->required();
  app.add_option("--nodes", opt.nodes, "nodes in the cluster")->check(CLI::Range(2, 10000));
  app.add_option("--dead", opt.dead, "nodes that drop off")->check(CLI::Range(1, 10000));
  app.add_option("--pods-per-node", opt.pods_per_node, "pods per node")
      ->check(CLI::Range(1, 10000));
  app.add_option("--toleration", opt.toleration_s, "node_unreachable_toleration, seconds")
      ->check(CLI::Range(1, 600));
  app.add_option("--grace", opt.grace_s, "clear_pod_deletion_grace, seconds")
      ->check(CLI::Range(1, 600));
  app.add_option("--stagger-ms", opt.stagger_ms, "between two nodes dropping off")
      ->check(CLI::Range(0, 600000));
  app.add_option("--work-dir", opt.work_dir, "use (and keep) this directory instead of a temp dir");
  app.add_flag("--keep", opt.keep, "keep the temp directory (logs) afterwards");
  CLI11_PARSE(app, argc, argv);
  return ekco::bench::runBench("ekco-bench-clear", [&] { return run(opt); });
}
