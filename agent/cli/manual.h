// ekco(8) and docs/commands.md, generated from the command line's definition (definition.h) by
// `ekco manual [--format man|markdown]`: every subcommand with its options and positionals,
// then the exit codes, the environment and the files. The packages install the man page;
// scripts/gen-docs keeps docs/commands.md current (a test fails when it differs).
#pragma once

#include <string>

#include "agent/cli/definition.h"

namespace ekco::agent {

enum class ManualFormat { kMan, kMarkdown };

std::string renderManual(const CommandDef& root, ManualFormat format);

}  // namespace ekco::agent
