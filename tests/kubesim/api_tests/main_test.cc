// The ekco-kubesim program: flags, serving until SIGTERM, exit status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "base/clock.h"
#include "base/os/process.h"

namespace ekco::kubesim {
namespace {

using ::testing::HasSubstr;

constexpr const char* kKubectl = "/usr/bin/kubectl";

class ProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-main-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  void spawn(std::vector<std::string> args) {
    args.insert(args.begin(), KUBESIM_BIN);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  // `kubectl --kubeconfig KUBECONFIG --cache-dir ... ARGS...` (HOME in the temp directory).
  base::Result<base::ProcessResult> kubectl(const std::string& kubeconfig,
                                            std::vector<std::string> args) {
    args.insert(args.begin(),
                {kKubectl, "--kubeconfig", kubeconfig, "--cache-dir", (dir_ / "cache").string()});
    return runner_.run({.argv = std::move(args),
                        .inherit_env = true,
                        .env = {{"HOME", dir_.string()}},
                        .stdin_data = "",
                        .working_dir = "",
                        .timeout = std::chrono::seconds(20),
                        .kill_grace = std::chrono::milliseconds(0)});
  }

  // The program run to completion with these flags (the flag checks: it must exit at once).
  base::Result<base::ProcessResult> runToExit(std::vector<std::string> args) {
    args.insert(args.begin(), KUBESIM_BIN);
    return runner_.run({.argv = std::move(args),
                        .inherit_env = true,
                        .env = {},
                        .stdin_data = "",
                        .working_dir = "",
                        .timeout = std::chrono::seconds(10),
                        .kill_grace = std::chrono::milliseconds(0)});
  }

  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

TEST_F(ProgramTest, ServesLoadedAndGeneratedObjectsUntilSigtermThenExitsZero) {
  if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << kKubectl << " is not installed";
  std::string kubeconfig = (dir_ / "kubeconfig").string();
  spawn({"--listen", "127.0.0.1:0", "--kubeconfig-out", kubeconfig, "--load",
         std::string(KUBESIM_TESTDATA_DIR) + "/cluster.yaml", "--generate-nodes", "3",
         "--generate-pods", "5"});
  for (int i = 0; i < 200 && !std::filesystem::exists(kubeconfig); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(std::filesystem::exists(kubeconfig));
  auto r = kubectl(kubeconfig, {"get", "nodes", "-o", "name"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, "node/node-0\nnode/node-1\nnode/node-2\nnode/node-a\nnode/node-b\n");

  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(ProgramTest, TokenFlagsAuthenticateAServiceAccountUnderRbac) {
  if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << kKubectl << " is not installed";
  std::string kubeconfig = (dir_ / "kubeconfig").string();
  std::string token_kubeconfig = (dir_ / "ekco.kubeconfig").string();
  spawn({"--listen", "127.0.0.1:0", "--kubeconfig-out", kubeconfig, "--load",
         std::string(KUBESIM_TESTDATA_DIR) + "/cluster.yaml", "--token",
         "s3cret=system:serviceaccount:kurl:ekco", "--token-kubeconfig-out",
         "s3cret=" + token_kubeconfig});
  for (int i = 0; i < 200 && !std::filesystem::exists(token_kubeconfig); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(std::filesystem::exists(token_kubeconfig));
  auto r = kubectl(token_kubeconfig, {"get", "nodes"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_THAT(r->stderr_data,
              HasSubstr("Error from server (Forbidden): nodes is forbidden: User "
                        "\"system:serviceaccount:kurl:ekco\" cannot list resource \"nodes\""));
}

TEST_F(ProgramTest, RejectsAMalformedTokenFlag) {
  auto r = runToExit({"--kubeconfig-out", (dir_ / "kc").string(), "--token", "no-user"});
  ASSERT_TRUE(r);
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->stderr_data, HasSubstr("--token: expected TOKEN=USER"));
}

TEST_F(ProgramTest, RejectsAMalformedListenAddress) {
  auto r = runToExit({"--listen", "nonsense", "--kubeconfig-out", (dir_ / "kc").string()});
  ASSERT_TRUE(r);
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->stderr_data, HasSubstr("--listen"));
}

}  // namespace
}  // namespace ekco::kubesim
