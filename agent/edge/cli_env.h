// What every command is run with (its environment and output streams) and the exit codes they
// share: the command line (agent/cli/cli.h) builds it, and each feature's command takes it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ekco::agent {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed
inline constexpr int kExitUsage = 2;    // bad flags, bad config: nothing was done

struct CliEnv {
  std::vector<std::string> environment;  // "NAME=value", as in environ
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  // Where `config show` and the agent look for the config when --config is not given.
  std::string default_config_path = "/etc/ekco/config.yaml";
};

}  // namespace ekco::agent
