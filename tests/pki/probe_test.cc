// pki/probe.h against `openssl s_server` on loopback: the presented certificate is the one it
// serves; a closed port and a server that never answers are errors within the timeout.
#include "pki/probe.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "base/os/process.h"

namespace ekco::pki {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A listening TCP socket on 127.0.0.1 that never accepts: connections complete (backlog) and
// then nothing is ever said.
class Silent {
 public:
  Silent() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Silent() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int freePort() {
  Silent s;
  return s.port();
}

TEST(PresentedCertificate, IsTheCertificateTheServerServes) {
  std::string tmpl = (fs::temp_directory_path() / "ekco-probe-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  auto made = runner.run({.argv = {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                   "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "k.pem",
                                   "-out", "c.pem", "-subj", "/CN=probe-me", "-days", "2"},
                          .working_dir = dir.string(),
                          .timeout = 30s});
  ASSERT_TRUE(made && made->exit_code == 0);
  auto serial = runner.run({.argv = {"openssl", "x509", "-in", "c.pem", "-noout", "-serial"},
                            .working_dir = dir.string(),
                            .timeout = 30s});
  ASSERT_TRUE(serial && serial->exit_code == 0);
  const int port = freePort();
  std::jthread server([&](std::stop_token) {
    (void)runner.run(
        {.argv = {"timeout", "20", "openssl", "s_server", "-quiet", "-cert", "c.pem", "-key",
                  "k.pem", "-accept", "127.0.0.1:" + std::to_string(port), "-naccept", "1"},
         .working_dir = dir.string(),
         .timeout = 30s});
  });
  base::Result<Certificate> got = base::Error("not tried");
  for (int i = 0; i < 100; ++i) {
    got = presentedCertificate("127.0.0.1", port, 2s, clock, "probe-me");
    if (got) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got->subject, "CN=probe-me");
  EXPECT_EQ("serial=" + got->serial + "\n", serial->stdout_data);
  server.join();
  fs::remove_all(dir);
}

TEST(PresentedCertificate, ClosedPortAndSilentServerAreErrors) {
  base::SystemClock clock;
  const int closed = freePort();
  auto refused = presentedCertificate("127.0.0.1", closed, 2s, clock);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_THAT(refused.error().message(), HasSubstr("TLS to 127.0.0.1:" + std::to_string(closed)));

  Silent silent;
  const auto start = std::chrono::steady_clock::now();
  auto hung = presentedCertificate("127.0.0.1", silent.port(), 300ms, clock);
  ASSERT_FALSE(hung);
  EXPECT_EQ(hung.error().code(), base::ErrorCode::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace ekco::pki
