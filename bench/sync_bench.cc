// ekco-bench-sync: how fast informers sync a large cluster and what their caches cost.
// Run by bench/sync.sh against ekco-kubesim --generate-nodes N --generate-pods M; prints a
// Markdown table (BENCHMARKS.md).
//
// Memory is glibc's in-use heap (mallinfo2().uordblks) before and after each informer syncs,
// so it counts what the cache keeps, not what parsing the lists used and freed. CPU is this
// process's user+sys (getrusage, every thread) from before the first informer starts until the
// pods have synced; with --server-pid, the server's own user+sys over the same span is printed
// beside it (both share the machine's cores, so wall time alone would mix them).
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/records.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "kube/watch/informer.h"

namespace {

using namespace ekco;  // NOLINT
using Clock = std::chrono::steady_clock;
using kube::Json;

std::size_t heapInUse() {
  ::malloc_trim(0);
  return ::mallinfo2().uordblks;
}

std::size_t rssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// User+sys CPU seconds of this process (all threads).
double selfCpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

// User+sys CPU seconds of another process from /proc/<pid>/stat (fields 14 and 15), or -1.
double processCpuSeconds(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string mib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string ms(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", std::chrono::duration<double, std::milli>(d).count());
  return buf;
}

void row(const std::string& metric, const std::string& value) {
  std::printf("| %s | %s |\n", metric.c_str(), value.c_str());
}

int fail(const std::string& message) {
  std::fprintf(stderr, "ekco-bench-sync: %s\n", message.c_str());
  return 1;
}

// Runs an informer on a thread until destroyed.
class Running {
 public:
  explicit Running(kube::InformerBase& informer)
      : informer_(informer), thread_([this] { informer_.run(); }) {}
  ~Running() {
    informer_.stop();
    thread_.join();
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

 private:
  kube::InformerBase& informer_;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ekco-bench-sync: informer sync time and cache memory against an API server"};
  std::string kubeconfig;
  std::int64_t page_size = 500;
  int updates = 200;
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig of the server")->required();
  app.add_option("--page-size", page_size, "list page size");
  app.add_option("--updates", updates, "pod status changes to time through the watch");
  long server_pid = 0;
  app.add_option("--server-pid", server_pid,
                 "the API server's pid: its CPU over the sync is printed beside the client's");
  CLI11_PARSE(app, argc, argv);

  base::SystemClock clock;
  auto fs = hostfs::LocalHostFs::open("/", clock);
  if (!fs) return fail(fs.error().message());
  // A relative --kubeconfig is relative to the current directory, as for kubectl and ekco.
  auto conn = kube::loadKubeconfig(**fs, std::filesystem::absolute(kubeconfig).string());
  if (!conn) return fail(conn.error().message());
  auto transport = kube::CurlTransport::create(*conn, fs->get(), clock, {});
  if (!transport) return fail(transport.error().message());
  kube::RestClient client(**transport, clock, {.request_timeout = std::chrono::seconds(120)});

  // Warm the connection so TLS set-up is not billed to the first informer.
  if (auto warm = client.list(kube::resources::kNodes, "", {.limit = 1}); !warm) {
    return fail(warm.error().message());
  }

  const kube::InformerOptions options{.page_size = page_size};
  std::printf("| metric | value |\n|---|---|\n");

  const std::size_t heap0 = heapInUse();
  const double cpu0 = selfCpuSeconds();
  const double server_cpu0 = server_pid > 0 ? processCpuSeconds(server_pid) : -1;
  kube::Informer<kube::NodeRecord> nodes(client, clock, kube::resources::kNodes, "", options,
                                         kube::decodeNode);
  auto t0 = Clock::now();
  Running run_nodes(nodes);
  if (!nodes.waitForSync(std::chrono::minutes(10))) return fail("nodes did not sync");
  const auto node_sync = Clock::now() - t0;
  const std::size_t heap1 = heapInUse();

  std::mutex mu;
  std::condition_variable cv;
  std::string awaited;  // the pod whose update the timing loop waits for
  bool arrived = false;
  kube::Informer<kube::PodRecord> pods(
      client, clock, kube::resources::kPods, "", options, kube::decodePod,
      {.on_update = [&](const kube::PodRecord&, const kube::PodRecord& after) {
        std::lock_guard lock(mu);
        if (after.name == awaited) {
          arrived = true;
          cv.notify_all();
        }
      }});
  t0 = Clock::now();
  Running run_pods(pods);
  if (!pods.waitForSync(std::chrono::minutes(30))) return fail("pods did not sync");
  const auto pod_sync = Clock::now() - t0;
  // Before anything else (heapInUse() trims the heap, which would flatter the RSS).
  const double client_cpu = selfCpuSeconds() - cpu0;
  const double server_cpu = server_pid > 0 ? processCpuSeconds(server_pid) - server_cpu0 : -1;
  const std::size_t rss_synced = rssBytes();
  const std::size_t heap2 = heapInUse();

  const std::size_t n_nodes = nodes.size();
  const std::size_t n_pods = pods.size();
  const std::size_t node_bytes = heap1 > heap0 ? heap1 - heap0 : 0;
  const std::size_t pod_bytes = heap2 > heap1 ? heap2 - heap1 : 0;

  // For comparison: the same pods kept as whole JSON objects (one page's worth, per pod).
  std::size_t json_per_pod = 0;
  {
    const std::size_t before = heapInUse();
    auto page = client.list(kube::resources::kPods, "", {.limit = 1000});
    if (!page) return fail(page.error().message());
    std::vector<Json> kept;
    for (auto& item : (*page)["items"]) kept.push_back(std::move(item));
    page = Json();
    const std::size_t after = heapInUse();
    if (!kept.empty()) json_per_pod = (after > before ? after - before : 0) / kept.size();
  }

  // Watch latency: change a kept field (status.phase) and time until the handler sees it.
  std::vector<Clock::duration> latencies;
  auto sample = pods.list();
  for (int i = 0; i < updates && !sample.empty(); ++i) {
    const auto& target = sample[static_cast<std::size_t>(i) % sample.size()];
    // Each pass over the sample flips the phase of every pod (Running → Failed → Running).
    const bool odd_pass = (static_cast<std::size_t>(i) / sample.size()) % 2 == 1;
    const std::string phase = odd_pass ? "Running" : "Failed";
    {
      std::lock_guard lock(mu);
      awaited = target.name;
      arrived = false;
    }
    const auto start = Clock::now();
    auto patched =
        client.patch(kube::resources::kPods, target.ns.view(), target.name, kube::PatchType::kMerge,
                     Json{{"status", {{"phase", phase}}}}, "status");
    if (!patched) return fail(patched.error().message());
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return arrived; })) {
      auto st = pods.stats();
      return fail("watch event for " + target.name + " (update " + std::to_string(i) +
                  ") did not arrive; watches " + std::to_string(st.watches) + ", events " +
                  std::to_string(st.events) + ", last error: " + st.last_error);
    }
    latencies.push_back(Clock::now() - start);
  }
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    if (latencies.empty()) return Clock::duration{};
    return latencies[static_cast<std::size_t>(p * static_cast<double>(latencies.size() - 1))];
  };

  auto per = [](std::size_t bytes, std::size_t n) {
    return n == 0 ? std::string("-") : std::to_string(bytes / n) + " B";
  };
  row("nodes cached", std::to_string(n_nodes));
  row("node list+watch sync", ms(node_sync));
  row("node cache memory", mib(node_bytes) + " (" + per(node_bytes, n_nodes) + " per node)");
  row("pods cached", std::to_string(n_pods));
  row("pod list+watch sync (page size " + std::to_string(page_size) + ")", ms(pod_sync));
  row("pod sync rate",
      std::to_string(static_cast<long long>(static_cast<double>(n_pods) /
                                            std::chrono::duration<double>(pod_sync).count())) +
          " pods/s");
  row("pod cache memory", mib(pod_bytes) + " (" + per(pod_bytes, n_pods) + " per pod)");
  row("client CPU (user+sys) to list+cache nodes and pods", seconds(client_cpu));
  if (server_pid > 0) row("server CPU (user+sys) over the same sync", seconds(server_cpu));
  row("process RSS right after the pod sync", mib(rss_synced));
  row("same pod as whole nlohmann::json", std::to_string(json_per_pod) + " B per pod");
  row("watch event latency p50 / p99 / max (" + std::to_string(latencies.size()) + " updates)",
      ms(pct(0.5)) + " / " + ms(pct(0.99)) + " / " + ms(pct(1.0)));
  row("process RSS after sync", mib(rssBytes()));
  row("interned strings", std::to_string(kube::Atom::poolSize()));
  return 0;
}
