// Composition root of the `ekco` binary.
#include <iostream>
#include <string>
#include <vector>

#include "agent/cli/cli.h"
#include "base/log/journal_stream.h"
#include "base/log/log.h"
#include "base/os/heap.h"

extern char** environ;

int main(int argc, char** argv) {
  ekco::base::configureHeap();
  std::vector<std::string> args(argv, argv + argc);
  ekco::agent::CliEnv env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.environment.emplace_back(*e);
  env.out = &std::cout;
  env.err = &std::cerr;
  // Under systemd the commands' `error:` lines carry <3> like the agent's log (journalctl -p err).
  if (ekco::base::stderrIsJournal()) {
    ekco::base::JournalPrefixBuf prefixed(std::cerr.rdbuf());
    std::ostream journal_err(&prefixed);
    env.err = &journal_err;
    return ekco::agent::runCli(args, env);
  }
  return ekco::agent::runCli(args, env);
}
