// Composition root of the `ekco` binary.
#include <iostream>
#include <string>
#include <vector>

#include "agent/cli/cli.h"

extern char** environ;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  ekco::agent::CliEnv env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.environment.emplace_back(*e);
  env.out = &std::cout;
  env.err = &std::cerr;
  return ekco::agent::runCli(args, env);
}
