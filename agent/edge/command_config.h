// The configuration a command runs with, built the same way for every command: the agents'
// ConfigMap (cluster_config.h) for host commands, the file (--config, else the default path when
// it exists), the EKCO_* environment, the command's per-key flags and --log-level, in that order
// (later wins); problems printed one line each; logging configured from the result.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/keys.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/cluster_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ekco::agent {

// Values of the per-key config flags of one subcommand, by snake_case key.
using FlagValues = std::map<std::string, std::string>;

// Registers every config key as a flag of `app`: kebab-case, with EKCO's snake_case spelling as
// an alias (`--min-ready-master-nodes` and `--min_ready_master_nodes`). Values are kept as text
// and go through ConfigLoader::setFlag, so flags are typed and checked exactly like the file.
void addConfigFlags(CLI::App* app, FlagValues& values);
// The CLI11 groups of those flags (`--help` lists them apart; ekco(8) summarises them).
inline constexpr const char* kConfigFlagGroup = "Configuration (override config.yaml)";
inline constexpr const char* kIgnoredFlagGroup = "Ignored EKCO settings";
// --config (`config_help` says what the command reads from it), --kubeconfig and --host-root: the
// flags of a command that acts on this host with the cluster's credentials (hostCommandConfig).
void addHostCommandFlags(CLI::App* app, std::string& config, std::string& kubeconfig,
                         std::string& host_root, const std::string& config_help);
// The flags given on the command line, into the loader.
void applyConfigFlags(const CLI::App* app, const FlagValues& values, ConfigLoader& loader);

// Prints problems (one line each, "error: ...") and notices ("warning: ..."); true when there
// were no problems.
bool reportConfig(const std::vector<ConfigProblem>& problems,
                  const std::vector<ConfigNotice>& notices, std::ostream& err);

// The config of a command; `cmd` and `flags` may be null (a command without per-key flags),
// `cluster` too (a command that does not read the ConfigMap). nullopt after the problems were
// printed (exit 2).
std::optional<Config> commandConfig(const std::string& file, const CLI::App* cmd,
                                    const FlagValues* flags, const std::string& log_level_flag,
                                    const CliEnv& env, const ClusterConfig* cluster = nullptr);

// The agents' ConfigMap for a host command reaching the API with these flags.
ClusterConfig clusterConfigFor(const std::string& kubeconfig, const std::string& host_root,
                               const CliEnv& env);

// A host command's config: the ConfigMap (through kubeconfig and host_root), then as above.
std::optional<Config> hostCommandConfig(const std::string& file, const CLI::App* cmd,
                                        const FlagValues* flags, const std::string& log_level_flag,
                                        const std::string& kubeconfig, const std::string& host_root,
                                        const CliEnv& env);

}  // namespace ekco::agent
