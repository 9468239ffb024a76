#include "agent/edge/command_config.h"

#include <CLI/CLI.hpp>

#include "base/log/log.h"

namespace ekco::agent {

void addHostCommandFlags(CLI::App* app, std::string& config, std::string& kubeconfig,
                         std::string& host_root, const std::string& config_help) {
  app->add_option("--config", config, config_help);
  app->add_option("--kubeconfig", kubeconfig,
                  "kubeconfig (default: KUBECONFIG, in-cluster, then the host's "
                  "/etc/kubernetes/admin.conf)");
  app->add_option("--host-root", host_root, "Where the host's / is (default /)");
}

void addConfigFlags(CLI::App* app, FlagValues& values) {
  for (const KeyInfo& k : configKeys()) {
    if (k.key == "log_level") continue;  // a global flag of the root command
    const std::string snake(k.key);
    std::string names = keyFlag(snake);
    if (names != "--" + snake) names += ",--" + snake;
    std::string& target = values[snake];
    CLI::Option* opt = nullptr;
    if (k.kind == ValueKind::kBool) {
      // `--purge-dead-nodes` alone means true; `--purge-dead-nodes=false` is accepted too.
      opt = app->add_flag(names + "{true}", target, std::string(k.help));
    } else {
      opt = app->add_option(names, target, std::string(k.help));
    }
    opt->group(k.ignored ? kIgnoredFlagGroup : kConfigFlagGroup);
  }
}

void applyConfigFlags(const CLI::App* app, const FlagValues& values, ConfigLoader& loader) {
  for (const KeyInfo& k : configKeys()) {
    if (values.count(std::string(k.key)) == 0) continue;
    if (app->get_option(keyFlag(k.key))->count() > 0) {
      loader.setFlag(k.key, values.at(std::string(k.key)));
    }
  }
}

bool reportConfig(const std::vector<ConfigProblem>& problems,
                  const std::vector<ConfigNotice>& notices, std::ostream& err) {
  for (const ConfigNotice& n : notices) err << "warning: " << n.toString() << "\n";
  for (const ConfigProblem& p : problems) err << "error: " << p.toString() << "\n";
  return problems.empty();
}

std::optional<Config> commandConfig(const std::string& file, const CLI::App* cmd,
                                    const FlagValues* flags, const std::string& log_level_flag,
                                    const CliEnv& env, const ClusterConfig* cluster) {
  ConfigLoader loader;
  if (cluster != nullptr && cluster->problem) {
    *env.err << "error: " << *cluster->problem << "\n";
    return std::nullopt;
  }
  // The agents' ConfigMap first (cluster_config.h), then the local file, environment, flags.
  if (cluster != nullptr && cluster->text) loader.loadYaml(*cluster->text, kClusterConfigSource);
  loader.loadFile(file.empty() ? env.default_config_path : file, /*optional=*/file.empty());
  loader.loadEnvironment(env.environment);
  if (cmd != nullptr && flags != nullptr) applyConfigFlags(cmd, *flags, loader);
  if (!log_level_flag.empty()) loader.setFlag("log_level", log_level_flag);
  Config cfg = loader.finish();
  if (!reportConfig(loader.problems(), loader.notices(), *env.err)) return std::nullopt;
  if (auto level = base::parseLogLevel(cfg.log_level)) {
    base::LogOptions options = base::currentLogOptions();  // keeps a sink and clock set before
    options.level = *level;
    options.journal = base::stderrIsJournal();
    base::configureLogging(options);
  }
  if (cluster != nullptr) {
    base::logInfo("configuration",
                  {{"sources", describeConfigSources(loader.sources(), *cluster)}});
  }
  return cfg;
}

ClusterConfig clusterConfigFor(const std::string& kubeconfig, const std::string& host_root,
                               const CliEnv& env) {
  return readClusterConfig(
      {.kubeconfig = kubeconfig, .host_root = host_root, .environment = env.environment});
}

std::optional<Config> hostCommandConfig(const std::string& file, const CLI::App* cmd,
                                        const FlagValues* flags, const std::string& log_level_flag,
                                        const std::string& kubeconfig, const std::string& host_root,
                                        const CliEnv& env) {
  const ClusterConfig cluster = clusterConfigFor(kubeconfig, host_root, env);
  return commandConfig(file, cmd, flags, log_level_flag, env, &cluster);
}

}  // namespace ekco::agent
