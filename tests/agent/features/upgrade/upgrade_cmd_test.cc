// `ekco upgrade` against a loopback HTTP server (the installer URL), the in-process test API
// server (the node count), a temp host root and real bash installer scripts.
#include "agent/features/upgrade/upgrade_cmd.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/maintenance/maintenance.h"
#include "base/clock.h"
#include "base/log/log.h"
#include "base/os/process.h"
#include "hostfs/local_host_fs.h"
#include "tests/agent/cli_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 server on 127.0.0.1: one request per connection (Connection: close).
//   /installer  HEAD: head_status, X-Kurl-Hash: <hash> (when set); GET: get_status, the script
//   /redirect   302 to /installer
struct InstallerState {
  int head_status = 200;
  int get_status = 200;
  std::optional<std::string> hash{};
  std::string body{};
};

class InstallerServer {
 public:
  using State = InstallerState;

  InstallerServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(listen_fd_, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~InstallerServer() {
    stop_.store(true);
    thread_.join();
    ::close(listen_fd_);
  }
  InstallerServer(const InstallerServer&) = delete;
  InstallerServer& operator=(const InstallerServer&) = delete;

  std::string url(const std::string& path = "/installer") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  void set(const State& state) {
    std::lock_guard lock(mu_);
    state_ = state;
  }
  State state() const {
    std::lock_guard lock(mu_);
    return state_;
  }
  void setHash(std::optional<std::string> hash) {
    std::lock_guard lock(mu_);
    state_.hash = std::move(hash);
  }
  void setBody(std::string body) {
    std::lock_guard lock(mu_);
    state_.body = std::move(body);
  }
  int heads() const { return heads_.load(); }
  int gets() const { return gets_.load(); }

 private:
  void serve() {
    while (!stop_.load()) {
      pollfd p{.fd = listen_fd_, .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      handle(fd);
      ::close(fd);
    }
  }

  void handle(int fd) {
    timeval tv{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::istringstream first(request.substr(0, request.find("\r\n")));
    std::string method;
    std::string path;
    first >> method >> path;
    const State s = state();
    std::string response;
    if (path == "/redirect") {
      response =
          "HTTP/1.1 302 Found\r\nLocation: /installer\r\nContent-Length: 0\r\n"
          "Connection: close\r\n\r\n";
    } else if (path != "/installer") {
      response = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    } else if (method == "HEAD") {
      ++heads_;
      response = statusLine(s.head_status);
      if (s.hash) response += "X-Kurl-Hash: " + *s.hash + "\r\n";
      response +=
          "Content-Length: " + std::to_string(s.body.size()) + "\r\nConnection: close\r\n\r\n";
    } else if (method == "GET") {
      ++gets_;
      const std::string body = s.get_status == 200 ? s.body : "oops\n";
      response = statusLine(s.get_status) + "Content-Length: " + std::to_string(body.size()) +
                 "\r\nConnection: close\r\n\r\n" + body;
    } else {
      response =
          "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n"
          "Connection: close\r\n\r\n";
    }
    std::size_t sent = 0;
    while (sent < response.size()) {
      ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
  }

  static std::string statusLine(int status) {
    switch (status) {
      case 200:
        return "HTTP/1.1 200 OK\r\n";
      case 404:
        return "HTTP/1.1 404 Not Found\r\n";
      case 500:
        return "HTTP/1.1 500 Internal Server Error\r\n";
      case 503:
        return "HTTP/1.1 503 Service Unavailable\r\n";
      default:
        return "HTTP/1.1 " + std::to_string(status) + " Whatever\r\n";
    }
  }

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  State state_{};
  std::atomic<int> heads_{0};
  std::atomic<int> gets_{0};
};

json node(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

int countLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

constexpr std::string_view kStateDir = "/var/lib/ekco";

class UpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/root";
    fs::create_directories(root_);
    marker_ = dir_.path() + "/installer-runs";
    startApi({node("node-a")});
    http_.setBody(script(0));
  }
  void TearDown() override { base::configureLogging(base::LogOptions{}); }

  void startApi(std::vector<json> nodes) {
    api_.reset();
    nodes.push_back(kubesim::namespaceObject("kurl"));  // ekco-maintenance's namespace
    auto server = kubesim::Server::start({.out_dir = dir_.path() + "/sim", .objects = nodes});
    ASSERT_TRUE(server) << server.error().message();
    api_ = std::move(*server);
  }

  // An installer that records its arguments in the marker file, writes to stdout and stderr
  // and exits with `code` (after "fatal: disk full" when non-zero).
  std::string script(int code) const {
    std::string s =
        "#!/bin/bash\n"
        "echo \"installer: starting $*\"\n"
        "echo \"installer: to stderr\" >&2\n"
        "echo \"$*\" >> '" +
        marker_ + "'\n";
    if (code != 0) {
      s += "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo \"step $i\"; done\n"
           "echo 'fatal: disk full' >&2\n"
           "exit " +
           std::to_string(code) + "\n";
    } else {
      s += "echo 'installer: done'\n";
    }
    return s;
  }

  std::vector<std::string> args(std::vector<std::string> extra = {}) const {
    // The installer server is plain HTTP on loopback: every run opts in with --allow-http.
    std::vector<std::string> a = {"upgrade",
                                  "--url",
                                  http_.url(),
                                  "--host-root",
                                  root_,
                                  "--kubeconfig",
                                  api_->kubeconfigPath(),
                                  "--allow-http"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  testing::CliRun run(std::vector<std::string> extra = {}) { return testing::cli(args(extra)); }
  // runUpgradeCommand without the command line (which configures the process-wide logger).
  testing::CliRun direct(
      std::chrono::milliseconds progress_interval = std::chrono::seconds(10)) const {
    UpgradeArgs a;
    a.progress_interval = progress_interval;
    a.url = http_.url();
    a.host_root = root_;
    a.kubeconfig = api_->kubeconfigPath();
    a.allow_http = true;
    std::ostringstream out;
    std::ostringstream err;
    const int code =
        runUpgradeCommand(Config{}, a, CliEnv{.environment = {}, .out = &out, .err = &err});
    return {code, out.str(), err.str()};
  }

  std::string statePath(std::string_view name) const {
    return root_ + std::string(kStateDir) + "/" + std::string(name);
  }
  std::string record() const { return readFile(statePath(kUpgradeRecordFile)); }
  void writeRecord(const std::string& content) {
    fs::create_directories(root_ + std::string(kStateDir));
    std::ofstream(statePath(kUpgradeRecordFile)) << content;
  }
  int installerRuns() const { return countLines(readFile(marker_)); }

  testing::TempDir dir_{"ekco-upgrade"};
  std::string root_;
  std::string marker_;
  InstallerServer http_;
  std::unique_ptr<kubesim::Server> api_;
};

TEST_F(UpgradeTest, FirstRunRecordsTheHashWithoutUpgrading) {
  http_.setHash("h1");
  auto r = run();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no upgrade recorded yet: recorded the current installer hash h1"));
  EXPECT_TRUE(std::regex_match(record(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ h1\n)")))
      << record();
  EXPECT_EQ(http_.heads(), 1);
  EXPECT_EQ(http_.gets(), 0);
  EXPECT_EQ(installerRuns(), 0);
  EXPECT_TRUE(fs::exists(statePath(kUpgradeLockFile)));
}

TEST_F(UpgradeTest, SameHashDoesNotUpgrade) {
  writeRecord("2024-01-01T00:00:00Z h0\n2024-02-01T00:00:00Z h1\n");
  http_.setHash("h1");
  auto r = run();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("up to date: installer hash h1"));
  EXPECT_EQ(http_.gets(), 0);
  EXPECT_EQ(installerRuns(), 0);
  EXPECT_EQ(record(), "2024-01-01T00:00:00Z h0\n2024-02-01T00:00:00Z h1\n");
}

TEST_F(UpgradeTest, NewHashRunsTheInstallerOnceAndRecordsIt) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  auto r = run();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("upgraded: installer hash h1 -> h2"));
  EXPECT_EQ(readFile(marker_), "yes auto-upgrades-enabled\n");
  EXPECT_TRUE(std::regex_match(
      record(), std::regex(R"(2024-01-01T00:00:00Z h1\n\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ h2\n)")))
      << record();
  EXPECT_FALSE(fs::exists(statePath(kUpgradeInstallerFile)));  // removed afterwards
  EXPECT_EQ(http_.gets(), 1);

  auto again = run();
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("up to date"));
  EXPECT_EQ(installerRuns(), 1);
  EXPECT_EQ(http_.gets(), 1);
}

TEST_F(UpgradeTest, RecordWithoutTrailingNewlineGetsOneBeforeTheNewLine) {
  writeRecord("2024-01-01T00:00:00Z h1");
  http_.setHash("h2");
  auto r = run();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(
      record(), std::regex(R"(2024-01-01T00:00:00Z h1\n\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ h2\n)")))
      << record();
}

TEST_F(UpgradeTest, InstallerOutputIsStreamedToTheLogWhileItRuns) {
  // The installer waits for a file that the log sink creates when it sees the installer's first
  // line: it only finishes if lines reach the log while it runs.
  const std::string go = dir_.path() + "/go";
  http_.setBody(
      "#!/bin/bash\n"
      "echo 'installer: waiting'\n"
      "for i in $(seq 1 200); do [ -e '" +
      go +
      "' ] && break; sleep 0.05; done\n"
      "[ -e '" +
      go +
      "' ] || { echo 'never saw the go file' >&2; exit 7; }\n"
      "echo 'installer: finished' >&2\n");
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  std::mutex mu;
  std::vector<std::string> lines;
  base::configureLogging(base::LogOptions{.sink = [&](std::string_view line) {
    std::lock_guard lock(mu);
    lines.emplace_back(line);
    if (line.find("installer: waiting") != std::string_view::npos) std::ofstream{go} << "go\n";
  }});
  auto r = direct();
  base::configureLogging(base::LogOptions{});
  EXPECT_EQ(r.code, 0) << r.err;
  std::string all;
  for (const std::string& l : lines) all += l;
  EXPECT_THAT(all, HasSubstr("stream=stdout line=\"installer: waiting\""));
  EXPECT_THAT(all, HasSubstr("stream=stderr line=\"installer: finished\""));
}

TEST_F(UpgradeTest, SilentInstallerGetsWaitingLines) {
  // The installer prints nothing and waits for a file that the log sink creates when it sees
  // the second "waiting for the installer" line: it only finishes if those lines come while it
  // runs, and each says how long it has run and been silent.
  const std::string go = dir_.path() + "/go";
  http_.setBody("#!/bin/bash\nfor i in $(seq 1 200); do [ -e '" + go +
                "' ] && break; sleep 0.05; done\n[ -e '" + go + "' ] || exit 7\n");
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  std::mutex mu;
  std::vector<std::string> waiting;
  base::configureLogging(base::LogOptions{.sink = [&](std::string_view line) {
    std::lock_guard lock(mu);
    if (line.find("msg=\"waiting for the installer\"") == std::string_view::npos) return;
    waiting.emplace_back(line);
    if (waiting.size() == 2) std::ofstream{go} << "go\n";
  }});
  auto r = direct(std::chrono::milliseconds(150));
  base::configureLogging(base::LogOptions{});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_GE(waiting.size(), 2u);
  EXPECT_THAT(waiting[0], HasSubstr("hash=h2"));
  EXPECT_THAT(waiting[0], HasSubstr("elapsed="));
  EXPECT_THAT(waiting[0], HasSubstr("silent_for="));
  EXPECT_THAT(waiting[0], HasSubstr("timeout=3h"));
}

TEST_F(UpgradeTest, TalkativeInstallerGetsNoWaitingLines) {
  // Output at least every 50 ms for ~1 s: a 400 ms progress interval never finds it silent.
  http_.setBody("#!/bin/bash\nfor i in $(seq 1 20); do echo \"step $i\"; sleep 0.05; done\n");
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  std::mutex mu;
  int waiting = 0;
  int steps = 0;
  base::configureLogging(base::LogOptions{.sink = [&](std::string_view line) {
    std::lock_guard lock(mu);
    if (line.find("waiting for the installer") != std::string_view::npos) ++waiting;
    if (line.find("line=\"step ") != std::string_view::npos) ++steps;
  }});
  auto r = direct(std::chrono::milliseconds(400));
  base::configureLogging(base::LogOptions{});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(steps, 20);
  EXPECT_EQ(waiting, 0);
}

TEST_F(UpgradeTest, FailingInstallerIsNotRecordedAndIsRetried) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  http_.setBody(script(3));
  auto r = run();
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("exited with status 3; hash h2 not recorded"));
  // stdout's and stderr's last lines apart, whatever order the pipes were read in.
  EXPECT_THAT(r.err, HasSubstr("its last output lines:\n  step 3\n"));
  EXPECT_THAT(r.err, HasSubstr("  step 12\nits last error lines:\n  installer: to stderr\n"
                               "  fatal: disk full"));
  EXPECT_THAT(r.err, Not(HasSubstr("  step 2\n")));  // only the last lines
  EXPECT_EQ(record(), "2024-01-01T00:00:00Z h1\n");
  EXPECT_FALSE(fs::exists(statePath(kUpgradeInstallerFile)));
  EXPECT_EQ(installerRuns(), 1);

  http_.setBody(script(0));  // fixed upstream: the next timer run upgrades
  auto again = run();
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("upgraded: installer hash h1 -> h2"));
  EXPECT_EQ(installerRuns(), 2);
  EXPECT_EQ(countLines(record()), 2);
}

TEST_F(UpgradeTest, MultiNodeClusterIsRefused) {
  startApi({node("node-a"), node("node-b"), node("node-c")});
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  auto r = run();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("auto-upgrade supports single-node clusters only (found 3 nodes); "
                               "skipping"));
  EXPECT_EQ(http_.gets(), 0);
  EXPECT_EQ(installerRuns(), 0);
  EXPECT_EQ(record(), "2024-01-01T00:00:00Z h1\n");
}

TEST_F(UpgradeTest, ApiUnreachableWhenAnUpgradeIsDueIsAnError) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  const std::vector<std::string> a = args();
  api_->stop();
  auto r = testing::cli(a);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: count the cluster's nodes"));
  EXPECT_EQ(installerRuns(), 0);
}

TEST_F(UpgradeTest, UnsetUrlDoesNothing) {
  auto r = testing::cli({"upgrade", "--host-root", root_});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("auto-upgrade is not configured"));
  EXPECT_FALSE(fs::exists(root_ + std::string(kStateDir)));
  EXPECT_EQ(http_.heads(), 0);
}

TEST_F(UpgradeTest, UrlComesFromTheConfig) {
  const std::string config = dir_.path() + "/config.yaml";
  std::ofstream(config) << "auto_upgrade_url: " << http_.url()
                        << "\nauto_upgrade_allow_http: true\n";
  http_.setHash("h1");
  auto r = testing::cli({"upgrade", "--config", config, "--host-root", root_, "--kubeconfig",
                         api_->kubeconfigPath()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("recorded the current installer hash h1"));
  EXPECT_EQ(http_.heads(), 1);
}

TEST_F(UpgradeTest, ServerErrorOnHeadFailsAndTheNextRunWorks) {
  http_.set({.head_status = 500, .hash = "h1", .body = script(0)});
  auto r = run();
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "error: HEAD " + http_.url() + ": HTTP 500 Internal Server Error\n");
  EXPECT_FALSE(fs::exists(statePath(kUpgradeRecordFile)));

  http_.set({.head_status = 200, .hash = "h1", .body = script(0)});
  auto again = run();
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("recorded the current installer hash h1"));
}

TEST_F(UpgradeTest, ServerErrorOnDownloadFailsWithoutRecording) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.set({.get_status = 503, .hash = "h2", .body = script(0)});
  auto r = run();
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "error: GET " + http_.url() + ": HTTP 503 Service Unavailable\n");
  EXPECT_EQ(record(), "2024-01-01T00:00:00Z h1\n");
  EXPECT_EQ(installerRuns(), 0);
  EXPECT_FALSE(fs::exists(statePath(kUpgradeInstallerFile)));
}

TEST_F(UpgradeTest, UnreachableServerIsOneLineNamingTheUrl) {
  // A port nobody listens on: bind one, close it.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x";
  auto r = testing::cli({"upgrade", "--url", url, "--host-root", root_, "--kubeconfig",
                         api_->kubeconfigPath(), "--allow-http"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: HEAD " + url + ": "));
  EXPECT_EQ(countLines(r.err), 1) << r.err;
  EXPECT_FALSE(fs::exists(statePath(kUpgradeRecordFile)));
}

TEST_F(UpgradeTest, MissingOrInvalidHashHeaderIsRefused) {
  http_.setHash(std::nullopt);
  auto r = run();
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "error: HEAD " + http_.url() + ": the response has no X-Kurl-Hash header\n");

  http_.setHash("abc;rm -rf /");
  r = run();
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("invalid X-Kurl-Hash header \"abc;rm -rf /\""));
  EXPECT_FALSE(fs::exists(statePath(kUpgradeRecordFile)));

  http_.setHash(std::string(129, 'a'));
  r = run();
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("invalid X-Kurl-Hash header"));
  EXPECT_FALSE(fs::exists(statePath(kUpgradeRecordFile)));
}

TEST_F(UpgradeTest, RedirectsAreFollowed) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  auto r = testing::cli({"upgrade", "--url", http_.url("/redirect"), "--host-root", root_,
                         "--kubeconfig", api_->kubeconfigPath(), "--allow-http"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("upgraded: installer hash h1 -> h2"));
  EXPECT_EQ(installerRuns(), 1);
}

TEST_F(UpgradeTest, MalformedRecordIsAnError) {
  writeRecord("2024-01-01T00:00:00Z h1\n2024-01-02T00:00:00Z $(reboot)\n");
  http_.setHash("h2");
  auto r = run();
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("upgrades.txt: line 2: invalid hash \"$(reboot)\""));
  EXPECT_EQ(installerRuns(), 0);
}

TEST_F(UpgradeTest, HeldLockSkipsTheRun) {
  base::SystemClock clock;
  auto host = hostfs::LocalHostFs::open(root_, clock);
  ASSERT_TRUE(host);
  ASSERT_TRUE((*host)->makeDirs(kStateDir));
  auto lock = (*host)->tryLock(std::string(kStateDir) + "/upgrade.lock");
  ASSERT_TRUE(lock) << lock.error().message();
  http_.setHash("h1");
  auto r = run();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("another upgrade is running"));
  EXPECT_EQ(http_.heads(), 0);

  lock->reset();
  auto again = run();
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("recorded the current installer hash h1"));
}

TEST_F(UpgradeTest, ConcurrentRunIsBlockedByTheLock) {
  const std::string started = dir_.path() + "/started";
  const std::string go = dir_.path() + "/go";
  http_.setBody(
      "#!/bin/bash\n"
      "touch '" +
      started +
      "'\n"
      "for i in $(seq 1 400); do [ -e '" +
      go +
      "' ] && exit 0; sleep 0.05; done\n"
      "exit 7\n");
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  testing::CliRun first;
  std::thread t([&] { first = direct(); });
  for (int i = 0; i < 400 && !fs::exists(started); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(fs::exists(started));
  auto second = direct();
  std::ofstream{go} << "go\n";
  t.join();
  EXPECT_EQ(second.code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("another upgrade is running"));
  EXPECT_EQ(first.code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("upgraded: installer hash h1 -> h2"));
  EXPECT_EQ(http_.gets(), 1);
}

TEST_F(UpgradeTest, DryRunChangesNothing) {
  http_.setHash("h1");
  auto r = run({"--dry-run"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dry run: no upgrade recorded yet; would record the current "
                               "installer hash h1"));
  EXPECT_FALSE(fs::exists(root_ + std::string(kStateDir)));

  writeRecord("2024-01-01T00:00:00Z h0\n");
  r = run({"--dry-run"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dry run: the installer hash changed (h0 -> h1); would download " +
                               http_.url()));
  EXPECT_THAT(r.out,
              HasSubstr("bash " + statePath(kUpgradeInstallerFile) + " yes auto-upgrades-enabled"));
  EXPECT_EQ(http_.gets(), 0);
  EXPECT_EQ(installerRuns(), 0);
  EXPECT_EQ(record(), "2024-01-01T00:00:00Z h0\n");
  EXPECT_FALSE(fs::exists(statePath(kUpgradeLockFile)));

  startApi({node("node-a"), node("node-b")});
  r = run({"--dry-run"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("single-node clusters only (found 2 nodes)"));
}

// --- Pieces -----------------------------------------------------------------------------------

TEST(UpgradeHash, Validation) {
  EXPECT_TRUE(isValidKurlHash("a"));
  EXPECT_TRUE(isValidKurlHash("4b6f8a2-x.Y_z"));
  EXPECT_TRUE(isValidKurlHash(std::string(128, 'f')));
  EXPECT_FALSE(isValidKurlHash(""));
  EXPECT_FALSE(isValidKurlHash(std::string(129, 'f')));
  for (std::string bad : {"a b", "a/b", "a\nb", "$(x)", "a;b", "a\"b", "\xc3\xa9"}) {
    EXPECT_FALSE(isValidKurlHash(bad)) << bad;
  }
}

TEST(UpgradeHash, LastRecordedHash) {
  auto none = lastRecordedHash("");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  auto blank = lastRecordedHash("\n  \n");
  ASSERT_TRUE(blank);
  EXPECT_FALSE(blank->has_value());
  auto two = lastRecordedHash("2024-01-01T00:00:00Z a1\n2024-02-01T00:00:00Z b2\n\n");
  ASSERT_TRUE(two);
  EXPECT_EQ(two->value_or(""), "b2");
  auto bare = lastRecordedHash("c3");  // only a hash: still its last field
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->value_or(""), "c3");
  auto bad = lastRecordedHash("2024-01-01T00:00:00Z a1\nx y/z\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), base::ErrorCode::kParse);
  EXPECT_EQ(bad.error().message(), "line 2: invalid hash \"y/z\"");
}

TEST(UpgradeFetcher, BodyOverTheLimitIsRefused) {
  InstallerServer http;
  http.set({.hash = "h", .body = std::string(4096, 'x')});
  base::SystemClock clock;
  auto fetcher =
      makeHttpFetcher(HttpFetchOptions{.max_body_bytes = 1000, .allow_http = true}, clock);
  auto body = fetcher->get(http.url());
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().message(),
            "fetch " + http.url() + ": the response is larger than 1000 bytes");
  auto small = makeHttpFetcher(HttpFetchOptions{.allow_http = true}, clock)->get(http.url());
  ASSERT_TRUE(small) << small.error().message();
  EXPECT_EQ(small->size(), 4096u);
  auto head = fetcher->head(http.url());
  ASSERT_TRUE(head) << head.error().message();
  EXPECT_EQ(head->at("x-kurl-hash"), "h");
}

// --- Command line ------------------------------------------------------------------------------

TEST(UpgradeCli, HelpListsTheFlags) {
  auto r = testing::cli({"upgrade", "--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--config", "--url", "--state-dir", "--kubeconfig", "--host-root",
                           "--allow-http", "--dry-run"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  auto top = testing::cli({"--help"});
  EXPECT_THAT(top.out, HasSubstr("upgrade"));
}

TEST(UpgradeCli, BadFlagsAreUsageErrors) {
  auto r = testing::cli({"upgrade", "--url", "ftp://example.com/x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --url \"ftp://example.com/x\": want an http:// or https:// URL\n");
  r = testing::cli({"upgrade", "--url", "https://a b/x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "error: --url \"https://a b/x\": a URL has no whitespace or control characters\n");
  r = testing::cli({"upgrade", "--url", "https://example.com/x", "--state-dir", "var/lib/ekco"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--state-dir: want an absolute path"));
  r = testing::cli({"upgrade", "--host-root", "relative", "--url", "https://example.com/x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--host-root: want an absolute path"));
  r = testing::cli({"upgrade", "--no-such-flag"});
  EXPECT_EQ(r.code, 2);
  const std::string config = "/nonexistent/ekco/upgrade-config.yaml";
  r = testing::cli({"upgrade", "--config", config});
  EXPECT_EQ(r.code, 2);
}

// Defect 4 of the reliability issue: what is downloaded runs as root, so plain HTTP is an opt-in.
TEST_F(UpgradeTest, PlainHttpIsRefusedWithoutTheOptIn) {
  http_.setHash("h1");
  auto r = testing::cli({"upgrade", "--url", http_.url(), "--host-root", root_, "--kubeconfig",
                         api_->kubeconfigPath()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --url \"" + http_.url() +
                       "\": plain http:// is not allowed (no TLS: nothing fetched over it is "
                       "verified); use https://, or accept plain http with --allow-http\n");
  EXPECT_EQ(http_.heads(), 0);  // refused before anything was sent
  EXPECT_FALSE(fs::exists(statePath(kUpgradeRecordFile)));

  // From the config: the config itself is refused (the same rule), naming the key to set.
  const std::string config = dir_.path() + "/config.yaml";
  std::ofstream(config) << "auto_upgrade_url: " << http_.url() << "\n";
  r = testing::cli({"upgrade", "--config", config, "--host-root", root_, "--kubeconfig",
                    api_->kubeconfigPath()});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("auto_upgrade_url: plain http:// is not allowed"));
  EXPECT_THAT(r.err, HasSubstr("set auto_upgrade_allow_http: true"));
  std::ofstream(config) << "auto_upgrade_url: " << http_.url()
                        << "\nauto_upgrade_allow_http: true\n";
  r = testing::cli({"upgrade", "--config", config, "--host-root", root_, "--kubeconfig",
                    api_->kubeconfigPath()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(http_.heads(), 1);
}

}  // namespace
}  // namespace ekco::agent

// --- issue 19: maintenance mode and phase Events ---------------------------------------------

namespace ekco::agent {
namespace {

class UpgradeEventsTest : public UpgradeTest {
 protected:
  // `kubectl get events --field-selector source=ekco` in default (the Node's Events): one
  // "REASON TYPE" line each, in the API's order (by name: the Node's name, then the time).
  std::string kubectlEvents() {
    base::BoostProcessRunner runner(clock_);
    base::ProcessRequest request;
    request.argv = {"/usr/bin/kubectl",
                    "--kubeconfig",
                    api_->kubeconfigPath(),
                    "--cache-dir",
                    dir_.path() + "/kubectl-cache",
                    "get",
                    "events",
                    "-n",
                    "default",
                    "--field-selector",
                    "source=ekco",
                    "--no-headers",
                    "-o",
                    "custom-columns=REASON:.reason,TYPE:.type,OBJECT:.involvedObject.name"};
    request.timeout = std::chrono::seconds(30);
    auto result = runner.run(request);
    EXPECT_TRUE(result && result->success())
        << (result ? result->stderr_data : result.error().message());
    return result ? result->stdout_data : "";
  }
  std::vector<json> eventsAbout(const std::string& ns, const std::string& name) {
    auto list = api_->store().list(*api_->store().findQualified("events"), ns, {});
    std::vector<json> out;
    for (const json& e : list.body["items"]) {
      if (e["involvedObject"].value("name", "") == name) out.push_back(e);
    }
    return out;
  }
  // The ConfigMap as `ekco maintenance on` (or a run that crashed) leaves it, without expiry.
  bool putMaintenance(const std::string& reason, const std::string& by) {
    return static_cast<bool>(
        api_->put({{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "ekco-maintenance"}, {"namespace", "kurl"}}},
                   {"data", {{"reason", reason}, {"by", by}}}}));
  }
  std::optional<json> maintenanceConfigMap() {
    return api_->get("configmaps", "kurl", "ekco-maintenance");
  }

  base::SystemClock clock_;
};

TEST_F(UpgradeEventsTest, AnUpgradeRunsInMaintenanceModeAndLeavesPhaseEventsInOrder) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  http_.setBody("#!/bin/bash\nsleep 1.5\necho done\n");
  std::optional<json> during;
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    while (!finished && !during) {
      if (auto cm = maintenanceConfigMap()) during = cm;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto r = direct();
  finished = true;
  watcher.join();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("upgraded: installer hash h1 -> h2"));

  // While the installer ran: on, by ekco upgrade, ending by itself after the installer's
  // timeout + kill grace + 10 min (a crashed run's pause).
  ASSERT_TRUE(during.has_value()) << "maintenance mode was never on during the upgrade";
  const MaintenanceState state = parseMaintenance(*during);
  EXPECT_EQ(state.by, "ekco upgrade");
  EXPECT_EQ(state.reason, "ekco upgrade to installer hash h2");
  ASSERT_TRUE(state.since && state.until);
  EXPECT_EQ(*state.until - *state.since,
            std::chrono::hours(3) + std::chrono::seconds(60) + std::chrono::minutes(10));
  EXPECT_FALSE(maintenanceConfigMap().has_value());  // off again

  EXPECT_EQ(kubectlEvents(),
            "UpgradeCheck      Normal   node-a\n"
            "UpgradeStarted    Normal   node-a\n"
            "UpgradeComplete   Normal   node-a\n");
  auto node_events = eventsAbout("default", "node-a");
  ASSERT_EQ(node_events.size(), 3u);
  EXPECT_THAT(node_events[0].value("message", ""), HasSubstr("h1 -> h2"));
  EXPECT_EQ(node_events[2]["source"].value("component", ""), "ekco");
  EXPECT_EQ(node_events[2].value("reportingComponent", ""), "ekco");
  EXPECT_THAT(node_events[2].value("message", ""), HasSubstr("exited with status 0"));
  std::vector<std::string> maintenance;
  for (const json& e : eventsAbout("kurl", "ekco-maintenance")) {
    maintenance.push_back(e.value("reason", ""));
  }
  EXPECT_THAT(maintenance, ::testing::ElementsAre("MaintenanceOn", "MaintenanceOff"));

  // Up to date next time: no Events, the API not needed for them.
  auto again = direct();
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(eventsAbout("default", "node-a").size(), 3u);
}

TEST_F(UpgradeEventsTest, AFailedInstallerIsAWarningWithItsExitStatusAndHashAndMaintenanceIsOff) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  http_.setBody(script(3));
  auto r = direct();
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(kubectlEvents(),
            "UpgradeCheck     Normal    node-a\n"
            "UpgradeStarted   Normal    node-a\n"
            "UpgradeFailed    Warning   node-a\n");
  auto node_events = eventsAbout("default", "node-a");
  ASSERT_EQ(node_events.size(), 3u);
  EXPECT_THAT(node_events[2].value("message", ""), HasSubstr("installer hash h2"));
  EXPECT_THAT(node_events[2].value("message", ""), HasSubstr("exited with status 3"));
  EXPECT_FALSE(maintenanceConfigMap().has_value());
  EXPECT_EQ(record(), "2024-01-01T00:00:00Z h1\n");
}

TEST_F(UpgradeEventsTest, AFailedDownloadIsReportedAndLeavesMaintenanceMode) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  http_.set({.get_status = 500, .hash = "h2", .body = script(0)});
  auto r = direct();
  EXPECT_EQ(r.code, 1);
  auto node_events = eventsAbout("default", "node-a");
  ASSERT_EQ(node_events.size(), 3u);
  EXPECT_EQ(node_events[2].value("reason", ""), "UpgradeFailed");
  EXPECT_THAT(node_events[2].value("message", ""), HasSubstr("HTTP 500"));
  EXPECT_FALSE(maintenanceConfigMap().has_value());
  EXPECT_EQ(installerRuns(), 0);
}

TEST_F(UpgradeEventsTest, AnOperatorsMaintenanceModeHoldsTheUpgradeBackAndIsKept) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  ASSERT_TRUE(putMaintenance("storage migration", "op"));
  auto r = direct();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("maintenance mode is on (storage migration): not upgrading"));
  EXPECT_EQ(installerRuns(), 0);
  EXPECT_TRUE(maintenanceConfigMap().has_value());
  EXPECT_TRUE(eventsAbout("default", "node-a").empty());
}

TEST_F(UpgradeEventsTest, ThePauseOfACrashedUpgradeDoesNotHoldTheNextOneBack) {
  writeRecord("2024-01-01T00:00:00Z h1\n");
  http_.setHash("h2");
  ASSERT_TRUE(putMaintenance("ekco upgrade to installer hash h2", "ekco upgrade"));
  auto r = direct();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(installerRuns(), 1);
  EXPECT_FALSE(maintenanceConfigMap().has_value());
}

}  // namespace
}  // namespace ekco::agent
