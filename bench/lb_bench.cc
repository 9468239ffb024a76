// ekco-bench-lb: how long after the default/kubernetes EndpointSlices change every node's internal
// load balancer serves the new backend set. Run by bench/lb.sh; prints a Markdown table
// (BENCHMARKS.md).
//
// Everything runs on loopback:
//   - three TLS apiservers (in-process ekco-kubesim servers sharing one PKI), each holding the
//     ConfigMap default/who whose data.apiserver is its name (a, b, c);
//   - the "cluster API" (one more ekco-kubesim) with N Node objects and the EndpointSlices of the
//     kubernetes Service;
//   - N simulated nodes, each an `ekco agent` process (internal load balancer on, its own host
//     root, bind 127.0.0.1:<port of the node>) and a real HAProxy (`haproxy -W -db -f
//     <root>/etc/haproxy/haproxy.cfg`, what the static pod runs) started once the agent wrote the
//     file.
//
// Each change moves the Service to the next apiserver (a -> b -> c -> a ...): the new slice is
// put, then the old one removed, as the test does. From that moment (t0), per node:
//   - "config written": a thread reads the node's haproxy.cfg every 2 ms; the time when it names
//     the new apiserver and no longer the old one;
//   - "served": a thread opens a NEW TLS connection through the node's HAProxy every ~5 ms and
//     GETs default/who (HAProxy balances connections, so a reused connection would prove
//     nothing). The sample is the completion time of the first probe of the final run of probes
//     that all answered from the new apiserver (a run of at least 300 ms and 5 probes), so an
//     early lucky answer while the old apiserver was still in the config does not count.
// Probes and file polls stop when every node is stable; the next change follows.
//
// Every child runs in a process group of its own and is killed (SIGKILL to the group) and reaped
// on every exit path, including SIGINT/SIGTERM/SIGHUP; the work directory is removed.
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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "bench/bench_support.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
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
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A loopback port nobody listens on right now.
std::uint16_t freePort() {
  auto port = kubesim::freeLoopbackPort();
  if (!port) fail(port.error().message());
  return *port;
}

// The ConfigMap each apiserver holds, so a request shows which one answered.
json whoAmI(const std::string& who) {
  return kubesim::configMapObject("default", "who", {{"apiserver", who}});
}

json slice(const std::string& name, std::uint16_t port) {
  return kubesim::kubernetesEndpointSlice(name, {"127.0.0.1"}, port);
}

json node(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

double msSince(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

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

void row(const std::string& metric, const std::string& value) {
  std::printf("| %s | %s |\n", metric.c_str(), value.c_str());
}

// ---------------------------------------------------------------------------------------------
// The simulated cluster.

struct Node {
  std::string name{};
  fs::path root{};
  fs::path cfg{};
  std::string log{};
  std::string haproxy_log{};
  std::uint16_t port = 0;
  pid_t agent = -1;
  pid_t haproxy = -1;
};

// One probe through a node's HAProxy on a new connection: the apiserver that answered, or "".
std::string whoAnswers(std::uint16_t port, const kubesim::Pki& pki, const base::Clock& clock) {
  kube::Connection connection{.server = "https://127.0.0.1:" + std::to_string(port),
                              .ca_pem = pki.ca_cert_pem,
                              .client_cert_pem = pki.client_cert_pem,
                              .client_key_pem = pki.client_key_pem};
  auto transport = kube::CurlTransport::create(std::move(connection), nullptr, clock,
                                               {.connect_timeout = seconds(5)});
  if (!transport) return "";
  kube::RestClient client(**transport, clock,
                          {.request_timeout = seconds(5), .retry = {.max_attempts = 1}});
  auto cm = client.get(kube::resources::kConfigMaps, "default", "who");
  if (!cm) return "";
  return (*cm)["data"].value("apiserver", "");
}

// " 127.0.0.1:PORT " as a server line of haproxy.cfg names it (followed by " weight ...").
std::string serverNeedle(std::uint16_t port) { return " 127.0.0.1:" + std::to_string(port) + " "; }

struct Sample {
  double written_ms = std::nan("");  // the node's haproxy.cfg names only the new apiserver
  double served_ms = std::nan("");   // new connections through its HAProxy reach it
  int config_versions = 0;           // distinct haproxy.cfg contents seen after t0
  int probes = 0;
  int failed_probes = 0;  // no answer at all (connection refused, reset, timeout)
  int flaps = 0;          // an old-apiserver answer after a new-apiserver one
};

struct Options {
  std::string ekco{};
  std::string haproxy = "/usr/sbin/haproxy";
  int nodes = 3;
  int changes = 20;
  std::string work_dir{};
  bool keep = false;
  int poll_ms = 5;
  int stable_ms = 300;
  int timeout_s = 15;
};

int run(const Options& opt) {
  base::SystemClock clock;
  fs::path dir = opt.work_dir;
  if (dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "ekco-bench-lb-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp failed");
    dir = tmpl;
  } else {
    fs::create_directories(dir);
  }
  g_children.setWorkDir(dir, opt.keep || !opt.work_dir.empty());
  std::fprintf(stderr, "ekco-bench-lb: work directory %s\n", dir.c_str());

  // Three apiservers with one CA and serving certificate.
  const std::vector<std::string> names = {"a", "b", "c"};
  std::vector<std::unique_ptr<kubesim::Server>> apiservers;
  for (const auto& name : names) {
    kubesim::ServerOptions options{.out_dir = (dir / ("apiserver-" + name)).string(),
                                   .objects = {whoAmI(name)}};
    if (!apiservers.empty()) options.pki = apiservers.front()->pki();
    auto server = kubesim::Server::start(std::move(options));
    if (!server) fail("apiserver " + name + ": " + server.error().message());
    apiservers.push_back(std::move(*server));
  }
  const kubesim::Pki pki = apiservers.front()->pki();
  auto sliceName = [&](std::size_t i) { return "kubernetes-" + names[i]; };

  // The cluster API: N nodes, the kubernetes Service on apiserver a.
  std::vector<json> objects = {slice(sliceName(0), apiservers[0]->port())};
  std::vector<Node> nodes(static_cast<std::size_t>(opt.nodes));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].name = "node-" + std::to_string(i + 1);
    objects.push_back(node(nodes[i].name));
  }
  auto api = kubesim::Server::start({.out_dir = (dir / "api").string(), .objects = objects});
  if (!api) fail("cluster API: " + api.error().message());

  // The agents.
  std::set<std::uint16_t> used;
  for (auto& n : nodes) {
    do n.port = freePort();
    while (!used.insert(n.port).second);
    const fs::path home = dir / n.name;
    n.root = home / "root";
    n.cfg = n.root / "etc/haproxy/haproxy.cfg";
    n.log = (home / "agent.log").string();
    n.haproxy_log = (home / "haproxy.log").string();
    fs::create_directories(n.root / "etc/kubernetes");
    std::ofstream(home / "config.yaml")
        << "enable_internal_load_balancer: true\n"
        << "internal_load_balancer_bind: 127.0.0.1:" << n.port << "\n";
    n.agent = g_children.spawn(
        {opt.ekco, "agent", "--config", (home / "config.yaml").string(), "--kubeconfig",
         (*api)->kubeconfigPath(), "--node-name", n.name, "--host-root", n.root.string(),
         "--socket", (home / "agent.sock").string()},
        n.log);
    if (n.agent <= 0) fail("cannot start " + opt.ekco);
  }
  const auto started = Clock::now();
  for (auto& n : nodes) {
    const fs::path manifest = n.root / "etc/kubernetes/manifests/haproxy.yaml";
    if (!eventually([&] { return fs::exists(manifest) || !g_children.running(n.agent); },
                    seconds(60)) ||
        !fs::exists(manifest)) {
      fail(n.name + ": the agent wrote no haproxy.yaml:\n" + readFile(n.log));
    }
  }
  std::fprintf(stderr, "ekco-bench-lb: %d agents wrote haproxy.cfg within %.0f ms of starting\n",
               opt.nodes, msSince(started, Clock::now()));

  // Each node's HAProxy, as the static pod would run it.
  for (auto& n : nodes) {
    n.haproxy = g_children.spawn({opt.haproxy, "-W", "-db", "-f", n.cfg.string()}, n.haproxy_log);
    if (n.haproxy <= 0) fail("cannot start " + opt.haproxy);
  }
  for (auto& n : nodes) {
    if (!eventually([&] { return whoAnswers(n.port, pki, clock) == "a"; }, seconds(30))) {
      fail(n.name + ": HAProxy does not answer from a:\n" + readFile(n.haproxy_log));
    }
  }
  // Let every agent settle (it may still be confirming a reload of the freshly started master).
  std::this_thread::sleep_for(seconds(1));

  // The changes.
  std::vector<std::vector<Sample>> samples(static_cast<std::size_t>(opt.changes),
                                           std::vector<Sample>(nodes.size()));
  std::size_t current = 0;
  for (int c = 0; c < opt.changes; ++c) {
    const std::size_t next = (current + 1) % names.size();
    const std::string old_needle = serverNeedle(apiservers[current]->port());
    const std::string new_needle = serverNeedle(apiservers[next]->port());
    const std::string& want = names[next];
    std::vector<Sample>& row_samples = samples[static_cast<std::size_t>(c)];
    std::atomic<int> probing{static_cast<int>(nodes.size())};
    std::vector<std::string> before(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) before[i] = readFile(nodes[i].cfg);

    const auto t0 = Clock::now();
    const auto deadline = t0 + seconds(opt.timeout_s);
    if (!(*api)->put(slice(sliceName(next), apiservers[next]->port()))) fail("put slice");
    if (!(*api)->remove("endpointslices.discovery.k8s.io", "default", sliceName(current))) {
      fail("remove slice");
    }

    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      Sample* sp = &row_samples[i];
      const Node* np = &nodes[i];
      // Served: the first probe of the final all-new run.
      threads.emplace_back([&, sp, np] {
        Sample& s = *sp;
        const Node& n = *np;
        std::optional<Clock::time_point> run_start;
        int run_probes = 0;
        bool seen_new = false;
        while (Clock::now() < deadline) {
          const std::string who = whoAnswers(n.port, pki, clock);
          const auto done = Clock::now();
          ++s.probes;
          if (who == want) {
            seen_new = true;
            if (!run_start) run_start = done;
            ++run_probes;
            if (done - *run_start >= milliseconds(opt.stable_ms) && run_probes >= 5) break;
          } else {
            if (who.empty()) ++s.failed_probes;
            if (seen_new && !who.empty()) ++s.flaps;
            run_start.reset();
            run_probes = 0;
          }
          std::this_thread::sleep_for(milliseconds(opt.poll_ms));
        }
        if (run_start) s.served_ms = msSince(t0, *run_start);
        --probing;
      });
      // Written: the config names the new apiserver and not the old one.
      threads.emplace_back([&, sp, np, i] {
        Sample& s = *sp;
        const Node& n = *np;
        std::string last = before[i];
        while (Clock::now() < deadline) {
          const auto t = Clock::now();
          std::string text = readFile(n.cfg);
          if (!text.empty() && text != last) {
            ++s.config_versions;
            last = text;
          }
          if (std::isnan(s.written_ms) && text.find(new_needle) != std::string::npos &&
              text.find(old_needle) == std::string::npos) {
            s.written_ms = msSince(t0, t);
          }
          // Keep counting versions while the probes run.
          if (!std::isnan(s.written_ms) && probing.load() == 0) break;
          std::this_thread::sleep_for(milliseconds(2));
        }
      });
    }
    for (auto& t : threads) t.join();

    double worst = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const Sample& s = row_samples[i];
      if (std::isnan(s.served_ms) || std::isnan(s.written_ms)) {
        fail(nodes[i].name + ": change " + std::to_string(c + 1) + " to " + want +
             " not served within " + std::to_string(opt.timeout_s) + " s\nagent log:\n" +
             readFile(nodes[i].log) + "\nhaproxy log:\n" + readFile(nodes[i].haproxy_log));
      }
      worst = std::max(worst, s.served_ms);
    }
    std::fprintf(stderr, "ekco-bench-lb: change %d/%d (%s -> %s): slowest node %.0f ms\n", c + 1,
                 opt.changes, names[current].c_str(), want.c_str(), worst);
    current = next;
    // A pause between changes: old HAProxy workers finish, the agents go idle.
    std::this_thread::sleep_for(milliseconds(200));
  }

  // Idle memory of the agents.
  std::this_thread::sleep_for(seconds(2));
  std::vector<long> rss;
  for (const auto& n : nodes) rss.push_back(vmRssKib(n.agent));

  // Report.
  std::vector<double> served, written, reload;
  std::vector<double> node_p95;
  int versions_max = 0, versions_two = 0, probes = 0, failed = 0, flaps = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::vector<double> mine;
    for (const auto& change : samples) {
      const Sample& s = change[i];
      served.push_back(s.served_ms);
      written.push_back(s.written_ms);
      reload.push_back(s.served_ms - s.written_ms);
      mine.push_back(s.served_ms);
      versions_max = std::max(versions_max, s.config_versions);
      if (s.config_versions > 1) ++versions_two;
      probes += s.probes;
      failed += s.failed_probes;
      flaps += s.flaps;
    }
    node_p95.push_back(percentile(mine, 0.95));
  }
  const auto slowest = std::max_element(node_p95.begin(), node_p95.end());
  auto triple = [](const std::vector<double>& v) {
    return fmtMs(percentile(v, 0.5)) + " / " + fmtMs(percentile(v, 0.95)) + " / " +
           fmtMs(percentile(v, 1.0));
  };
  std::printf("| metric | value |\n|---|---|\n");
  row("nodes (agent + HAProxy each)", std::to_string(opt.nodes));
  row("endpoint changes", std::to_string(opt.changes));
  row("samples (node x change)", std::to_string(served.size()));
  row("change -> new connections served, p50 / p95 / max", triple(served));
  row("slowest node's p95", fmtMs(*slowest) + " (" +
                                nodes[static_cast<std::size_t>(slowest - node_p95.begin())].name +
                                ")");
  row("change -> agent wrote the new haproxy.cfg, p50 / p95 / max", triple(written));
  row("haproxy.cfg written -> served (reload), p50 / p95 / max", triple(reload));
  row("haproxy.cfg versions per change (max; samples with > 1)",
      std::to_string(versions_max) + "; " + std::to_string(versions_two));
  row("probes (new TLS connections); failed; old answer after new",
      std::to_string(probes) + "; " + std::to_string(failed) + "; " + std::to_string(flaps));
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f MiB (all agents: %.1f - %.1f MiB)",
                static_cast<double>(rss.front()) / 1024.0,
                static_cast<double>(*std::min_element(rss.begin(), rss.end())) / 1024.0,
                static_cast<double>(*std::max_element(rss.begin(), rss.end())) / 1024.0);
  row("agent RSS, idle, LB enabled (node-1)", buf);

  (*api)->stop();
  for (auto& s : apiservers) s->stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ekco-bench-lb: EndpointSlice change to served by every node's HAProxy"};
  Options opt;
  app.add_option("--ekco", opt.ekco, "the ekco binary")->required();
  app.add_option("--haproxy", opt.haproxy, "the HAProxy binary");
  app.add_option("--nodes", opt.nodes, "simulated nodes (agent + HAProxy each)")
      ->check(CLI::Range(1, 100));
  app.add_option("--changes", opt.changes, "endpoint changes to time")->check(CLI::Range(1, 10000));
  app.add_option("--work-dir", opt.work_dir, "use (and keep) this directory instead of a temp dir");
  app.add_flag("--keep", opt.keep, "keep the temp directory (logs) afterwards");
  app.add_option("--poll-ms", opt.poll_ms, "pause between probes of one node");
  app.add_option("--stable-ms", opt.stable_ms, "all-new answers for this long end a sample");
  app.add_option("--timeout", opt.timeout_s, "seconds a change may take on a node");
  CLI11_PARSE(app, argc, argv);
  return ekco::bench::runBench("ekco-bench-lb", [&] { return run(opt); });
}
