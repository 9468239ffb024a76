// "HTTP/2 where offered": the curl transport against a real HTTP/2 server (nghttpd from
// nghttp2-server, TLS with ALPN h2) negotiates HTTP/2, reuses one connection, and the REST
// client reads objects through it. (ekco-kubesim speaks HTTP/1.1 only.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "base/clock.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "tests/kubesim/server/pki.h"

extern char** environ;

namespace ekco::kube {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr const char* kNghttpd = "/usr/sbin/nghttpd";

std::uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool accepting(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

void writeFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class Http2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kNghttpd)) GTEST_SKIP() << kNghttpd << " is not installed (nghttp2-server)";
    std::string tmpl = (fs::temp_directory_path() / "ekco-h2-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto pki = kubesim::generatePki();
    ASSERT_TRUE(pki) << pki.error().message();
    pki_ = *pki;
    writeFile(dir_ / "server.key", pki_.server_key_pem);
    writeFile(dir_ / "server.crt", pki_.server_cert_pem);
    writeFile(
        dir_ / "docroot/api/v1/namespaces/default/configmaps/c",
        R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default","resourceVersion":"7"},"data":{"k":"v"}})");
    port_ = freePort();
    const std::string port = std::to_string(port_);
    const std::string docroot = "--htdocs=" + (dir_ / "docroot").string();
    const std::string key = (dir_ / "server.key").string();
    const std::string crt = (dir_ / "server.crt").string();
    std::vector<const char*> argv = {kNghttpd,     "--address=127.0.0.1", docroot.c_str(),
                                     port.c_str(), key.c_str(),           crt.c_str(),
                                     nullptr};
    ASSERT_EQ(
        ::posix_spawn(&pid_, kNghttpd, nullptr, nullptr, const_cast<char**>(argv.data()), environ),
        0);
    for (int i = 0; i < 200 && !accepting(port_); ++i)
      std::this_thread::sleep_for(milliseconds(10));
    ASSERT_TRUE(accepting(port_)) << "nghttpd did not start";
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  Connection connection() const {
    return {.server = "https://127.0.0.1:" + std::to_string(port_), .ca_pem = pki_.ca_cert_pem};
  }

  base::SystemClock clock_;
  fs::path dir_;
  kubesim::Pki pki_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

TEST_F(Http2Test, TheTransportNegotiatesHttp2AndKeepsOneConnection) {
  auto transport = CurlTransport::create(connection(), nullptr, clock_, {});
  ASSERT_TRUE(transport) << transport.error().message();
  for (int i = 0; i < 5; ++i) {
    auto response = (*transport)->send({.target = "/api/v1/namespaces/default/configmaps/c"});
    ASSERT_TRUE(response) << response.error().message();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->http_version, 20);
  }
  EXPECT_EQ((*transport)->connectionsOpened(), 1U);
}

TEST_F(Http2Test, TheRestClientReadsObjectsOverHttp2) {
  auto transport = CurlTransport::create(connection(), nullptr, clock_, {});
  ASSERT_TRUE(transport) << transport.error().message();
  RestClient client(**transport, clock_);
  auto got = client.get(resources::kConfigMaps, "default", "c");
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ((*got)["data"]["k"], "v");
  auto missing = client.get(resources::kConfigMaps, "default", "nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), base::ErrorCode::kNotFound);
}

}  // namespace
}  // namespace ekco::kube
