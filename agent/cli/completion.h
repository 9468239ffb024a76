// The bash completion script, generated from the command line's definition (definition.h) by
// `ekco completion bash`; the packages install it as
// /usr/share/bash-completion/completions/ekco. It completes subcommands, options, the values an
// option or positional is known to take (`ekco certs renew <TAB>`: certificate names; `--format
// <TAB>`), and file names for any other value.
#pragma once

#include <string>

#include "agent/cli/definition.h"

namespace ekco::agent {

std::string renderBashCompletion(const CommandDef& root);

}  // namespace ekco::agent
