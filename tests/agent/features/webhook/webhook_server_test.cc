// The webhook's HTTPS server on loopback, with real TLS clients: the tests' Boost.Asio client
// (tests/agent/serve/tls_client.h) and the curl command, both verifying the chain against the
// CA and the certificate against ekco.kurl.svc.
#include "agent/features/webhook/webhook_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/features/webhook/image_overrides.h"
#include "kube/transport/kubeconfig.h"
#include "pki/issue.h"
#include "tests/agent/serve/tls_client.h"

namespace ekco::agent {
namespace {

using ekco::testing::TlsClient;
using nlohmann::json;
using ::testing::HasSubstr;

const std::vector<std::string> kNames = {"ekco.kurl.svc", "ekco.kurl.svc.cluster.local"};

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(EKCO_TESTDATA_DIR) + "/admission/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

base::WallTime now() { return base::SystemClock().wallNow(); }

struct Pki {
  pki::KeyPair ca;
  TlsCredentials serving;
};

Pki makePki() {
  auto ca = pki::createCa({.common_name = "ekco-webhook-ca", .now = now()});
  EXPECT_TRUE(ca) << ca.error().message();
  auto leaf = pki::issueServingCertificate({.ca_cert_pem = ca->cert_pem,
                                            .ca_key_pem = ca->key_pem,
                                            .common_name = kNames[0],
                                            .dns_names = kNames,
                                            .now = now()});
  EXPECT_TRUE(leaf) << leaf.error().message();
  return {.ca = *ca,
          .serving = {.cert_pem = leaf->cert_pem + ca->cert_pem, .key_pem = leaf->key_pem}};
}

const admission::ImageOverrides kOverrides =
    admission::parseImageOverrides({"projectcontour/contour:v1.18.0=myregistry.io/contour:fips"});

WebhookServerOptions options() {
  return {.address = "127.0.0.1", .port = 0, .review = [](std::string_view body) {
            return admission::reviewPod(body, kOverrides).response;
          }};
}

// The patched images of a review answer.
std::vector<std::string> patchedImages(const std::string& answer) {
  const json review = json::parse(answer);
  std::vector<std::string> out;
  if (!review["response"].contains("patch")) return out;
  const json patch =
      json::parse(*kube::base64Decode(review["response"]["patch"].get<std::string>()));
  for (const json& op : patch) out.push_back(op["value"]);
  return out;
}

// A TCP connection to the server from `source` (a loopback address), sending nothing yet.
int rawConnect(int port, const char* source = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// Connections the test holds open, closed when it ends.
struct HeldConnections {
  std::vector<int> fds;
  ~HeldConnections() {
    for (int fd : fds) ::close(fd);
  }
};

// A review of about `bytes` (a padding annotation), matching one override.
std::string reviewOfSize(std::size_t bytes) {
  json review = json::parse(fixture("pod-create-v1.json"));
  const std::size_t base = review.dump().size();
  review["request"]["object"]["metadata"]["annotations"]["padding"] =
      std::string(bytes > base + 64 ? bytes - base - 64 : 0, 'p');
  return review.dump();
}

using Clock = std::chrono::steady_clock;

TEST(WebhookServer, AnswersReviewsOverOneKeptAliveVerifiedConnection) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server) << server.error().message();
  TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  for (int i = 0; i < 3; ++i) {
    const auto answer = client.post("/pod-image-overrides", fixture("pod-create-v1.json"));
    EXPECT_EQ(answer.status, 200);
    EXPECT_EQ(json::parse(answer.body)["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_EQ(patchedImages(answer.body).size(), 3u);
  }
  const auto stats = (*server)->stats();
  EXPECT_EQ(stats.connections, 1u);
  EXPECT_EQ(stats.reviews, 3u);
}

TEST(WebhookServer, AMalformedReviewStillGetsAnAllowedAnswer) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  const auto answer = client.post("/pod-image-overrides", "{\"request\": {\"uid\": \"x\"");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(json::parse(answer.body)["response"]["allowed"], true);
}

TEST(WebhookServer, WrongPathsAndMethodsAreRefused) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  {
    TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
    EXPECT_EQ(client.post("/mutate", "{}").status, 404);
  }
  {
    TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
    EXPECT_EQ(client.post("/pod-image-overrides", "", "GET").status, 405);
  }
  {
    TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
    client.send("NOT HTTP AT ALL\r\n\r\n");
    EXPECT_EQ(client.read().status, 400);
  }
}

TEST(WebhookServer, ABodyOverTheLimitIsRefusedWithoutReadingIt) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  // Only the header is sent: the answer can come only from a server that did not wait for the
  // 4 MiB it announces.
  client.send(
      "POST /pod-image-overrides HTTP/1.1\r\nHost: ekco.kurl.svc\r\n"
      "Content-Type: application/json\r\nContent-Length: 4194304\r\n\r\n");
  const auto answer = client.read();
  EXPECT_EQ(answer.status, 413);
  EXPECT_EQ(answer.connection, "close");
  EXPECT_THAT(answer.body, HasSubstr("over the limit of 3145728 bytes"));
  EXPECT_EQ((*server)->stats().reviews, 0u);
}

TEST(WebhookServer, AChunkedBodyOverTheLimitIsRefusedAtTheLimit) {
  const Pki p = makePki();
  WebhookServerOptions o = options();
  o.body_limit = 1024;
  auto server = WebhookServer::start(o, p.serving);
  ASSERT_TRUE(server);
  TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  client.send(
      "POST /pod-image-overrides HTTP/1.1\r\nHost: ekco.kurl.svc\r\n"
      "Transfer-Encoding: chunked\r\n\r\n800\r\n" +
      std::string(0x800, 'a') + "\r\n");
  EXPECT_EQ(client.read().status, 413);
}

TEST(WebhookServer, NewConnectionsGetSwappedCredentialsOpenOnesKeepTheirs) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  TlsClient before((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  const std::string first = before.peerSerial();
  auto leaf = pki::issueServingCertificate({.ca_cert_pem = p.ca.cert_pem,
                                            .ca_key_pem = p.ca.key_pem,
                                            .dns_names = kNames,
                                            .now = now()});
  ASSERT_TRUE(leaf);
  ASSERT_TRUE((*server)->setCredentials({.cert_pem = leaf->cert_pem, .key_pem = leaf->key_pem}));
  TlsClient after((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  EXPECT_NE(after.peerSerial(), first);
  EXPECT_EQ(after.post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
  EXPECT_EQ(before.post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
  EXPECT_EQ(before.peerSerial(), first);
  // Unusable credentials are refused and the working ones stay.
  EXPECT_FALSE((*server)->setCredentials({.cert_pem = "junk", .key_pem = "junk"}));
  EXPECT_FALSE((*server)->setCredentials({.cert_pem = leaf->cert_pem, .key_pem = p.ca.key_pem}));
  TlsClient still((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  EXPECT_EQ(still.peerSerial(), after.peerSerial());
}

TEST(WebhookServer, AnotherCaOrAnotherNameFailsTheClientsVerification) {
  const Pki p = makePki();
  const Pki other = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  EXPECT_ANY_THROW(TlsClient((*server)->port(), other.ca.cert_pem, "ekco.kurl.svc"));
  EXPECT_ANY_THROW(TlsClient((*server)->port(), p.ca.cert_pem, "kubernetes.default.svc"));
  EXPECT_NO_THROW(TlsClient((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc.cluster.local"));
}

TEST(WebhookServer, ASilentConnectionIsClosedAfterTheHandshakeTimeout) {
  const Pki p = makePki();
  WebhookServerOptions o = options();
  o.handshake_timeout = std::chrono::milliseconds(300);
  o.max_connections = 1;
  auto server = WebhookServer::start(o, p.serving);
  ASSERT_TRUE(server);
  // A TCP connection that never says a word ...
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>((*server)->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const auto start = std::chrono::steady_clock::now();
  // ... is closed at the timeout.
  char byte = 0;
  EXPECT_EQ(::read(fd, &byte, 1), 0);  // EOF from the server
  const auto closed_after = std::chrono::steady_clock::now() - start;
  EXPECT_GE(closed_after, std::chrono::milliseconds(250));
  EXPECT_LT(closed_after, std::chrono::seconds(5));
  ::close(fd);
  TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  EXPECT_EQ(client.post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
}

TEST(WebhookServer, ServesConcurrentConnections) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  const std::string body = fixture("pod-create-v1.json");
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
      for (int i = 0; i < 20; ++i) {
        if (client.post("/pod-image-overrides", body).status == 200) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 160);
  EXPECT_EQ((*server)->stats().connections, 8u);
}

// Issue 34: connections that say nothing held the 64 threads (and then the backlog) for 10 s
// each, so the apiserver's reviews waited past its own 10 s timeout and, with failurePolicy
// Ignore, pods were admitted without their overrides. Now they wait in the poll loop.
TEST(WebhookServer, IdleConnectionsDoNotDelayAReview) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  const int port = (*server)->port();
  HeldConnections idle;
  for (int i = 0; i < 128; ++i) idle.fds.push_back(rawConnect(port));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all accepted
  auto start = Clock::now();
  TlsClient client(port, p.ca.cert_pem, "ekco.kurl.svc");
  EXPECT_EQ(client.post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  // And connections that finished the handshake, then went quiet.
  start = Clock::now();
  std::vector<std::unique_ptr<TlsClient>> quiet;
  for (int i = 0; i < 32; ++i) {
    quiet.push_back(std::make_unique<TlsClient>(port, p.ca.cert_pem, "ekco.kurl.svc"));
  }
  TlsClient another(port, p.ca.cert_pem, "ekco.kurl.svc");
  EXPECT_EQ(another.post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));  // 33 handshakes under ASan
  // The quiet ones are still served when they speak.
  EXPECT_EQ(quiet.back()->post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
}

// Slow clients (a byte of a TLS handshake, then nothing) from one address hold at most
// per_source_workers of the workers, until their handshake deadline: another address's review
// is answered at once.
TEST(WebhookServer, SlowClientsFromOneAddressCannotTakeEveryWorker) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  const int port = (*server)->port();
  HeldConnections slow;
  for (int i = 0; i < 80; ++i) {
    const int fd = rawConnect(port, "127.0.0.2");
    ASSERT_EQ(::write(fd, "\x16", 1), 1);  // a TLS record's first byte
    slow.fds.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  TlsClient client(port, p.ca.cert_pem, "ekco.kurl.svc");
  EXPECT_EQ(client.post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

// Issue 34: eight concurrent 3 MiB reviews took an agent from 45 MiB to 544 MiB. Each request
// now reserves its cost from one budget before its body is read: with room for two 1 MiB
// reviews, six at once are reviewed at most two at a time, and all answered. (Each review waits
// for a third to join it, up to 1 s: a server without the budget has three at once at once.)
TEST(WebhookServer, ConcurrentLargeReviewsAreReviewedWithinTheMemoryBudget) {
  const Pki p = makePki();
  const std::string body = reviewOfSize(std::size_t{1} << 20);
  const std::size_t cost = webhookRequestCost(body.size(), std::size_t{3} << 20);
  std::atomic<int> in_review{0};
  std::atomic<int> most{0};
  WebhookServerOptions o = options();
  // Large bodies get two thirds of the budget: two fit, three do not.
  o.memory_budget = (2 * cost + cost / 2) * 3 / 2;
  o.budget_wait = std::chrono::seconds(20);
  o.review = [&](std::string_view b) {
    const int now = ++in_review;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (in_review < 3 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    --in_review;
    return admission::reviewPod(b, kOverrides).response;
  };
  auto server = WebhookServer::start(o, p.serving);
  ASSERT_TRUE(server);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&] {
      TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
      if (client.post("/pod-image-overrides", body).status == 200) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_LE(most.load(), 2);
  // A worker gives its reservation back after the answer is written, which may be just after the
  // client has read it: bounded wait, not a race.
  for (int i = 0; i < 500 && (*server)->stats().reserved != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto stats = (*server)->stats();
  EXPECT_LE(stats.reserved_peak, o.memory_budget);
  EXPECT_GE(stats.reserved_peak, 2 * cost);  // two at once, not one after the other
  EXPECT_EQ(stats.reserved, 0u);
}

// When the budget stays full longer than budget_wait, a large request is answered 503 with
// Retry-After, its body unread; an ordinary review still finds room (large bodies may use two
// thirds of the budget).
TEST(WebhookServer, ALargeReviewFindingNoRoomIs503AndSmallOnesAreStillServed) {
  const Pki p = makePki();
  const std::string big = reviewOfSize(std::size_t{1} << 20);
  const std::size_t cost = webhookRequestCost(big.size(), std::size_t{3} << 20);
  WebhookServerOptions o = options();
  o.memory_budget = cost * 3 / 2 + cost / 4;  // one large review at a time
  o.budget_wait = std::chrono::milliseconds(100);
  std::atomic<bool> release{false};
  o.review = [&](std::string_view b) {
    if (b.size() > (std::size_t{512} << 10)) {
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return admission::reviewPod(b, kOverrides).response;
  };
  auto server = WebhookServer::start(o, p.serving);
  ASSERT_TRUE(server);
  std::thread first([&] {
    TlsClient client((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
    EXPECT_EQ(client.post("/pod-image-overrides", big).status, 200);
  });
  while ((*server)->stats().reserved == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  TlsClient second((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  const auto refused = second.post("/pod-image-overrides", big);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.connection, "close");
  TlsClient small((*server)->port(), p.ca.cert_pem, "ekco.kurl.svc");
  EXPECT_EQ(small.post("/pod-image-overrides", fixture("pod-create-v1.json")).status, 200);
  release = true;
  first.join();
  EXPECT_EQ((*server)->stats().busy, 1u);
}

TEST(WebhookServer, StartFailsOnBadCredentialsAddressesAndABusyPort) {
  const Pki p = makePki();
  auto bad = WebhookServer::start(options(), {.cert_pem = "x", .key_pem = "y"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), base::ErrorCode::kInvalidArgument);
  WebhookServerOptions o = options();
  o.address = "not-an-ip";
  EXPECT_FALSE(WebhookServer::start(o, p.serving));
  auto first = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(first);
  o = options();
  o.port = (*first)->port();
  auto busy = WebhookServer::start(o, p.serving);
  ASSERT_FALSE(busy);
  EXPECT_THAT(busy.error().message(), HasSubstr("bind 127.0.0.1"));
}

// curl, an independent TLS client: the chain verifies against the CA file and the name.
TEST(WebhookServer, CurlVerifiesTheChainAgainstTheCaAndGetsThePatch) {
  const Pki p = makePki();
  auto server = WebhookServer::start(options(), p.serving);
  ASSERT_TRUE(server);
  const auto dir =
      std::filesystem::temp_directory_path() / ("ekco-webhook-curl-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ca.pem") << p.ca.cert_pem;
  const Pki other = makePki();
  std::ofstream(dir / "other-ca.pem") << other.ca.cert_pem;
  std::filesystem::copy_file(std::string(EKCO_TESTDATA_DIR) + "/admission/pod-create-v1.json",
                             dir / "review.json");
  auto curl = [&](const std::string& ca, const std::string& name) {
    const std::string port = std::to_string((*server)->port());
    const std::string cmd = "curl -sS --max-time 10 --cacert " + (dir / ca).string() +
                            " --resolve " + name + ":" + port + ":127.0.0.1 -H " +
                            "'Content-Type: application/json' --data-binary @" +
                            (dir / "review.json").string() + " https://" + name + ":" + port +
                            "/pod-image-overrides 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
    const int status = ::pclose(pipe);
    return std::pair{WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  };
  const auto [rc, out] = curl("ca.pem", "ekco.kurl.svc");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(patchedImages(out), std::vector<std::string>(3, "myregistry.io/contour:fips")) << out;
  const auto [rc_other, out_other] = curl("other-ca.pem", "ekco.kurl.svc");
  EXPECT_EQ(rc_other, 60) << out_other;  // CURLE_PEER_FAILED_VERIFICATION
  const auto [rc_name, out_name] = curl("ca.pem", "ekco.default.svc");
  EXPECT_EQ(rc_name, 60) << out_name;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ekco::agent
