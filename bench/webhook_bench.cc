// ekco-bench-webhook: the pod image overrides webhook's latency per review, as the apiserver
// sees it over HTTPS keep-alive. Run by bench/webhook.sh; prints a Markdown table
// (BENCHMARKS.md) with the goal beside each figure.
//
// The real server (agent/features/webhook/webhook_server.h) and decision (agent/features/webhook/
// image_overrides.h) on 127.0.0.1, a certificate from a fresh CA (pki/issue.h), and clients
// that verify the chain and the name ekco.kurl.svc (tests/agent/serve/tls_client.h). Each client
// thread holds one kept-alive connection and sends its reviews back to back; a review is timed
// from writing the request to having read the whole answer. A pod that matches (3 images
// replaced) and one that does not, and a 1 MiB pod, each as its own row.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

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

std::string review(bool matching, std::size_t padding) {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"generateName", "contour-"}, {"namespace", "default"}}},
      {"spec",
       {{"initContainers",
         {{{"name", "init"}, {"image", matching ? "projectcontour/contour:v1.18.0" : "x"}}}},
        {"containers",
         {{{"name", "contour"},
           {"image", matching ? "projectcontour/contour:v1.18.0" : "y"},
           {"args", {"serve", "--incluster"}}},
          {{"name", "envoy"}, {"image", "docker.io/envoyproxy/envoy:v1.18.3"}},
          {{"name", "shutdown-manager"},
           {"image", matching ? "projectcontour/contour:v1.18.0" : "z"}}}}}}};
  if (padding > 0) pod["metadata"]["annotations"] = {{"padding", std::string(padding, 'p')}};
  return json({{"apiVersion", "admission.k8s.io/v1"},
               {"kind", "AdmissionReview"},
               {"request",
                {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                 {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                 {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                 {"namespace", "default"},
                 {"operation", "CREATE"},
                 {"object", pod}}}})
      .dump();
}

double msOf(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Row {
  std::string name;
  std::vector<Clock::duration> samples;
  Clock::duration wall{};
};

std::string quantiles(std::vector<Clock::duration> s) {
  std::sort(s.begin(), s.end());
  auto at = [&](double q) {
    return msOf(
        s[std::min(s.size() - 1, static_cast<std::size_t>(q * static_cast<double>(s.size())))]);
  };
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f / %.3f / %.3f ms", at(0.5), at(0.99), msOf(s.back()));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ekco-bench-webhook: pod image overrides webhook latency over HTTPS keep-alive"};
  int requests = 5000;
  int clients = 4;
  app.add_option("--requests", requests, "reviews per client and row")->check(CLI::PositiveNumber);
  app.add_option("--clients", clients, "concurrent kept-alive connections")
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
  if (!server) {
    std::fprintf(stderr, "error: %s\n", server.error().message().c_str());
    return 1;
  }
  const int port = (*server)->port();

  // Connection set-up (TCP + TLS 1.3 handshake with chain and name verification).
  std::vector<Clock::duration> handshakes;
  for (int i = 0; i < 200; ++i) {
    const auto t0 = Clock::now();
    testing::TlsClient c(port, ca->cert_pem, "ekco.kurl.svc");
    handshakes.push_back(Clock::now() - t0);
  }

  auto run = [&](const std::string& name, const std::string& body, int n_clients) {
    Row row{.name = name, .samples = {}, .wall = {}};
    std::vector<std::vector<Clock::duration>> per(static_cast<std::size_t>(n_clients));
    std::atomic<int> failures{0};
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < n_clients; ++t) {
      threads.emplace_back([&, t] {
        testing::TlsClient c(port, ca->cert_pem, "ekco.kurl.svc");
        for (int i = 0; i < 20; ++i) c.post("/pod-image-overrides", body);  // warm-up
        auto& mine = per[static_cast<std::size_t>(t)];
        mine.reserve(static_cast<std::size_t>(requests));
        for (int i = 0; i < requests; ++i) {
          const auto s = Clock::now();
          const auto a = c.post("/pod-image-overrides", body);
          mine.push_back(Clock::now() - s);
          if (a.status != 200) ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    row.wall = Clock::now() - t0;
    for (auto& v : per) row.samples.insert(row.samples.end(), v.begin(), v.end());
    if (failures > 0)
      std::fprintf(stderr, "warning: %d failed reviews in %s\n", failures.load(), name.c_str());
    return row;
  };

  const std::string matching = review(true, 0);
  const std::string other = review(false, 0);
  const std::string big = review(true, 1u << 20);
  std::vector<Row> rows;
  rows.push_back(run("matching pod (3 images replaced), 1 connection", matching, 1));
  rows.push_back(run("pod without a match, 1 connection", other, 1));
  rows.push_back(run("matching pod, " + std::to_string(clients) + " concurrent connections",
                     matching, clients));
  const int saved = requests;
  requests = std::max(1, requests / 50);
  rows.push_back(run("1 MiB pod (annotation), 1 connection", big, 1));
  requests = saved;

  std::printf("| metric | value | goal |\n|---|---|---|\n");
  std::printf("| review body sizes | %zu B / %zu B / %zu B | – |\n", matching.size(), other.size(),
              big.size());
  std::printf("| new connection (TCP + TLS handshake, verified), p50 / p99 / max | %s | – |\n",
              quantiles(handshakes).c_str());
  for (const Row& r : rows) {
    const double rate =
        static_cast<double>(r.samples.size()) / std::chrono::duration<double>(r.wall).count();
    std::printf("| %s: per review p50 / p99 / max (%zu reviews, %.0f/s) | %s | p99 < 5 ms |\n",
                r.name.c_str(), r.samples.size(), rate, quantiles(r.samples).c_str());
  }
  (*server)->stop();
  return 0;
}
