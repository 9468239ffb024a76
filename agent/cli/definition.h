// The command line as data: every subcommand, its options and positionals, read from CLI11's own
// tree after every command added itself, so that what is generated from it (ekco(8),
// docs/commands.md, the bash completion) cannot drift from what `ekco` parses.
#pragma once

#include <string>
#include <vector>

#include "agent/edge/command.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ekco::agent {

struct OptionDef {
  std::vector<std::string> names;  // "--log-level", "--log_level"; a positional: its name
  bool positional = false;
  bool flag = false;      // takes no value
  bool repeated = false;  // a positional taking any number of values
  bool required = false;
  std::string metavar;  // the value's placeholder: "FORMAT", "NAME"
  std::string help;
  std::string group;                // its CLI11 group ("" for the default one)
  std::vector<std::string> values;  // the values it takes, when known (IsMember, ArgumentValues)
};

struct CommandDef {
  std::string path;  // below `ekco`: "certs renew"; "" for the root
  std::string help;
  std::string exit_status;         // its own exit codes (setExitStatus); "" when none
  std::vector<OptionDef> options;  // positionals last, in their order
  // Every configuration key as a flag (command_config.h's groups): the manual summarises them,
  // the completion offers them.
  std::vector<OptionDef> config_flags;
  std::vector<CommandDef> subcommands;
};

// The tree below `root`; `values` adds what commands know of their arguments' values.
CommandDef defineCommandLine(CLI::App& root, const std::vector<ArgumentValues>& values);

// Every command that runs (no subcommand of its own), depth first, in `ekco --help`'s order.
std::vector<const CommandDef*> leafCommands(const CommandDef& root);

}  // namespace ekco::agent
