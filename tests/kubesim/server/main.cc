// ekco-kubesim: the test API server as a program, for scripts/demo and by-hand runs.
//   ekco-kubesim --listen 127.0.0.1:PORT --kubeconfig-out FILE [--load FILE.yaml]...
//     [--token TOKEN=USER[,GROUP...]]... [--token-kubeconfig-out TOKEN=FILE]...
// Runs until SIGTERM or SIGINT, then exits 0.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/kubesim/server/server.h"

namespace {

ekco::base::Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ekco::base::Error("open " + path, ekco::base::ErrorCode::kNotFound);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

int fail(const std::string& message) {
  std::fprintf(stderr, "ekco-kubesim: %s\n", message.c_str());
  return 1;
}

}  // namespace

// The flag table, then the server built from it and run; a table reads best as one piece.
int main(int argc, char** argv) {
  CLI::App app{"ekco-kubesim: a test Kubernetes API server on loopback"};
  std::string listen = "127.0.0.1:0";
  std::string kubeconfig_out;
  std::vector<std::string> loads;
  std::string exec_script;
  int latency_ms = 0;
  double rate_429 = 0;
  double rate_500 = 0;
  int drop_after_events = 0;
  double drop_after_seconds = 0;
  int generate_nodes = 0;
  int generate_pods = 0;
  int bookmark_ms = 1000;
  std::size_t history_window = 10000;
  std::vector<std::string> tokens;
  std::vector<std::string> token_kubeconfigs;
  std::size_t request_log_limit = 100000;
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: ephemeral)");
  app.add_option("--kubeconfig-out", kubeconfig_out, "where to write the kubeconfig")->required();
  app.add_option("--load", loads, "YAML/JSON file of objects to preload (repeatable)");
  app.add_option("--exec-script", exec_script,
                 "YAML/JSON list of {command: [prefix...], stdout, stderr, exitCode} or of "
                 "{command: [prefix...], run: true, env: {NAME: VALUE}, pod: PREFIX} (runs the "
                 "command for real)");
  app.add_option("--latency-ms", latency_ms, "added latency per request");
  app.add_option("--rate-429", rate_429, "share (0..1) of requests answered 429");
  app.add_option("--rate-500", rate_500, "share (0..1) of requests answered 500");
  app.add_option("--drop-watch-after-events", drop_after_events,
                 "end watch streams after N events");
  app.add_option("--drop-watch-after-seconds", drop_after_seconds,
                 "end watch streams after T seconds");
  app.add_option("--generate-nodes", generate_nodes, "generate N Ready nodes");
  app.add_option("--generate-pods", generate_pods, "generate M pods spread over the nodes");
  app.add_option("--bookmark-interval-ms", bookmark_ms, "interval of watch BOOKMARK events");
  app.add_option("--history-window", history_window, "watch events kept for resuming watches");
  app.add_option("--token", tokens,
                 "accept bearer token TOKEN as USER (extra groups after commas), authorized by "
                 "RBAC from the store (repeatable)");
  app.add_option("--token-kubeconfig-out", token_kubeconfigs,
                 "TOKEN=FILE: write a kubeconfig that authenticates with TOKEN (repeatable)");
  app.add_option("--request-log-limit", request_log_limit,
                 "request log records kept (GET /kubesim/v1/request-log)");
  CLI11_PARSE(app, argc, argv);

  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return fail("--listen: expected HOST:PORT, got " + listen);
  ekco::kubesim::ServerOptions options;
  options.listen_address = listen.substr(0, colon);
  try {
    int port = std::stoi(listen.substr(colon + 1));
    if (port < 0 || port > 65535) return fail("--listen: port out of range");
    options.port = static_cast<std::uint16_t>(port);
  } catch (const std::exception&) {
    return fail("--listen: expected HOST:PORT, got " + listen);
  }
  std::filesystem::path kubeconfig = std::filesystem::absolute(kubeconfig_out);
  options.out_dir = kubeconfig.parent_path().string();
  options.kubeconfig_path = kubeconfig.string();
  for (const std::string& file : loads) {
    auto text = readFile(file);
    if (!text) return fail(text.error().message());
    auto objects = ekco::kubesim::parseObjects(*text);
    if (!objects) return fail(file + ": " + objects.error().message());
    for (auto& obj : *objects) options.objects.push_back(std::move(obj));
  }
  for (auto& obj : ekco::kubesim::generateCluster(generate_nodes, generate_pods)) {
    options.objects.push_back(std::move(obj));
  }
  if (!exec_script.empty()) {
    auto text = readFile(exec_script);
    if (!text) return fail(text.error().message());
    auto script = ekco::kubesim::parseExecScript(*text);
    if (!script) return fail(exec_script + ": " + script.error().message());
    options.exec_script = std::move(*script);
  }
  options.faults = ekco::kubesim::Faults{
      .latency = std::chrono::milliseconds(latency_ms),
      .rate_429 = rate_429,
      .rate_500 = rate_500,
      .drop_watch_after_events = drop_after_events,
      .drop_watch_after = std::chrono::milliseconds(static_cast<long>(drop_after_seconds * 1000))};
  options.bookmark_interval = std::chrono::milliseconds(bookmark_ms);
  options.history_window = history_window;
  options.request_log_limit = request_log_limit;
  for (const std::string& spec : tokens) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return fail("--token: expected TOKEN=USER[,GROUP...], got " + spec);
    }
    ekco::kubesim::TokenUser user{.token = spec.substr(0, eq), .user = {}, .groups = {}};
    std::string rest = spec.substr(eq + 1);
    for (std::size_t start = 0;;) {
      auto comma = rest.find(',', start);
      std::string part = rest.substr(start, comma == std::string::npos ? comma : comma - start);
      if (user.user.empty()) {
        user.user = part;
      } else if (!part.empty()) {
        user.groups.push_back(part);
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (user.user.empty()) return fail("--token: empty user in " + spec);
    options.tokens.push_back(std::move(user));
  }
  std::vector<std::pair<std::string, std::string>> token_files;
  for (const std::string& spec : token_kubeconfigs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return fail("--token-kubeconfig-out: expected TOKEN=FILE, got " + spec);
    }
    token_files.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
  }

  // Block the signals before any thread starts, so only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = ekco::kubesim::Server::start(std::move(options));
  if (!server) return fail(server.error().message());
  for (const auto& [token, file] : token_files) {
    auto written = (*server)->writeTokenKubeconfig(file, token);
    if (!written) return fail(written.error().message());
  }
  std::printf("ekco-kubesim: serving %s, kubeconfig %s\n", (*server)->url().c_str(),
              (*server)->kubeconfigPath().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->stop();
  return 0;
}
