// The `ekco` command line: one binary, subcommands as in design.md. main.cc only forwards here,
// so tests can run any command in-process with captured output.
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

// args[0] is the program name.
int runCli(const std::vector<std::string>& args, const CliEnv& env);

// `ekco version`'s text: first line "ekco <version> (<git sha>)", then one line per library.
std::string versionText();

}  // namespace ekco::agent
