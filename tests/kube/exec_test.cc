#include "kube/exec.h"

#include <stdlib.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/server/server.h"

namespace ekco::kube {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(ExecPath, EncodesEveryArgumentAndTheStreams) {
  ExecRequest r{.ns = "rook-ceph",
                .pod = "rook-ceph-tools-1",
                .container = "rook-ceph-tools",
                .command = {"ceph", "osd", "purge", "12", "--yes-i-really-mean-it"}};
  EXPECT_EQ(execPath(r),
            "/api/v1/namespaces/rook-ceph/pods/rook-ceph-tools-1/exec?command=ceph&command=osd&"
            "command=purge&command=12&command=--yes-i-really-mean-it&container=rook-ceph-tools&"
            "stdout=true&stderr=true");
  ExecRequest odd{
      .ns = "a", .pod = "b", .command = {"sh", "-c", "echo a&b=c d"}, .stdin_data = "x"};
  EXPECT_EQ(execPath(odd),
            "/api/v1/namespaces/a/pods/b/exec?command=sh&command=-c&command=echo%20a%26b%3Dc%20d&"
            "stdin=true&stdout=true&stderr=true");
}

TEST(ExitCodeFromStatus, ReadsSuccessAndNonZeroExitCodes) {
  EXPECT_EQ(*exitCodeFromStatus(R"({"metadata":{},"status":"Success"})"), 0);
  EXPECT_EQ(
      *exitCodeFromStatus(
          R"({"status":"Failure","message":"command terminated with non-zero exit code",)"
          R"("reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"42"}]}})"),
      42);
}

TEST(ExitCodeFromStatus, AFailureThatIsNotAnExitCodeIsAnError) {
  auto r = exitCodeFromStatus(
      R"({"status":"Failure","message":"executable file not found in $PATH","reason":"InternalError","code":500})");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("executable file not found"));
  EXPECT_EQ(r.error().code(), base::ErrorCode::kUnavailable);
  for (
      std::string_view bad :
      {"", "not json", "[]", R"({"status":"Maybe"})",
       R"({"status":"Failure","reason":"NonZeroExitCode"})",
       R"({"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"x"}]}})"}) {
    auto e = exitCodeFromStatus(bad);
    EXPECT_FALSE(e) << bad;
    if (!e) {
      EXPECT_EQ(e.error().code(), base::ErrorCode::kParse) << bad;
    }
  }
}

class ExecAgainstKubesim : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ekco-exec-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    kubesim::ServerOptions options;
    options.out_dir = dir_;
    options.objects = {nlohmann::json::parse(R"({
      "apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "rook-ceph-tools-1", "namespace": "rook-ceph", "labels": {"app": "rook-ceph-tools"}},
      "spec": {"nodeName": "node-a", "containers": [{"name": "rook-ceph-tools", "image": "rook/ceph"}]}
    })")};
    options.exec_script = {
        {.command_prefix = {"ceph", "osd", "purge"},
         .stdout_data = "purged osd.12\n",
         .exit_code = 0},
        {.command_prefix = {"ceph", "osd", "down"},
         .stderr_data = "osd.12 is already down\n",
         .exit_code = 16},
    };
    auto server = kubesim::Server::start(options);
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    connection_.server = server_->url();
    connection_.ca_pem = server_->caPem();
    connection_.client_cert_pem = server_->clientCertPem();
    connection_.client_key_pem = server_->clientKeyPem();
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  ExecRequest request(std::vector<std::string> command) {
    return {.ns = "rook-ceph",
            .pod = "rook-ceph-tools-1",
            .container = "rook-ceph-tools",
            .command = std::move(command),
            .timeout = 10s};
  }

  std::string dir_;
  std::unique_ptr<kubesim::Server> server_;
  Connection connection_;
};

TEST_F(ExecAgainstKubesim, ReturnsStdoutAndExitZero) {
  WebSocketExecutor exec(connection_);
  auto r = exec.exec(request({"ceph", "osd", "purge", "12", "--yes-i-really-mean-it"}));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "purged osd.12\n");
  EXPECT_EQ(r->stderr_data, "");
  EXPECT_THAT(r->protocol, HasSubstr("channel.k8s.io"));
  auto log = server_->execLog();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].pod, "rook-ceph-tools-1");
  EXPECT_EQ(log[0].container, "rook-ceph-tools");
  EXPECT_EQ(log[0].command,
            (std::vector<std::string>{"ceph", "osd", "purge", "12", "--yes-i-really-mean-it"}));
}

// Issue 24 defect 11: an endless answer is cut off, not held (kubesim sends it in 32 KiB frames,
// so no single message is large).
TEST_F(ExecAgainstKubesim, AnAnswerOverSixteenMiBIsAnErrorNotHeld) {
  server_.reset();
  kubesim::ServerOptions options;
  options.out_dir = dir_;
  options.objects = {nlohmann::json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "rook-ceph-tools-1", "namespace": "rook-ceph"},
    "spec": {"nodeName": "node-a", "containers": [{"name": "rook-ceph-tools", "image": "x"}]}
  })")};
  options.exec_script = {{.command_prefix = {"ceph", "status"},
                          .stdout_data = std::string(std::size_t{17} << 20, 'x'),
                          .exit_code = 0}};
  auto server = kubesim::Server::start(options);
  ASSERT_TRUE(server) << server.error().message();
  server_ = std::move(*server);
  connection_.server = server_->url();
  connection_.ca_pem = server_->caPem();
  connection_.client_cert_pem = server_->clientCertPem();
  connection_.client_key_pem = server_->clientKeyPem();
  WebSocketExecutor exec(connection_);
  auto r = exec.exec(request({"ceph", "status"}));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("output is larger than 16 MiB"));
}

TEST_F(ExecAgainstKubesim, ANonZeroExitIsAResultWithStderr) {
  WebSocketExecutor exec(connection_);
  auto r = exec.exec(request({"ceph", "osd", "down", "12"}));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 16);
  EXPECT_EQ(r->stderr_data, "osd.12 is already down\n");
}

TEST_F(ExecAgainstKubesim, UnscriptedCommandsExitZeroWithNoOutput) {
  WebSocketExecutor exec(connection_);
  auto r = exec.exec(request({"ceph", "status"}));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "");
}

TEST_F(ExecAgainstKubesim, AMissingPodIsNotFound) {
  WebSocketExecutor exec(connection_);
  ExecRequest r = request({"ceph", "status"});
  r.pod = "no-such-pod";
  auto e = exec.exec(r);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), base::ErrorCode::kNotFound) << e.error().message();
  EXPECT_THAT(e.error().message(), HasSubstr("no-such-pod"));
}

TEST_F(ExecAgainstKubesim, AServerCertificateFromAnotherCaIsRefused) {
  Connection wrong = connection_;
  wrong.ca_pem = wrong.client_cert_pem;  // a certificate, but not the server's CA
  WebSocketExecutor exec(wrong);
  auto e = exec.exec(request({"ceph", "status"}));
  ASSERT_FALSE(e);
  EXPECT_THAT(e.error().message(), HasSubstr("TLS handshake"));
  EXPECT_TRUE(server_->execLog().empty());
}

TEST_F(ExecAgainstKubesim, ANameTheCertificateDoesNotCoverIsRefused) {
  Connection wrong = connection_;
  wrong.tls_server_name = "kubernetes.example.com";
  WebSocketExecutor exec(wrong);
  auto e = exec.exec(request({"ceph", "status"}));
  ASSERT_FALSE(e);
  EXPECT_THAT(e.error().message(), HasSubstr("TLS handshake"));
}

TEST_F(ExecAgainstKubesim, ASlowServerTimesOut) {
  kubesim::Faults faults;
  faults.latency = 1s;
  server_->setFaults(faults);
  WebSocketExecutor exec(connection_);
  ExecRequest r = request({"ceph", "status"});
  r.timeout = 300ms;
  auto e = exec.exec(r);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), base::ErrorCode::kTimeout) << e.error().message();
  server_->setFaults({});
}

TEST(WebSocketExecutor, RejectsIncompleteRequestsAndPlainHttp) {
  WebSocketExecutor exec(Connection{.server = "https://127.0.0.1:1"});
  EXPECT_EQ(exec.exec({.ns = "a", .pod = "b"}).error().code(), base::ErrorCode::kInvalidArgument);
  WebSocketExecutor plain(Connection{.server = "http://127.0.0.1:1"});
  auto e = plain.exec({.ns = "a", .pod = "b", .command = {"true"}});
  ASSERT_FALSE(e);
  EXPECT_THAT(e.error().message(), HasSubstr("https://"));
}

TEST(WebSocketExecutor, ConnectionRefusedIsUnavailable) {
  WebSocketExecutor exec(Connection{.server = "https://127.0.0.1:1"});
  auto e = exec.exec({.ns = "a", .pod = "b", .command = {"true"}, .timeout = 5s});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_THAT(e.error().message(), HasSubstr("connect 127.0.0.1:1"));
}

}  // namespace
}  // namespace ekco::kube
