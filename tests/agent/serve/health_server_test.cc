#include "agent/serve/health_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/os/process.h"
#include "base/os/unique_fd.h"
#include "tests/agent/cli_support.h"

namespace ekco::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

using testing::TempDir;

HealthHandlers cannedHandlers() {
  HealthHandlers h;
  h.healthz = [] { return Health{.ok = true}; };
  h.readyz = [] { return Health{.ok = false, .reason = "caches not synced: pods"}; };
  h.status = [] { return nlohmann::json{{"node", "node-a"}, {"is_leader", false}}; };
  h.metrics = [] { return std::string("# TYPE ekco_is_leader gauge\nekco_is_leader 0\n"); };
  return h;
}

std::unique_ptr<HealthServer> startServer(const std::string& path, HealthHandlers handlers,
                                          std::chrono::milliseconds timeout = 5s,
                                          std::size_t max_connections = 32) {
  auto server = HealthServer::start(HealthServerOptions{.socket_path = path,
                                                        .handlers = std::move(handlers),
                                                        .request_timeout = timeout,
                                                        .max_connections = max_connections});
  EXPECT_TRUE(server) << server.error().message();
  return server ? std::move(*server) : nullptr;
}

std::unique_ptr<HealthServer> startServerUnder(const std::string& root, const std::string& path) {
  auto server = HealthServer::start(
      HealthServerOptions{.socket_path = path, .host_root = root, .handlers = cannedHandlers()});
  EXPECT_TRUE(server) << server.error().message();
  return server ? std::move(*server) : nullptr;
}

HealthReply get(const std::string& path, std::string_view target, std::string_view method = "GET") {
  auto reply = queryHealthSocket(path, target, 3s, method);
  EXPECT_TRUE(reply) << target << ": " << reply.error().message();
  return reply ? *reply : HealthReply{};
}

// A raw client, for what queryHealthSocket does not send: silence, garbage, keep-alive.
base::UniqueFd connectRaw(const std::string& path) {
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  return fd;
}

void sendRaw(const base::UniqueFd& fd, std::string_view data) {
  EXPECT_EQ(::send(fd.get(), data.data(), data.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(data.size()));
}

// Reads until the peer closes or `within` passes; `closed` says which.
std::string readRaw(const base::UniqueFd& fd, std::chrono::milliseconds within, bool* closed) {
  std::string out;
  *closed = false;
  const auto deadline = base::SystemClock().monoNow() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - base::SystemClock().monoNow());
    if (left.count() <= 0) return out;
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
    char buf[4096];
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n <= 0) {
      *closed = true;
      return out;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// Leaves a socket file that nobody listens on, as a killed agent does.
void makeStaleSocket(const std::string& path) {
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
}

mode_t modeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode;
}

TEST(HealthServer, ServesEachEndpoint) {
  TempDir dir;
  const std::string path = dir.path() + "/run/ekco.sock";
  auto server = startServer(path, cannedHandlers());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->socketPath(), path);

  HealthReply healthz = get(path, "/healthz");
  EXPECT_EQ(healthz.status, 200);
  EXPECT_EQ(healthz.body, "ok\n");
  EXPECT_THAT(healthz.content_type, StartsWith("text/plain"));

  HealthReply readyz = get(path, "/readyz");
  EXPECT_EQ(readyz.status, 503);
  EXPECT_EQ(readyz.body, "caches not synced: pods\n");
  EXPECT_THAT(readyz.content_type, StartsWith("text/plain"));

  HealthReply status = get(path, "/status");
  EXPECT_EQ(status.status, 200);
  EXPECT_EQ(status.content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(status.body),
            (nlohmann::json{{"node", "node-a"}, {"is_leader", false}}));

  HealthReply metrics = get(path, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.content_type, StartsWith("text/plain; version=0.0.4"));
  EXPECT_EQ(metrics.body, "# TYPE ekco_is_leader gauge\nekco_is_leader 0\n");

  EXPECT_EQ(get(path, "/healthz?verbose=1").status, 200);
  EXPECT_EQ(get(path, "/").status, 404);
  EXPECT_EQ(get(path, "/healthz/").status, 404);
  EXPECT_EQ(get(path, "/debug/pprof").status, 404);
  EXPECT_EQ(get(path, "/healthz", "POST").status, 405);
  EXPECT_EQ(get(path, "/metrics", "HEAD").status, 405);
  EXPECT_EQ(get(path, "/status", "DELETE").status, 405);
}

// GET http://ADDRESS/TARGET with curl, a real HTTP client: "<status> <body>".
std::string curlGet(const std::string& url) {
  base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  auto r =
      runner.run({.argv = {"curl", "-sS", "--max-time", "5", "-o", "-", "-w", " %{http_code}", url},
                  .timeout = 10s});
  EXPECT_TRUE(r) << r.error().message();
  if (!r) return {};
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  return r->stdout_data;
}

TEST(HealthServer, ServesOnlyMetricsOverTcpWhenAnAddressIsGiven) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = HealthServer::start(HealthServerOptions{
      .socket_path = path, .handlers = cannedHandlers(), .metrics_address = "127.0.0.1:0"});
  ASSERT_TRUE(server) << server.error().message();
  const int port = (*server)->metricsPort();
  ASSERT_GT(port, 0);
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(curlGet(base + "/metrics"), "# TYPE ekco_is_leader gauge\nekco_is_leader 0\n 200");
  // The probes and the status document stay on the socket.
  for (const char* other : {"/status", "/healthz", "/readyz", "/"}) {
    EXPECT_EQ(curlGet(base + other), "not found\n 404") << other;
  }
  EXPECT_EQ(get(path, "/status").status, 200);
  EXPECT_EQ(get(path, "/metrics").status, 200);

  // Stopping closes the TCP listener too: nothing accepts any more.
  (*server)->stop();
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
}

TEST(HealthServer, ABadOrTakenMetricsAddressFailsBeforeTheSocketIsMade) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  for (const char* bad : {"localhost:9847", "127.0.0.1", "::1:9847", "127.0.0.1:99999"}) {
    auto server = HealthServer::start(HealthServerOptions{
        .socket_path = path, .handlers = cannedHandlers(), .metrics_address = bad});
    ASSERT_FALSE(server) << bad;
    EXPECT_THAT(server.error().message(), HasSubstr("want IPv4:PORT or [IPv6]:PORT")) << bad;
    EXPECT_FALSE(std::filesystem::exists(path)) << bad;
  }
  auto first = HealthServer::start(HealthServerOptions{
      .socket_path = path, .handlers = cannedHandlers(), .metrics_address = "127.0.0.1:0"});
  ASSERT_TRUE(first) << first.error().message();
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->metricsPort());
  auto second = HealthServer::start(HealthServerOptions{.socket_path = dir.path() + "/other.sock",
                                                        .handlers = cannedHandlers(),
                                                        .metrics_address = taken});
  ASSERT_FALSE(second);
  EXPECT_THAT(second.error().message(), HasSubstr("bind " + taken));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/other.sock"));
}

TEST(HealthServer, ReadyzAndHealthzReasonsAndDefaults) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  HealthHandlers h;
  h.healthz = [] { return Health{.ok = false, .reason = "manager loop stalled for 93s"}; };
  h.readyz = [] { return Health{.ok = false}; };
  auto server = startServer(path, h);
  ASSERT_NE(server, nullptr);
  HealthReply healthz = get(path, "/healthz");
  EXPECT_EQ(healthz.status, 503);
  EXPECT_EQ(healthz.body, "manager loop stalled for 93s\n");
  EXPECT_EQ(get(path, "/readyz").body, "not ok\n");
  // Handlers that were not supplied are not served.
  EXPECT_EQ(get(path, "/status").status, 404);
  EXPECT_EQ(get(path, "/metrics").status, 404);
}

TEST(HealthServer, AHandlerThatThrowsAnswers500AndTheServerGoesOn) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  HealthHandlers h = cannedHandlers();
  h.status = []() -> nlohmann::json { throw std::runtime_error("status lock poisoned"); };
  auto server = startServer(path, h);
  ASSERT_NE(server, nullptr);
  HealthReply status = get(path, "/status");
  EXPECT_EQ(status.status, 500);
  EXPECT_THAT(status.body, HasSubstr("status lock poisoned"));
  EXPECT_EQ(get(path, "/healthz").status, 200);
}

TEST(HealthServer, InvalidUtf8InTheStatusIsReplacedNotFatal) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  HealthHandlers h = cannedHandlers();
  h.status = [] { return nlohmann::json{{"last_error", std::string("bad \xff byte")}}; };
  auto server = startServer(path, h);
  ASSERT_NE(server, nullptr);
  HealthReply status = get(path, "/status");
  EXPECT_EQ(status.status, 200);
  EXPECT_EQ(nlohmann::json::parse(status.body)["last_error"], "bad \xEF\xBF\xBD byte");
}

TEST(HealthServer, CreatesTheDirectory0750AndTheSocket0660) {
  TempDir dir;
  const std::string run = dir.path() + "/run/ekco";
  const std::string path = run + "/ekco.sock";
  const mode_t old_umask = ::umask(022);
  auto server = startServer(path, cannedHandlers());
  ::umask(old_umask);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(S_ISDIR(modeOf(run)));
  EXPECT_EQ(modeOf(run) & 07777, 0750u);
  EXPECT_TRUE(S_ISSOCK(modeOf(path)));
  EXPECT_EQ(modeOf(path) & 07777, 0660u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  // No temporary socket is left behind.
  EXPECT_FALSE(std::filesystem::exists(run + "/.ekco.sock.tmp"));
}

TEST(HealthServer, LeavesAnExistingDirectorysModeAlone) {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  ASSERT_EQ(::mkdir(run.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(run.c_str(), 0755), 0);
  auto server = startServer(run + "/ekco.sock", cannedHandlers());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(modeOf(run) & 07777, 0755u);
  EXPECT_EQ(modeOf(run + "/ekco.sock") & 07777, 0660u);
}

// Issue 24 defect 10: the socket's directories are created with exact modes, whatever the umask
// (the parents were created 0777 under umask 0).
TEST(HealthServer, CreatesMissingParents0755UnderUmaskZero) {
  TempDir dir;
  const std::string root = dir.path() + "/host";
  ASSERT_TRUE(std::filesystem::create_directory(root));
  const mode_t old_umask = ::umask(0);
  auto server = HealthServer::start(
      {.socket_path = root + "/run/a/ekco/ekco.sock", .host_root = root, .handlers = {}});
  ::umask(old_umask);
  ASSERT_TRUE(server) << server.error().message();
  EXPECT_EQ(modeOf(root + "/run") & 07777, 0755u);
  EXPECT_EQ(modeOf(root + "/run/a") & 07777, 0755u);
  EXPECT_EQ(modeOf(root + "/run/a/ekco") & 07777, 0750u);
  EXPECT_EQ(modeOf(root + "/run/a/ekco/ekco.sock") & 07777, 0660u);
}

// Issue 24 defect 10: a symlink planted on the socket's path is followed inside the host root,
// as for every host path, never out of it.
TEST(HealthServer, APlantedSymlinkCannotMoveTheSocketOutOfTheHostRoot) {
  TempDir dir;
  const std::string root = dir.path() + "/host";
  const std::string outside = dir.path() + "/outside";
  ASSERT_TRUE(std::filesystem::create_directories(root));
  ASSERT_TRUE(std::filesystem::create_directories(outside));
  // An absolute target names a host path: /run -> <outside> means <root><outside>.
  std::filesystem::create_directory_symlink(outside, root + "/run");
  {
    auto server = startServerUnder(root, root + "/run/ekco/ekco.sock");
    ASSERT_NE(server, nullptr);
    EXPECT_TRUE(S_ISSOCK(modeOf(root + outside + "/ekco/ekco.sock")));
    EXPECT_TRUE(std::filesystem::is_empty(outside));
    EXPECT_EQ(get(root + outside + "/ekco/ekco.sock", "/healthz").status, 200);
  }
  EXPECT_FALSE(std::filesystem::exists(root + outside + "/ekco/ekco.sock"));  // removed on stop
  // A relative target that climbs above the root is refused; nothing is created outside.
  std::filesystem::remove(root + "/run");
  std::filesystem::create_directory_symlink("../../outside", root + "/run");
  auto refused = HealthServer::start(
      {.socket_path = root + "/run/ekco/ekco.sock", .host_root = root, .handlers = {}});
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr("climbs above the host root"));
  EXPECT_TRUE(std::filesystem::is_empty(outside));
  // And a socket path outside the root is refused outright.
  auto elsewhere = HealthServer::start(
      {.socket_path = outside + "/ekco.sock", .host_root = root, .handlers = {}});
  ASSERT_FALSE(elsewhere);
  EXPECT_THAT(elsewhere.error().message(), HasSubstr("is not under the host root"));
}

TEST(HealthServer, ReplacesAStaleSocket) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  makeStaleSocket(path);
  ASSERT_TRUE(S_ISSOCK(modeOf(path)));
  ASSERT_FALSE(queryHealthSocket(path, "/healthz", 1s));  // refused: nobody listens
  auto server = startServer(path, cannedHandlers());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(get(path, "/healthz").status, 200);
}

TEST(HealthServer, RefusesASocketAnotherAgentListensOn) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto first = startServer(path, cannedHandlers());
  ASSERT_NE(first, nullptr);
  auto second =
      HealthServer::start(HealthServerOptions{.socket_path = path, .handlers = cannedHandlers()});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), base::ErrorCode::kAlreadyExists);
  EXPECT_THAT(second.error().message(), HasSubstr("another ekco agent is listening on " + path));
  // The first one is untouched.
  EXPECT_EQ(get(path, "/healthz").status, 200);
}

TEST(HealthServer, NeverDeletesAFileThatIsNotASocket) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  { std::ofstream(path) << "precious\n"; }
  auto server =
      HealthServer::start(HealthServerOptions{.socket_path = path, .handlers = cannedHandlers()});
  ASSERT_FALSE(server);
  EXPECT_EQ(server.error().code(), base::ErrorCode::kAlreadyExists);
  EXPECT_THAT(server.error().message(), HasSubstr("is not a socket"));
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), "precious\n");

  // Nor a symlink (even to a stale socket), nor a directory.
  const std::string stale = dir.path() + "/stale.sock";
  makeStaleSocket(stale);
  const std::string link = dir.path() + "/link.sock";
  std::filesystem::create_symlink(stale, link);
  EXPECT_FALSE(HealthServer::start(HealthServerOptions{.socket_path = link}));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  const std::string subdir = dir.path() + "/dir.sock";
  std::filesystem::create_directory(subdir);
  EXPECT_FALSE(HealthServer::start(HealthServerOptions{.socket_path = subdir}));
  EXPECT_TRUE(std::filesystem::is_directory(subdir));
}

TEST(HealthServer, RejectsRelativeAndOverlongPaths) {
  auto relative = HealthServer::start(HealthServerOptions{.socket_path = "run/ekco.sock"});
  ASSERT_FALSE(relative);
  EXPECT_EQ(relative.error().code(), base::ErrorCode::kInvalidArgument);
  auto long_path =
      HealthServer::start(HealthServerOptions{.socket_path = "/tmp/" + std::string(120, 'x')});
  ASSERT_FALSE(long_path);
  EXPECT_EQ(long_path.error().code(), base::ErrorCode::kInvalidArgument);
}

TEST(HealthServer, StopRemovesTheSocketAndIsIdempotent) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = startServer(path, cannedHandlers());
  ASSERT_NE(server, nullptr);
  server->stop();
  EXPECT_FALSE(std::filesystem::exists(path));
  auto after = queryHealthSocket(path, "/healthz", 1s);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code(), base::ErrorCode::kNotFound);
  server->stop();
  server.reset();  // the destructor stops again
  // The path can be served again.
  auto again = startServer(path, cannedHandlers());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(get(path, "/healthz").status, 200);
}

TEST(HealthServer, StopLeavesANewerAgentsSocketAlone) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto old_server = startServer(path, cannedHandlers());
  ASSERT_NE(old_server, nullptr);
  // Someone replaced the path (an operator removed it and a new agent started).
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto new_server = startServer(path, cannedHandlers());
  ASSERT_NE(new_server, nullptr);
  old_server->stop();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(get(path, "/healthz").status, 200);
}

TEST(HealthServer, ServesConcurrentClients) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  std::atomic<int> status_calls{0};
  HealthHandlers h = cannedHandlers();
  h.status = [&status_calls] {
    ++status_calls;
    std::this_thread::sleep_for(5ms);  // handlers run in parallel, one per connection
    return nlohmann::json{{"node", "node-a"}};
  };
  auto server = startServer(path, h);
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 12;
  constexpr int kRequests = 15;
  std::atomic<int> ok{0};
  std::mutex failures_mu;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      for (int r = 0; r < kRequests; ++r) {
        auto reply = queryHealthSocket(path, r % 2 == 0 ? "/status" : "/healthz", 10s);
        if (reply && reply->status == 200) {
          ++ok;
        } else {
          std::lock_guard lock(failures_mu);
          failures.push_back(reply ? std::to_string(reply->status) : reply.error().message());
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), kClients * kRequests) << ::testing::PrintToString(failures);
  EXPECT_EQ(status_calls.load(), kClients * ((kRequests + 1) / 2));
}

TEST(HealthServer, ASilentClientDoesNotBlockOthersAndIsClosedAfterTheTimeout) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = startServer(path, cannedHandlers(), /*timeout=*/400ms);
  ASSERT_NE(server, nullptr);
  base::UniqueFd silent = connectRaw(path);
  base::UniqueFd half = connectRaw(path);
  sendRaw(half, "GET /healthz HTTP/1.1\r\nHo");  // and then nothing

  const base::SystemClock clock;
  const auto before = clock.monoNow();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(get(path, "/healthz").status, 200);
  EXPECT_LT(clock.monoNow() - before, 300ms);

  bool closed = false;
  EXPECT_EQ(readRaw(silent, 3s, &closed), "");
  EXPECT_TRUE(closed) << "the silent connection should be closed after the request timeout";
  EXPECT_EQ(readRaw(half, 3s, &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_LT(clock.monoNow() - before, 2s);
}

TEST(HealthServer, StopDoesNotWaitForASilentClient) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = startServer(path, cannedHandlers(), /*timeout=*/60s);
  ASSERT_NE(server, nullptr);
  base::UniqueFd silent = connectRaw(path);
  EXPECT_EQ(get(path, "/healthz").status, 200);  // the silent connection has been accepted
  const base::SystemClock clock;
  const auto before = clock.monoNow();
  server->stop();
  EXPECT_LT(clock.monoNow() - before, 1s);
  bool closed = false;
  readRaw(silent, 1s, &closed);
  EXPECT_TRUE(closed);
}

TEST(HealthServer, KeepsAConnectionAliveForSeveralRequests) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = startServer(path, cannedHandlers());
  ASSERT_NE(server, nullptr);
  base::UniqueFd fd = connectRaw(path);
  sendRaw(fd,
          "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
          "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  bool closed = false;
  std::string answers = readRaw(fd, 3s, &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(answers, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(answers, HasSubstr("\r\n\r\nok\nHTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_THAT(answers, HasSubstr("caches not synced: pods\n"));
}

TEST(HealthServer, AnswersGarbageWith400) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = startServer(path, cannedHandlers());
  ASSERT_NE(server, nullptr);
  base::UniqueFd fd = connectRaw(path);
  sendRaw(fd, "THIS IS NOT HTTP\r\n\r\n");
  bool closed = false;
  EXPECT_THAT(readRaw(fd, 3s, &closed), StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_TRUE(closed);
  EXPECT_EQ(get(path, "/healthz").status, 200);
}

TEST(HealthServer, ConnectionsBeyondTheLimitWaitForASlot) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = startServer(path, cannedHandlers(), /*timeout=*/600ms, /*max_connections=*/2);
  ASSERT_NE(server, nullptr);
  base::UniqueFd a = connectRaw(path);
  base::UniqueFd b = connectRaw(path);
  std::this_thread::sleep_for(100ms);  // both accepted: the two slots are taken
  auto waiting = queryHealthSocket(path, "/healthz", 150ms);
  ASSERT_FALSE(waiting) << "a third connection should wait in the backlog";
  EXPECT_EQ(waiting.error().code(), base::ErrorCode::kTimeout);
  // Served as soon as the silent ones time out, not refused.
  const base::SystemClock clock;
  const auto before = clock.monoNow();
  auto served = queryHealthSocket(path, "/healthz", 3s);
  ASSERT_TRUE(served) << served.error().message();
  EXPECT_EQ(served->status, 200);
  EXPECT_LT(clock.monoNow() - before, 2s);
  bool closed = false;
  readRaw(a, 1s, &closed);
  EXPECT_TRUE(closed);
}

// Anyone who can reach metrics_address can open connections and say nothing: with one pool
// for both listeners, 32 of them made the kubelet's liveness probe (on the socket) wait for a
// slot, time out, and restart the agent (issue 34).
TEST(HealthServer, HeldMetricsConnectionsNeverDelayTheSocket) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  auto server = HealthServer::start(HealthServerOptions{.socket_path = path,
                                                        .handlers = cannedHandlers(),
                                                        .request_timeout = 30s,
                                                        .metrics_address = "127.0.0.1:0"});
  ASSERT_TRUE(server) << server.error().message();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>((*server)->metricsPort()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // More silent TCP connections than both pools together hold.
  std::vector<base::UniqueFd> held;
  for (int i = 0; i < 48; ++i) {
    base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    held.push_back(std::move(fd));
  }
  std::this_thread::sleep_for(200ms);  // the metrics pool is full (the rest wait in the backlog)
  const base::SystemClock clock;
  const auto before = clock.monoNow();
  for (int i = 0; i < 3; ++i) {
    auto reply = queryHealthSocket(path, "/healthz", 1s);
    ASSERT_TRUE(reply) << reply.error().message();
    EXPECT_EQ(reply->status, 200);
  }
  EXPECT_LT(clock.monoNow() - before, 500ms);
}

// The threads of this process named `name` (their /proc comm).
int threadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string text;
    std::getline(comm, text);
    n += text == name ? 1 : 0;
  }
  return n;
}

// An idle agent's health socket holds its loop's thread and no worker; probes one at a time
// need one worker, and concurrent slow requests start at most `workers`.
TEST(HealthServer, WorkersStartAsTheyAreNeededUpToTheirNumber) {
  TempDir dir;
  const std::string path = dir.path() + "/ekco.sock";
  const int before = threadsNamed("health-worker");
  auto server = HealthServer::start(HealthServerOptions{.socket_path = path,
                                                        .handlers = cannedHandlers(),
                                                        .request_timeout = 2s,
                                                        .workers = 3});
  ASSERT_TRUE(server) << server.error().message();
  EXPECT_EQ(threadsNamed("health-worker"), before);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(get(path, "/healthz").status, 200);
    // As probes come: the worker has handed its connection back before the next one.
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(threadsNamed("health-worker"), before + 1);
  // Five connections each hold a worker with half a request: three are served at once, the
  // others wait their turn.
  std::vector<base::UniqueFd> halves;
  for (int i = 0; i < 5; ++i) {
    halves.push_back(connectRaw(path));
    sendRaw(halves.back(), "GET /healthz HTTP/1.1\r\nHo");
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(threadsNamed("health-worker"), before + 3);
  (*server)->stop();
  EXPECT_EQ(threadsNamed("health-worker"), before);
}

TEST(HealthServer, QueryReportsAMissingSocketAndATimeout) {
  TempDir dir;
  auto missing = queryHealthSocket(dir.path() + "/nope.sock", "/healthz", 1s);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), base::ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr(dir.path() + "/nope.sock"));

  // A listener that never answers.
  const std::string path = dir.path() + "/mute.sock";
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd.get(), 4), 0);
  auto mute = queryHealthSocket(path, "/healthz", 200ms);
  ASSERT_FALSE(mute);
  EXPECT_EQ(mute.error().code(), base::ErrorCode::kTimeout);
}

}  // namespace
}  // namespace ekco::agent
