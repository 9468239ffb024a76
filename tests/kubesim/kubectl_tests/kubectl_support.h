// What the kubectl tests of CRDs and Tables share: a server started in-process on an ephemeral
// port (with a manual clock, so AGE columns are exact) and the real kubectl pointed at it.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/os/process.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim::testing {

inline constexpr const char* kKubectlPath = "/usr/bin/kubectl";

class KubectlFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kKubectlPath)) GTEST_SKIP() << kKubectlPath << " is not installed";
    std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-kubectl-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }

  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void start(std::vector<nlohmann::json> objects = {}) {
    ServerOptions options;
    options.out_dir = dir_.string();
    options.objects = std::move(objects);
    options.clock = &clock_;
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  base::ProcessResult kubectl(std::vector<std::string> args, std::string stdin_data = "") {
    std::vector<std::string> argv = {kKubectlPath, "--kubeconfig", server_->kubeconfigPath(),
                                     "--cache-dir", (dir_ / "cache").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    base::ProcessRequest request{.argv = argv,
                                 .inherit_env = true,
                                 .env = {{"HOME", dir_.string()}, {"KUBECONFIG", ""}},
                                 .stdin_data = std::move(stdin_data),
                                 .working_dir = "",
                                 .timeout = std::chrono::seconds(30),
                                 .kill_grace = std::chrono::milliseconds(0)};
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }

  // The clock of the server: objects are created at its time, tables measure ages with it.
  base::ManualClock clock_;
  base::SystemClock system_clock_;
  base::BoostProcessRunner runner_{system_clock_};
  std::filesystem::path dir_;
  std::unique_ptr<Server> server_;
};

}  // namespace ekco::kubesim::testing
