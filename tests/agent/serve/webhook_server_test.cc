// The webhook's HTTPS server on loopback, with real TLS clients: the tests' Boost.Asio client
// (tests/agent/serve/tls_client.h) and the curl command, both verifying the chain against the
// CA and the certificate against ekco.kurl.svc.
#include "agent/serve/webhook_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/admission/image_overrides.h"
#include "kube/kubeconfig.h"
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

TEST(WebhookServer, ASilentConnectionIsClosedAfterTheRequestTimeout) {
  const Pki p = makePki();
  WebhookServerOptions o = options();
  o.request_timeout = std::chrono::milliseconds(300);
  o.max_connections = 1;
  auto server = WebhookServer::start(o, p.serving);
  ASSERT_TRUE(server);
  // A TCP connection that never says a word holds the only slot ...
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>((*server)->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const auto start = std::chrono::steady_clock::now();
  // ... until the timeout closes it: then a real client is served.
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
