// ekco-bench-webhook-load: the pod image overrides webhook under hostile and idle clients (issue
// 34). Run by bench/webhook_load.sh; prints a Markdown table (BENCHMARKS.md) with the goal beside
// each figure.
//
// The real server (agent/features/webhook/webhook_server.h, the agent's default limits) and review
// (agent/features/webhook/image_overrides.h) run in a child process of their own, so that its
// memory (VmHWM, VmRSS from /proc) is the server's alone; this process is the clients, all on
// loopback.
//   1. 128 idle TCP connections (from 127.0.0.2, never a byte) are held for the whole run; then
//      well-formed reviews are timed: the first one on a new connection right away, then on a
//      kept-alive TLS connection, and on a new connection each (the handshake included).
//   2. Then `--hostile` clients (each from its own loopback address) send 3 MiB reviews back to
//      back for `--seconds`, of three shapes (a 3 MiB annotation; 3 MiB of empty containers, the
//      worst case of a DOM parse; 3 MiB of numbers), while the well-formed reviews go on; the
//      server's peak RSS is taken over this phase (clear_refs resets it first).
//   3. The server's RSS two seconds after the hostile clients stop.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "agent/features/webhook/image_overrides.h"
#include "agent/features/webhook/webhook_server.h"
#include "base/clock.h"
#include "pki/issue.h"
#include "tests/agent/serve/tls_client.h"

namespace {

using namespace ekco;  // NOLINT
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::size_t kMaxBody = std::size_t{3} << 20;

json reviewAround(json pod) {
  return json({{"apiVersion", "admission.k8s.io/v1"},
               {"kind", "AdmissionReview"},
               {"request",
                {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                 {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                 {"namespace", "default"},
                 {"operation", "CREATE"},
                 {"object", std::move(pod)}}}});
}

std::string wellFormed() {
  return reviewAround(
             {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"generateName", "contour-"}, {"namespace", "default"}}},
              {"spec",
               {{"containers",
                 {{{"name", "contour"}, {"image", "projectcontour/contour:v1.18.0"}},
                  {{"name", "envoy"}, {"image", "docker.io/envoyproxy/envoy:v1.18.3"}}}}}}})
      .dump();
}

// A review of just under 3 MiB whose `filler` (a JSON value's text) is repeated to fill it.
std::string hostile(const std::string& head, const std::string& unit, const std::string& tail) {
  std::string body = head;
  while (body.size() + unit.size() + tail.size() < kMaxBody) body += unit;
  if (body.back() == ',') body.pop_back();
  return body + tail;
}

std::vector<std::string> hostileBodies() {
  const std::string review_head =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
      R"("kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":)";
  return {
      hostile(review_head + R"({"kind":"Pod","metadata":{"annotations":{"a":")", "a",
              R"("}},"spec":{"containers":[{"image":"x"}]}}}})"),
      hostile(review_head + R"({"kind":"Pod","spec":{"containers":[)", "{},", "]}}}}"),
      hostile(review_head + R"({"kind":"Pod","metadata":{"annotations":{"n":[)", "0,",
              R"(]}},"spec":{"containers":[{"image":"x"}]}}}})"),
  };
}

struct Memory {
  double hwm_mib = 0;
  double rss_mib = 0;
};

Memory memoryOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  Memory m;
  std::string key;
  while (in >> key) {
    double kib = 0;
    if (key == "VmHWM:" && in >> kib) m.hwm_mib = kib / 1024;
    if (key == "VmRSS:" && in >> kib) m.rss_mib = kib / 1024;
  }
  return m;
}

void resetPeak(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

double msOf(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string quantiles(std::vector<Clock::duration> s) {
  if (s.empty()) return "–";
  std::sort(s.begin(), s.end());
  auto at = [&](double q) {
    return msOf(
        s[std::min(s.size() - 1, static_cast<std::size_t>(q * static_cast<double>(s.size())))]);
  };
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f / %.3f / %.3f ms", at(0.5), at(0.99), msOf(s.back()));
  return buf;
}

double p99Of(std::vector<Clock::duration> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  return msOf(s[std::min(s.size() - 1, static_cast<std::size_t>(0.99 * double(s.size())))]);
}

const char* verdict(bool met) { return met ? "**met**" : "**not met**"; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ekco-bench-webhook-load: the webhook under hostile and idle clients"};
  int reviews = 2000;
  int idle = 128;
  int hostile_clients = 8;
  int seconds = 10;
  app.add_option("--reviews", reviews, "well-formed reviews timed per row")
      ->check(CLI::PositiveNumber);
  app.add_option("--idle", idle, "idle TCP connections held")->check(CLI::NonNegativeNumber);
  app.add_option("--hostile", hostile_clients, "clients sending 3 MiB reviews")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seconds", seconds, "how long the hostile clients send")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  base::SystemClock clock;
  auto ca = pki::createCa({.common_name = "ekco-webhook-ca", .now = clock.wallNow()});
  auto leaf = ca ? pki::issueServingCertificate(
                       {.ca_cert_pem = ca->cert_pem,
                        .ca_key_pem = ca->key_pem,
                        .common_name = "ekco.kurl.svc",
                        .dns_names = {"ekco.kurl.svc", "ekco.kurl.svc.cluster.local"},
                        .now = clock.wallNow()})
                 : base::Result<pki::KeyPair>(ca.error());
  if (!leaf) {
    std::fprintf(stderr, "error: %s\n", leaf.error().message().c_str());
    return 1;
  }
  // The server, in a child forked before this process starts any thread. It dies with us.
  int port_pipe[2];
  if (::pipe(port_pipe) != 0) return 1;
  const pid_t server_pid = ::fork();
  if (server_pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(port_pipe[0]);
    const auto overrides = agent::admission::parseImageOverrides(
        {"projectcontour/contour:v1.18.0=myregistry.io/contour:v1.18.0-fips"});
    auto server = agent::WebhookServer::start(
        {.address = "127.0.0.1",
         .port = 0,
         .review =
             [&](std::string_view body) {
               return agent::admission::reviewPod(body, overrides).response;
             }},
        {.cert_pem = leaf->cert_pem + ca->cert_pem, .key_pem = leaf->key_pem});
    const int port = server ? (*server)->port() : -1;
    if (::write(port_pipe[1], &port, sizeof port) != sizeof port) _exit(1);
    ::close(port_pipe[1]);
    for (;;) ::pause();
  }
  ::close(port_pipe[1]);
  int port = -1;
  if (::read(port_pipe[0], &port, sizeof port) != sizeof port || port <= 0) {
    std::fprintf(stderr, "error: the server did not start\n");
    return 1;
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{server_pid};
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Memory at_start = memoryOf(server_pid);

  // (1) Idle connections, held to the end.
  boost::asio::io_context ioc;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::socket>> held;
  for (int i = 0; i < idle; ++i) {
    auto s = std::make_unique<boost::asio::ip::tcp::socket>(ioc);
    s->open(boost::asio::ip::tcp::v4());
    s->bind({boost::asio::ip::make_address("127.0.0.2"), 0});
    s->connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    held.push_back(std::move(s));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string body = wellFormed();
  auto timedReviews = [&](int n, bool fresh_connection, const std::atomic<bool>* until) {
    std::vector<Clock::duration> samples;
    std::unique_ptr<testing::TlsClient> client;
    for (int i = 0; until != nullptr ? !until->load() : i < n; ++i) {
      const auto t0 = Clock::now();
      if (!client || fresh_connection) {
        client = std::make_unique<testing::TlsClient>(port, ca->cert_pem, "ekco.kurl.svc");
      }
      const auto a = client->post("/pod-image-overrides", body);
      samples.push_back(Clock::now() - t0);
      if (a.status != 200) std::fprintf(stderr, "warning: a well-formed review got %d\n", a.status);
    }
    return samples;
  };
  const auto first = timedReviews(1, true, nullptr);  // right after the idle ones came
  timedReviews(50, false, nullptr);                   // warm-up
  const auto kept_alive = timedReviews(reviews, false, nullptr);
  const auto fresh = timedReviews(std::max(1, reviews / 10), true, nullptr);
  const Memory after_idle = memoryOf(server_pid);

  // (2) Hostile clients, each from its own address, and the well-formed reviews meanwhile.
  const std::vector<std::string> bodies = hostileBodies();
  resetPeak(server_pid);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  std::atomic<int> busy{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> hostile;
  for (int h = 0; h < hostile_clients; ++h) {
    hostile.emplace_back([&, h] {
      const std::string source = "127.0.1." + std::to_string(h + 1);
      std::unique_ptr<testing::TlsClient> client;
      for (int i = h; !stop; ++i) {
        try {
          if (!client) {
            client =
                std::make_unique<testing::TlsClient>(port, ca->cert_pem, "ekco.kurl.svc", source);
          }
          const auto a = client->post("/pod-image-overrides", bodies[i % bodies.size()]);
          if (a.status == 200) ++answered;
          if (a.status == 503) ++busy;
          if (a.connection == "close") client.reset();
        } catch (const std::exception&) {
          ++failed;
          client.reset();
        }
      }
    });
  }
  std::vector<Clock::duration> under_load;
  std::thread measure([&] { under_load = timedReviews(0, false, &stop); });
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : hostile) t.join();
  measure.join();
  const Memory during = memoryOf(server_pid);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const Memory after = memoryOf(server_pid);

  const double p99 = p99Of(kept_alive);
  std::printf("| metric | value | goal |\n|---|---|---|\n");
  std::printf("| server RSS at start | %.1f MiB | – |\n", at_start.rss_mib);
  std::printf("| %d idle connections held: server RSS | %.1f MiB | – |\n", idle,
              after_idle.rss_mib);
  std::printf(
      "| first review right after the %d idle connections opened (new connection) | "
      "%.3f ms | – |\n",
      idle, msOf(first.front()));
  std::printf(
      "| well-formed review (%zu B) while %d idle connections are held, kept-alive: p50 / p99 / "
      "max (%zu reviews) | %s | p99 ≤ 5 ms: %s |\n",
      body.size(), idle, kept_alive.size(), quantiles(kept_alive).c_str(), verdict(p99 <= 5));
  std::printf(
      "| the same on a new connection each (TLS handshake included) (%zu reviews) | %s | "
      "– |\n",
      fresh.size(), quantiles(fresh).c_str());
  std::printf(
      "| %d hostile clients sending 3 MiB reviews for %d s (+ %d idle): answered / 503 / "
      "failed | %d / %d / %d | – |\n",
      hostile_clients, seconds, idle, answered.load(), busy.load(), failed.load());
  std::printf("| server peak RSS under that load | %.1f MiB | ≤ 64 MiB: %s |\n", during.hwm_mib,
              verdict(during.hwm_mib <= 64));
  std::printf(
      "| well-formed review meanwhile, kept-alive: p50 / p99 / max (%zu reviews) | %s | "
      "– |\n",
      under_load.size(), quantiles(under_load).c_str());
  std::printf("| server RSS 2 s after the hostile clients stop | %.1f MiB | – |\n", after.rss_mib);
  return 0;
}
