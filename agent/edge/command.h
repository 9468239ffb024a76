// One command of `ekco` (a subcommand, or a group of them such as `certs check|renew`): it adds
// itself to the command line and runs when it was the one parsed. The command line
// (agent/cli/cli.cc) holds the table of them, in the order `ekco --help` lists them; a feature's
// command lives in the feature's folder (`ekco purge-node`: features/purge/purge_cmd.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/edge/cli_env.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ekco::agent {

// The values an argument takes that its parser does not list (certificate names, which the
// command checks itself): `ekco completion bash` offers them, `ekco manual` lists them.
struct ArgumentValues {
  std::string command;  // the subcommand's path below `ekco`: "certs renew"
  std::string option;   // a positional's name ("NAME") or an option's long name ("--format")
  std::vector<std::string> values;
};

// What a command's exit codes mean ("0 purged; 1 refused or failed ...; 2 bad usage"): shown
// at the end of its --help (CLI11's footer) and in ekco(8) and docs/commands.md. Set it on the
// command that runs, not on a group: CLI11 copies a parent's footer into the subcommands added
// after it.
void setExitStatus(CLI::App* app, std::string_view text);
// "" when the command has none of its own (the convention of cli_env.h applies).
std::string exitStatusOf(const CLI::App& app);

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
  // What its arguments take beyond what CLI11 knows (an IsMember check lists its own values).
  virtual std::vector<ArgumentValues> argumentValues() const { return {}; }
};

}  // namespace ekco::agent
