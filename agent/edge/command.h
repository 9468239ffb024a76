// One command of `ekco` (a subcommand, or a group of them such as `certs check|renew`): it adds
// itself to the command line and runs when it was the one parsed. The command line
// (agent/cli/cli.cc) holds the table of them, in the order `ekco --help` lists them; a feature's
// command lives in the feature's folder (`ekco purge-node`: features/purge/purge_cmd.h).
#pragma once

#include <memory>
#include <string>

#include "agent/edge/cli_env.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ekco::agent {

class Command {
 public:
  virtual ~Command() = default;
  // Adds its subcommands and options to the root; CLI11 keeps pointers into the command, so it
  // stays where the table holds it.
  virtual void add(CLI::App& root) = 0;
  // Whether one of its subcommands was parsed.
  virtual bool parsed() const = 0;
  // Runs it; `log_level` is the root's --log-level ("" when absent). Returns the exit code.
  virtual int run(const std::string& log_level, const CliEnv& env) = 0;
};

}  // namespace ekco::agent
