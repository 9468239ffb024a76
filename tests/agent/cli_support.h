// Shared by the agent tests: run the `ekco` command line in-process with captured output, and a
// temporary directory removed at the end of the test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "agent/cli/cli.h"

namespace ekco::agent::testing {

struct CliRun {
  int code = 0;
  std::string out{};
  std::string err{};
};

// Runs `ekco <args...>` with this environment; the default config path does not exist, so
// commands see all defaults unless given --config.
inline CliRun cli(std::vector<std::string> args, std::vector<std::string> environment = {}) {
  args.insert(args.begin(), "ekco");
  std::ostringstream out;
  std::ostringstream err;
  CliEnv env{.environment = std::move(environment),
             .out = &out,
             .err = &err,
             .default_config_path = "/nonexistent/ekco/config.yaml"};
  const int code = runCli(args, env);
  return {code, out.str(), err.str()};
}

class TempDir {
 public:
  // Under /tmp (short, so unix socket paths in it fit in sockaddr_un).
  explicit TempDir(std::string_view prefix = "ekco-test") {
    std::string tmpl = "/tmp/" + std::string(prefix) + "-XXXXXX";
    const char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = made != nullptr ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ekco::agent::testing
