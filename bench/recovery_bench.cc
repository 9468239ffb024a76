// ekco-bench-recovery: how long a StatefulSet pod with a ReadWriteOnce volume takes to run again
// elsewhere after its node goes silent, with the shutdown beacon (`ekco shutdown`, then the
// leader's out-of-service taint) and without it (power loss: the taint manager's eviction,
// clear-nodes, the attach-detach controller's wait). Run by bench/recovery.sh; prints a Markdown
// table (BENCHMARKS.md).
//
// Per trial and path: one in-process ekco-kubesim simulating the kubelets, the node lifecycle
// controller, the taint manager, the pod GC, the attach-detach controller and the StatefulSet
// (tests/kubesim/controllers/node_lifecycle.h) with every Kubernetes timing × SCALE; one real `ekco
// agent` (the leader, on node-a) whose durations are scaled alike (node_unreachable_toleration 5m,
// clear_pod_deletion_grace 30s, shutdown_out_of_service_grace 15s, all × SCALE). The pod runs
// on node-b, in a namespace `ekco shutdown` leaves alone (as the storage providers' are), so it
// is still there when the node goes silent. Measured from the moment node-b's kubelet stops: the
// old pod gone from the API, and the new one Running on node-c (its volume attached there). The
// unscaled figure is the scaled one ÷ SCALE: the simulation's periods and the agent's durations
// all scale, the agent's own reaction (milliseconds) is divided too, so it is an upper bound.
//
// Every process is killed and reaped on every exit path (bench_support.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/serve/health_server.h"
#include "bench/bench_support.h"
#include "tests/kubesim/server/server.h"

namespace {

using ekco::bench::eventually;
using ekco::bench::fail;
using ekco::bench::g_children;
using ekco::bench::readFile;

using namespace ekco;  // NOLINT
namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

struct Options {
  std::string ekco{};
  double scale = 0.05;
  int trials = 2;
  std::string work_dir{};
  bool keep = false;
};

struct Trial {
  double gone_s = std::nan("");     // scaled seconds: old pod gone from the API
  double running_s = std::nan("");  // scaled seconds: new pod Running on another node
  bool tainted = false;             // the node got the out-of-service taint
};

json nodeJson(const std::string& name, bool unschedulable) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
            {"spec", json::object()},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (unschedulable) n["spec"]["unschedulable"] = true;
  return n;
}

std::string durationMs(double seconds_value) {
  return std::to_string(std::max<long long>(1, std::llround(seconds_value * 1000))) + "ms";
}

Trial runTrial(const Options& opt, bool beacon, int index) {
  const fs::path dir =
      fs::path(opt.work_dir) / ((beacon ? "beacon-" : "plain-") + std::to_string(index));
  fs::create_directories(dir);
  std::vector<json> objects = {kubesim::namespaceObject("kurl"),
                               kubesim::namespaceObject("storage"), nodeJson("node-a", true),
                               nodeJson("node-b", false), nodeJson("node-c", false)};
  const int grace = std::max(1, static_cast<int>(std::lround(30 * opt.scale)));
  for (json& o : kubesim::statefulSetWithVolume("storage", "db", grace)) objects.push_back(o);
  auto started = kubesim::Server::start(
      {.out_dir = (dir / "sim").string(),
       .objects = objects,
       .kubelet_interval = milliseconds(20),
       .controllers = kubesim::ClusterControllersOptions::scaled(opt.scale)});
  if (!started) fail(started.error().message());
  // Stopped by its destructor on every way out of this function (a failure is an exception).
  std::unique_ptr<kubesim::Server> server = std::move(*started);
  const std::vector<std::pair<std::string, std::string>> boots = {
      {"node-a", "0a0a0a0a-0000-4000-8000-00000000000a"},
      {"node-b", "0b0b0b0b-0000-4000-8000-0000000000b1"},
      {"node-c", "0c0c0c0c-0000-4000-8000-00000000000c"}};
  for (const auto& [node, boot] : boots) {
    server->nodeLifecycle().startKubelet(node, boot);
    fs::create_directories(dir / node / "etc/kubernetes");
    fs::create_directories(dir / node / "proc/sys/kernel/random");
    std::ofstream(dir / node / "etc/kubernetes/kubelet.conf") << "# joined\n";
    std::ofstream(dir / node / "proc/mounts") << "/dev/sda1 / ext4 rw 0 0\n";
    std::ofstream(dir / node / "proc/sys/kernel/random/boot_id") << boot << "\n";
  }
  std::ofstream(dir / "config.yaml")
      << "leader_election_lease_duration: 3s\nleader_election_renew_deadline: 2s\n"
         "leader_election_retry_period: 500ms\n"
      << "node_unreachable_toleration: " << durationMs(300 * opt.scale) << "\n"
      << "clear_pod_deletion_grace: " << durationMs(30 * opt.scale) << "\n"
      << "shutdown_out_of_service_grace: " << durationMs(15 * opt.scale) << "\n"
      << "shutdown_excluded_namespaces: [kube-system, storage]\n"
         "shutdown_unmount_timeout: 5s\n";
  auto db = [&] { return server->get("pods", "storage", "db-0"); };
  auto on = [&](const std::string& node) {
    auto p = db();
    return p && (*p)["spec"].value("nodeName", "") == node &&
           !(*p)["metadata"].contains("deletionTimestamp") &&
           (*p)["status"].value("phase", "") == "Running";
  };
  if (!eventually([&] { return on("node-b"); }, seconds(20))) fail("db-0 never ran on node-b");
  const std::string socket = (dir / "a.sock").string();
  const std::string log = (dir / "agent.log").string();
  const pid_t agent =
      g_children.spawn({opt.ekco, "agent", "--config", (dir / "config.yaml").string(),
                        "--kubeconfig", server->kubeconfigPath(), "--node-name", "node-a",
                        "--host-root", (dir / "node-a").string(), "--socket", socket},
                       log);
  if (agent <= 0) fail("cannot start " + opt.ekco);
  const bool leading = eventually(
      [&] {
        auto reply = agent::queryHealthSocket(socket, "/status", milliseconds(2000));
        if (!reply || reply->status != 200) return false;
        json s = json::parse(reply->body, nullptr, false);
        return s.is_object() && s.value("is_leader", false) && s["node_recovery"].is_object() &&
               s["node_recovery"].value("synced", false) && s["clear_nodes"].is_object() &&
               s["clear_nodes"].value("synced", false);
      },
      seconds(60));
  if (!leading) fail("the agent never led:\n" + readFile(log));
  if (beacon) {
    const std::string shutdown_log = (dir / "shutdown.log").string();
    const pid_t pid =
        g_children.spawn({opt.ekco, "shutdown", "--config", (dir / "config.yaml").string(),
                          "--kubeconfig", server->kubeconfigPath(), "--node-name", "node-b",
                          "--host-root", (dir / "node-b").string()},
                         shutdown_log);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fail("ekco shutdown failed:\n" + readFile(shutdown_log));
    }
  }
  const std::string old_uid = (*db())["metadata"].value("uid", "");
  Trial t;
  const auto silent = Steady::now();
  server->nodeLifecycle().stopKubelet("node-b");
  const auto limit = std::chrono::duration_cast<Steady::duration>(
      std::chrono::duration<double>(1800 * opt.scale + 30));  // 30 unscaled minutes
  while (Steady::now() - silent < limit) {
    const double elapsed = std::chrono::duration<double>(Steady::now() - silent).count();
    auto p = db();
    if (std::isnan(t.gone_s) && (!p || (*p)["metadata"].value("uid", "") != old_uid)) {
      t.gone_s = elapsed;
    }
    if (on("node-c")) {
      t.running_s = elapsed;
      break;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  for (const json& taint : server->get("nodes", "", "node-b")
                               .value_or(json::object())
                               .value("spec", json::object())
                               .value("taints", json::array())) {
    t.tainted = t.tainted || taint.value("key", "") == "node.kubernetes.io/out-of-service";
  }
  if (std::isnan(t.running_s)) fail("db-0 never ran on node-c:\n" + readFile(log));
  ::kill(-agent, SIGKILL);  // the next trial starts a new leader on a new cluster
  ::waitpid(agent, nullptr, 0);
  if (!opt.keep) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return t;
}

std::string figure(const std::vector<double>& scaled, double scale) {
  if (scaled.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(scaled.begin(), scaled.end());
  double sum = 0;
  for (double v : scaled) sum += v;
  const double mean = sum / static_cast<double>(scaled.size());
  auto unscaled = [scale](double v) {
    const double s = v / scale;
    char buf[32];
    if (s < 120) {
      std::snprintf(buf, sizeof buf, "%.0f s", s);
    } else {
      std::snprintf(buf, sizeof buf, "%dm%02.0fs", static_cast<int>(s / 60), std::fmod(s, 60.0));
    }
    return std::string(buf);
  };
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.2f s (%.2f–%.2f) | **%s** (%s–%s)", mean, *lo, *hi,
                unscaled(mean).c_str(), unscaled(*lo).c_str(), unscaled(*hi).c_str());
  return buf;
}

int run(Options opt) {
  if (opt.work_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "ekco-bench-recovery-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp failed");
    opt.work_dir = tmpl;
  }
  g_children.setWorkDir(opt.work_dir, opt.keep);
  std::vector<double> b_gone, b_run, p_gone, p_run;
  int b_tainted = 0, p_tainted = 0;
  for (int i = 0; i < opt.trials; ++i) {
    for (bool beacon : {true, false}) {
      Trial t = runTrial(opt, beacon, i);
      std::fprintf(stderr, "ekco-bench-recovery: trial %d %s: gone %.2f s, running %.2f s%s\n", i,
                   beacon ? "beacon" : "no beacon", t.gone_s, t.running_s,
                   t.tainted ? ", tainted out-of-service" : "");
      (beacon ? b_gone : p_gone).push_back(t.gone_s);
      (beacon ? b_run : p_run).push_back(t.running_s);
      (beacon ? b_tainted : p_tainted) += t.tainted ? 1 : 0;
    }
  }
  std::printf(
      "| path (%d trials each; scale %.3g) | measure | scaled: mean (min–max) | "
      "unscaled: mean (min–max) | goal |\n",
      opt.trials, opt.scale);
  std::printf("|---|---|---|---|---|\n");
  std::printf("| with the beacon (`ekco shutdown`) | node silent → pod gone from it | %s | - |\n",
              figure(b_gone, opt.scale).c_str());
  std::printf("| with the beacon | node silent → pod Running elsewhere | %s | < 60 s |\n",
              figure(b_run, opt.scale).c_str());
  std::printf(
      "| without the beacon (power loss) | node silent → pod gone from it | %s | ≥ 6 m 10 s "
      "(seeds) |\n",
      figure(p_gone, opt.scale).c_str());
  std::printf("| without the beacon | node silent → pod Running elsewhere | %s | - |\n",
              figure(p_run, opt.scale).c_str());
  std::printf(
      "| out-of-service taint applied (with; without the beacon) | trials | %d of %d; %d "
      "of %d | - | %d; 0 |\n",
      b_tainted, opt.trials, p_tainted, opt.trials, opt.trials);
  const double worst_beacon = *std::max_element(b_run.begin(), b_run.end()) / opt.scale;
  return worst_beacon < 60 && p_tainted == 0 && b_tainted == opt.trials ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ekco-bench-recovery: a stateful pod's way back after its node goes silent"};
  Options opt;
  app.add_option("--ekco", opt.ekco, "the ekco binary")->required();
  app.add_option("--scale", opt.scale, "Kubernetes' and ekco's timings × this")
      ->check(CLI::Range(0.005, 1.0));
  app.add_option("--trials", opt.trials, "trials per path")->check(CLI::Range(1, 100));
  app.add_option("--work-dir", opt.work_dir, "use (and keep) this directory instead of a temp dir");
  app.add_flag("--keep", opt.keep, "keep the work directory (logs) afterwards");
  CLI11_PARSE(app, argc, argv);
  return ekco::bench::runBench("ekco-bench-recovery", [&] { return run(opt); });
}
