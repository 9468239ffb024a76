// The `ekco` command line: one binary, subcommands as in design.md. main.cc only forwards here,
// so tests can run any command in-process with captured output.
#pragma once

#include <string>
#include <vector>

#include "agent/edge/cli_env.h"

namespace ekco::agent {

// args[0] is the program name.
int runCli(const std::vector<std::string>& args, const CliEnv& env);

// `ekco version`'s text: first line "ekco <version> (<git sha>)", then one line per library.
std::string versionText();

}  // namespace ekco::agent
