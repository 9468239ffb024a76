#include "agent/cli/cli.h"

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <boost/version.hpp>
#include <nlohmann/json.hpp>

#include "agent/cli/agent_cmd.h"
#include "agent/cli/cluster_config.h"
#include "agent/cli/status_cmd.h"
#include "agent/config/config.h"
#include "agent/config/kurl_installer.h"
#include "agent/features/certs/certs_cmd.h"
#include "agent/features/host_jobs/job_cmd.h"
#include "agent/features/host_units/host_units.h"
#include "agent/features/purge/purge_cmd.h"
#include "agent/features/reboot/shutdown_cmd.h"
#include "agent/features/upgrade/upgrade_cmd.h"
#include "agent/maintenance/maintenance_cmd.h"
#include "base/file_read.h"
#include "base/log.h"
#include "base/version_info.h"
#include "haproxy/render.h"
#include "hostfs/local_host_fs.h"
#include "kube/curl_transport.h"
#include "pki/certificate.h"
#include "units/render.h"

namespace ekco::agent {
namespace {

// Values of the per-key config flags of one subcommand, by snake_case key.
using FlagValues = std::map<std::string, std::string>;

// Registers every config key as a flag: kebab-case, with EKCO's snake_case spelling as an alias
// (`--min-ready-master-nodes` and `--min_ready_master_nodes`). Values are kept as text and go
// through ConfigLoader::setFlag, so flags are typed and checked exactly like the file.
void addConfigFlags(CLI::App* app, FlagValues& values) {
  for (const KeyInfo& k : configKeys()) {
    if (k.key == "log_level") continue;  // a global flag of the root command
    std::string snake(k.key);
    std::string kebab = snake;
    std::replace(kebab.begin(), kebab.end(), '_', '-');
    std::string names = "--" + kebab;
    if (kebab != snake) names += ",--" + snake;
    std::string& target = values[snake];
    CLI::Option* opt = nullptr;
    if (k.kind == ValueKind::kBool) {
      // `--purge-dead-nodes` alone means true; `--purge-dead-nodes=false` is accepted too.
      opt = app->add_flag(names + "{true}", target, std::string(k.help));
    } else {
      opt = app->add_option(names, target, std::string(k.help));
    }
    opt->group(k.ignored ? "Ignored EKCO settings" : "Configuration (override config.yaml)");
  }
}

void applyFlags(const CLI::App* app, const FlagValues& values, ConfigLoader& loader) {
  for (const KeyInfo& k : configKeys()) {
    if (values.count(std::string(k.key)) == 0) continue;
    std::string kebab(k.key);
    std::replace(kebab.begin(), kebab.end(), '_', '-');
    if (app->get_option("--" + kebab)->count() > 0) {
      loader.setFlag(k.key, values.at(std::string(k.key)));
    }
  }
}

// Prints problems (one line each) and notices; returns true when there were no problems.
bool report(const std::vector<ConfigProblem>& problems, const std::vector<ConfigNotice>& notices,
            std::ostream& err) {
  for (const ConfigNotice& n : notices) err << "warning: " << n.toString() << "\n";
  for (const ConfigProblem& p : problems) err << "error: " << p.toString() << "\n";
  return problems.empty();
}

int configCheck(const std::string& file, const CliEnv& env) {
  ConfigLoader loader;
  loader.loadFile(file);
  (void)loader.finish();
  if (!report(loader.problems(), loader.notices(), *env.err)) return kExitUsage;
  *env.out << file << ": ok\n";
  return kExitOk;
}

int configShow(const std::string& file, const CLI::App* cmd, const FlagValues& flags,
               const std::string& log_level_flag, const CliEnv& env,
               const ClusterConfig* cluster = nullptr) {
  ConfigLoader loader;
  if (cluster != nullptr && cluster->problem) {
    *env.err << "error: " << *cluster->problem << "\n";
    return kExitUsage;
  }
  if (cluster != nullptr && cluster->text) loader.loadYaml(*cluster->text, kClusterConfigSource);
  if (!file.empty()) {
    loader.loadFile(file);
  } else {
    // The default location may be absent: then the defaults apply.
    loader.loadFile(env.default_config_path, /*optional=*/true);
  }
  loader.loadEnvironment(env.environment);
  applyFlags(cmd, flags, loader);
  if (!log_level_flag.empty()) loader.setFlag("log_level", log_level_flag);
  Config cfg = loader.finish();
  if (!report(loader.problems(), loader.notices(), *env.err)) return kExitUsage;
  if (cluster != nullptr) {
    *env.out << "# sources: " << describeConfigSources(loader.sources(), *cluster) << "\n";
  }
  *env.out << renderConfigYaml(redactSecrets(std::move(cfg)));
  return kExitOk;
}

// The config of a command: the file (--config, else the default path if it exists), the
// environment, the command's per-key flags and --log-level; logging configured from it.
// nullopt after the problems were printed (exit 2).
std::optional<Config> commandConfig(const std::string& file, const CLI::App* cmd,
                                    const FlagValues* flags, const std::string& log_level_flag,
                                    const CliEnv& env, const ClusterConfig* cluster = nullptr) {
  ConfigLoader loader;
  if (cluster != nullptr && cluster->problem) {
    *env.err << "error: " << *cluster->problem << "\n";
    return std::nullopt;
  }
  // The agents' ConfigMap first (cluster_config.h), then the local file, environment, flags.
  if (cluster != nullptr && cluster->text) loader.loadYaml(*cluster->text, kClusterConfigSource);
  loader.loadFile(file.empty() ? env.default_config_path : file, /*optional=*/file.empty());
  loader.loadEnvironment(env.environment);
  if (cmd != nullptr && flags != nullptr) applyFlags(cmd, *flags, loader);
  if (!log_level_flag.empty()) loader.setFlag("log_level", log_level_flag);
  Config cfg = loader.finish();
  if (!report(loader.problems(), loader.notices(), *env.err)) return std::nullopt;
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

// The agents' ConfigMap for a host command reaching the API with these flags.
ClusterConfig clusterConfigFor(const std::string& kubeconfig, const std::string& host_root,
                               const CliEnv& env) {
  return readClusterConfig(
      {.kubeconfig = kubeconfig, .host_root = host_root, .environment = env.environment});
}

int agentCommand(const std::string& file, const CLI::App* cmd, const FlagValues& flags,
                 const std::string& log_level_flag, const AgentCommandArgs& args,
                 const CliEnv& env) {
  auto cfg = commandConfig(file, cmd, &flags, log_level_flag, env);
  if (!cfg) return kExitUsage;
  std::string source = file;
  if (file.empty()) {
    std::error_code ec;
    source =
        std::filesystem::exists(env.default_config_path, ec) ? env.default_config_path : "defaults";
  }
  return runAgentCommand(*cfg, source, args, env);
}

int configFromKurl(const std::string& file, const CliEnv& env) {
  auto text = base::readSmallFile(file, kMaxConfigFileBytes);
  if (!text) {
    *env.err << "error: "
             << (text.error().code() == base::ErrorCode::kNotFound
                     ? file + ": cannot read the file (does it exist?)"
                     : text.error().message())
             << "\n";
    return kExitUsage;
  }
  KurlConversion conv = configFromKurlInstaller(*text, file);
  if (!report(conv.problems, conv.notices, *env.err)) return kExitUsage;
  *env.out << "# ekco configuration converted from the kURL Installer " << file << "\n"
           << renderConfigYaml(conv.config);
  return kExitOk;
}

// `ekco render haproxy|manifest`: the internal load balancer's files, printed (nothing is
// written). A bad value is usage: exit 2 with one line.
struct RenderArgs {
  std::string endpoints{};
  std::string bind = haproxy::HaproxyConfigOptions{}.bind;
  bool bind_ipv6_loopback = false;
  std::string image = Config{}.internal_load_balancer_haproxy_image;
};

int renderHaproxy(const RenderArgs& args, const CliEnv& env) {
  auto endpoints = haproxy::parseEndpointList(args.endpoints);
  if (!endpoints) {
    *env.err << "error: --endpoints: " << endpoints.error().message() << "\n";
    return kExitUsage;
  }
  auto config = haproxy::renderHaproxyConfig({.endpoints = std::move(*endpoints),
                                              .bind = args.bind,
                                              .bind_ipv6_loopback = args.bind_ipv6_loopback,
                                              .image = args.image});
  if (!config) {
    *env.err << "error: " << config.error().message() << "\n";
    return kExitUsage;
  }
  *env.out << *config;
  return kExitOk;
}

// `ekco render units`: the files the agent installs for this config, written under --out in the
// host's layout (<out>/etc/systemd/system/ekco-reboot.service, <out>/opt/ekco/shutdown.sh, ...).
struct RenderUnitsArgs {
  std::string config{};
  std::string out{};
  std::string bin = "/usr/bin/ekco";
};

int renderUnits(const RenderUnitsArgs& args, const CliEnv& env) {
  ConfigLoader loader;
  if (!args.config.empty()) {
    loader.loadFile(args.config);
  } else {
    loader.loadFile(env.default_config_path, /*optional=*/true);
  }
  loader.loadEnvironment(env.environment);
  const Config cfg = loader.finish();
  if (!report(loader.problems(), loader.notices(), *env.err)) return kExitUsage;
  auto files = units::renderHostUnits(hostUnitsOptions(cfg, args.bin));
  if (!files) {
    *env.err << "error: " << files.error().message() << "\n";
    return kExitUsage;
  }
  std::error_code ec;
  std::filesystem::create_directories(args.out, ec);
  base::SystemClock clock;
  auto out = hostfs::LocalHostFs::open(args.out, clock);
  if (!out) {
    *env.err << "error: --out " << args.out << ": " << out.error().message() << "\n";
    return kExitFailure;
  }
  for (const auto& f : *files) {
    const auto dir = std::filesystem::path(f.path).parent_path().string();
    base::Status made = (*out)->makeDirs(dir, 0755);
    auto written = made ? (*out)->write(f.path, f.content, {.mode = f.mode})
                        : base::Result<hostfs::Changed>(made.error());
    if (!written) {
      *env.err << "error: " << written.error().message() << "\n";
      return kExitFailure;
    }
    *env.out << (*out)->realPath(f.path) << "\n";
  }
  return kExitOk;
}

int renderManifest(const RenderArgs& args, const CliEnv& env) {
  auto manifest = haproxy::renderStaticPodManifest({.image = args.image, .bind = args.bind});
  if (!manifest) {
    *env.err << "error: " << manifest.error().message() << "\n";
    return kExitUsage;
  }
  *env.out << *manifest;
  return kExitOk;
}

}  // namespace

std::string versionText() {
  std::string out = fmt::format("ekco {} ({})\n", EKCO_VERSION, EKCO_GIT_SHA);
  out += fmt::format("  libsystemd {}\n", EKCO_SYSTEMD_VERSION);
  out += fmt::format("  yaml-cpp {}\n", EKCO_YAML_CPP_VERSION);
  out += fmt::format("  libcurl {}\n", kube::curlVersion());
  out += fmt::format("  {}\n", pki::libraryVersion());
  out += fmt::format("  boost {}.{}.{}\n", BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000,
                     BOOST_VERSION % 100);
  out += fmt::format("  fmt {}.{}.{}\n", FMT_VERSION / 10000, FMT_VERSION / 100 % 100,
                     FMT_VERSION % 100);
  out += fmt::format("  nlohmann-json {}.{}.{}\n", NLOHMANN_JSON_VERSION_MAJOR,
                     NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH);
  out += fmt::format("  CLI11 {}\n", CLI11_VERSION);
  return out;
}

namespace {

// `ekco shutdown` and `ekco startup` (ekco-reboot.service's ExecStop and ExecStart).
struct RebootCli {
  std::string config{};
  FlagValues flags{};
  ShutdownArgs args{};
  CLI::App* app = nullptr;
};

// The subcommands and what their arguments parse into: the add*Commands functions bind them
// (CLI11 keeps pointers into this, so it stays where runCli made it), dispatch reads them.
struct Commands {
  std::string log_level_flag{};
  CLI::App* version = nullptr;
  CLI::App* check = nullptr;
  std::string check_file{};
  CLI::App* show = nullptr;
  std::string show_file{};
  FlagValues show_flags{};
  bool show_effective = false;
  std::string show_kubeconfig{};
  std::string show_host_root{};
  CLI::App* from_kurl = nullptr;
  std::string kurl_file{};
  CLI::App* status = nullptr;
  StatusOptions status_options{.socket_path = ""};
  std::string status_config{};
  CLI::App* agent = nullptr;
  std::string agent_config{};
  FlagValues agent_flags{};
  AgentCommandArgs agent_args{};
  RebootCli shutdown_cli{};
  RebootCli startup_cli{};
  CLI::App* upgrade = nullptr;
  std::string upgrade_config{};
  UpgradeArgs upgrade_args{};
  CLI::App* purge = nullptr;
  std::string purge_config{};
  FlagValues purge_flags{};
  PurgeNodeArgs purge_args{};
  CertsCli certs{};
  MaintenanceCli maintenance{};
  JobCli job{};
  CLI::App* render_haproxy = nullptr;
  CLI::App* render_manifest = nullptr;
  CLI::App* render_units = nullptr;
  RenderArgs render_args{};
  RenderUnitsArgs render_units_args{};
};

void addConfigCommands(CLI::App& app, Commands& c) {
  auto* config = app.add_subcommand("config", "Validate, show and convert ekco configuration");
  config->require_subcommand(1);

  c.check = config->add_subcommand(
      "check", "Validate a config.yaml: prints 'FILE: ok', or one line per problem and exit 2");
  c.check->add_option("FILE", c.check_file, "The config file")->required();

  c.show = config->add_subcommand(
      "show", "Print the effective configuration (file, then EKCO_* environment, then flags)");
  c.show->add_option("--config", c.show_file,
                     "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
  c.show->add_flag("--effective", c.show_effective,
                   "What a host command would use: the agents' ConfigMap kurl/ekco-config (when "
                   "the API answers) under the file, environment and flags; the sources first");
  c.show->add_option("--kubeconfig", c.show_kubeconfig,
                     "With --effective: kubeconfig (default: KUBECONFIG, in-cluster, then the "
                     "host's /etc/kubernetes/admin.conf)");
  c.show->add_option("--host-root", c.show_host_root,
                     "With --effective: where the host's / is (default /)");
  addConfigFlags(c.show, c.show_flags);

  c.from_kurl = config->add_subcommand(
      "from-kurl", "Print the config.yaml equivalent to a kURL Installer spec (spec.ekco.*)");
  c.from_kurl->add_option("INSTALLER", c.kurl_file, "The kURL Installer YAML file")->required();
}

void addStatusCommand(CLI::App& app, Commands& c) {
  c.status =
      app.add_subcommand("status",
                         "Print the local agent's status from its health socket (exit 0 ready, "
                         "1 degraded, 2 unreachable)");
  c.status->add_option("--socket", c.status_options.socket_path,
                       "The agent's health socket (default: health_socket from the config, "
                       "/run/ekco/ekco.sock)");
  c.status->add_option("--config", c.status_config,
                       "Where health_socket is read from (default /etc/ekco/config.yaml when it "
                       "exists; EKCO_HEALTH_SOCKET too)");
  c.status->add_option("--host-root", c.status_options.host_root,
                       "Find the socket under this directory (e.g. /host in a DaemonSet pod)");
  auto* status_json = c.status->add_flag("--json", c.status_options.json,
                                         "Print the /status JSON as the agent serves it");
  c.status
      ->add_option("--probe", c.status_options.probe,
                   "Ask only /healthz or /readyz and print one line (a DaemonSet probe)")
      ->check(CLI::IsMember({"healthz", "readyz"}))
      ->excludes(status_json);
}

void addAgentCommand(CLI::App& app, Commands& c) {
  c.agent = app.add_subcommand(
      "agent",
      "Run the node agent: caches, leader election, controllers, health socket (until "
      "SIGTERM)");
  c.agent->add_option("--config", c.agent_config,
                      "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
  c.agent->add_option("--kubeconfig", c.agent_args.kubeconfig,
                      "kubeconfig (default: KUBECONFIG, in-cluster, then the host's "
                      "/etc/kubernetes/admin.conf and kubelet.conf)");
  c.agent->add_option("--node-name", c.agent_args.node_name,
                      "This node's name (default: NODE_NAME, then the host name)");
  c.agent->add_option("--host-root", c.agent_args.host_root,
                      "Where the host's / is (/host in a DaemonSet pod; default /)");
  c.agent->add_option("--socket", c.agent_args.socket,
                      "Health socket path (default: health_socket under --host-root)");
  c.agent->add_flag("--dry-run", c.agent_args.dry_run,
                    "Decide and log plans, change nothing in the cluster or on the host");
  addConfigFlags(c.agent, c.agent_flags);
}

void addRebootCommands(CLI::App& app, Commands& c) {
  for (auto [cli, name, help] :
       {std::tuple{&c.shutdown_cli, "shutdown",
                   "Before a reboot: cordon this node, delete its pods (not in "
                   "shutdown_excluded_namespaces), wait for PVC/CephFS unmounts (bounded), "
                   "delete its rook-ceph operator/mds pods"},
        std::tuple{&c.startup_cli, "startup",
                   "After a reboot: wait for the API (bounded), uncordon this node if ekco "
                   "shutdown cordoned it"}}) {
    cli->app = app.add_subcommand(name, help);
    cli->app->add_option("--config", cli->config,
                         "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
    cli->app->add_option("--kubeconfig", cli->args.kubeconfig,
                         "kubeconfig (default: KUBECONFIG, then the host's "
                         "/etc/kubernetes/admin.conf and kubelet.conf)");
    cli->app->add_option("--node-name", cli->args.node_name,
                         "This node's name (default: NODE_NAME, then the host name)");
    cli->app->add_option("--host-root", cli->args.host_root, "Where the host's / is (default /)");
    cli->app->add_flag("--dry-run", cli->args.dry_run, "Log what would be done, change nothing");
    addConfigFlags(cli->app, cli->flags);
  }
}

void addUpgradeCommand(CLI::App& app, Commands& c) {
  c.upgrade =
      app.add_subcommand("upgrade",
                         "Auto-upgrade (ekco-upgrade.timer): re-run the kURL installer when its "
                         "X-Kurl-Hash changed (single-node clusters only)");
  c.upgrade->add_option("--config", c.upgrade_config,
                        "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
  c.upgrade->add_option("--url", c.upgrade_args.url,
                        "Installer URL (default: auto_upgrade_url from the config)");
  c.upgrade->add_option("--state-dir", c.upgrade_args.state_dir,
                        "Host directory of upgrades.txt and upgrade.lock (default /var/lib/ekco)");
  c.upgrade->add_option("--kubeconfig", c.upgrade_args.kubeconfig,
                        "kubeconfig, to count the nodes (default: KUBECONFIG, in-cluster, then the "
                        "host's /etc/kubernetes/admin.conf and kubelet.conf)");
  c.upgrade->add_option("--host-root", c.upgrade_args.host_root,
                        "Where the host's / is (default /)");
  c.upgrade->add_flag("--allow-http", c.upgrade_args.allow_http,
                      "Accept a plain http:// URL, whose download is not verified (default: "
                      "auto_upgrade_allow_http from the config)");
  c.upgrade->add_flag(
      "--dry-run", c.upgrade_args.dry_run,
      "Check and report what would be done; write nothing, never run the installer");
}

void addPurgeCommand(CLI::App& app, Commands& c) {
  c.purge = app.add_subcommand(
      "purge-node",
      "Remove a node from the cluster for good: its Rook OSDs, its kubeadm and etcd "
      "membership, then the Node (also installed as ekco-purge-node)");
  c.purge->add_option("NAME", c.purge_args.node, "The node to purge")->required();
  c.purge->add_option("--config", c.purge_config,
                      "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
  c.purge->add_option(
      "--kubeconfig", c.purge_args.kubeconfig,
      "kubeconfig (default: KUBECONFIG, then the host's /etc/kubernetes/admin.conf)");
  c.purge->add_option("--host-root", c.purge_args.host_root,
                      "Where the host's / is, for certificates_dir (default /)");
  c.purge->add_option(
      "--node-name", c.purge_args.self,
      "The node this runs on, never purged (default: NODE_NAME, then the host name)");
  c.purge->add_flag("--dry-run", c.purge_args.dry_run,
                    "Print the plan (OSDs, etcd member, endpoints) and exit 0 without changes");
  c.purge->add_flag("--yes,-y", c.purge_args.yes, "Do not ask for confirmation on a terminal");
  addConfigFlags(c.purge, c.purge_flags);
}

void addRenderCommands(CLI::App& app, Commands& c) {
  auto* render = app.add_subcommand(
      "render",
      "Show the files ekco installs on the host: print them, or write them under --out (units)");
  render->require_subcommand(1);
  c.render_haproxy = render->add_subcommand(
      "haproxy", "Print the internal load balancer's haproxy.cfg for the given kube-apiservers");
  c.render_haproxy
      ->add_option("--endpoints", c.render_args.endpoints,
                   "kube-apiservers, comma-separated: HOST[:PORT] or [IPv6]:PORT (port 6443 by "
                   "default); HOST is an IP address or a DNS name")
      ->required();
  c.render_haproxy->add_option("--bind", c.render_args.bind,
                               "Listen address, IP:PORT (default 127.0.0.1:6444)");
  c.render_haproxy->add_flag("--bind-ipv6-loopback", c.render_args.bind_ipv6_loopback,
                             "Also listen on [::1] at the same port");
  c.render_haproxy->add_option("--image", c.render_args.image,
                               "HAProxy image the config is for: its tag enables directives of "
                               "newer versions (default haproxy:lts-alpine)");
  c.render_manifest = render->add_subcommand(
      "manifest", "Print the HAProxy static pod (/etc/kubernetes/manifests/haproxy.yaml)");
  c.render_manifest->add_option("--image", c.render_args.image,
                                "HAProxy image (default haproxy:lts-alpine)");
  c.render_manifest->add_option("--bind", c.render_args.bind,
                                "HAProxy's listen address, IP:PORT: the liveness probe's host and "
                                "port (default 127.0.0.1:6444)");
  c.render_units = render->add_subcommand(
      "units", "Write the systemd units and /opt/ekco scripts the agent installs, under --out");
  c.render_units->add_option("--config", c.render_units_args.config,
                             "Config file (default /etc/ekco/config.yaml; absent means defaults)");
  c.render_units
      ->add_option("--out", c.render_units_args.out,
                   "Directory to write into, in the host's layout (created)")
      ->required();
  c.render_units->add_option("--bin", c.render_units_args.bin,
                             "The ekco binary the units run (default /usr/bin/ekco)");
}

// Parses args into the commands; the exit code when that is all (help, a usage error).
std::optional<int> parseArgs(CLI::App& app, const std::vector<std::string>& args,
                             const CliEnv& env) {
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    // help() follows the parsed subcommands, so `ekco config check --help` shows check's help.
    *env.out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    *env.out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // Point at the help of the command that was being parsed: `ekco purge-node --help`.
    std::string command = "ekco";
    for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
      sub = sub->get_subcommands().front();
      command += " " + sub->get_name();
    }
    *env.err << "error: " << e.what() << "\n"
             << "Run '" << command << " --help' for usage.\n";
    return kExitUsage;
  }
  return std::nullopt;
}

// Applies --log-level before the command reads its config; kExitUsage when it is not a level.
std::optional<int> applyLogLevelFlag(const std::string& log_level_flag, const CliEnv& env) {
  if (log_level_flag.empty()) return std::nullopt;
  auto level = base::parseLogLevel(log_level_flag);
  if (!level) {
    *env.err << "error: flag --log-level: " << level.error().message() << "\n";
    return kExitUsage;
  }
  base::LogOptions options;
  options.level = *level;
  options.journal = base::stderrIsJournal();
  base::configureLogging(options);
  return std::nullopt;
}

// `ekco status`: the socket is --socket, else the health_socket the agent uses (the config file
// and the environment, as the agent reads them).
int statusCommand(StatusOptions options, const std::string& config, const CliEnv& env) {
  if (options.socket_path.empty()) {
    ConfigLoader loader;
    loader.loadFile(config.empty() ? env.default_config_path : config,
                    /*optional=*/config.empty());
    loader.loadEnvironment(env.environment);
    const Config cfg = loader.finish();
    if (!report(loader.problems(), {}, *env.err)) return kExitUsage;
    options.socket_path = cfg.health_socket;
  }
  return runStatus(options, *env.out, *env.err, base::SystemClock());
}

// Runs the one subcommand that was parsed.
int dispatch(Commands& c, const CliEnv& env) {
  if (c.version->parsed()) {
    *env.out << versionText();
    return kExitOk;
  }
  if (c.check->parsed()) return configCheck(c.check_file, env);
  if (c.show->parsed()) {
    std::optional<ClusterConfig> cluster;
    if (c.show_effective) cluster = clusterConfigFor(c.show_kubeconfig, c.show_host_root, env);
    return configShow(c.show_file, c.show, c.show_flags, c.log_level_flag, env,
                      cluster ? &*cluster : nullptr);
  }
  if (c.from_kurl->parsed()) return configFromKurl(c.kurl_file, env);
  if (c.status->parsed()) return statusCommand(c.status_options, c.status_config, env);
  if (c.render_haproxy->parsed()) return renderHaproxy(c.render_args, env);
  if (c.render_manifest->parsed()) return renderManifest(c.render_args, env);
  if (c.render_units->parsed()) return renderUnits(c.render_units_args, env);
  for (auto [cli, is_shutdown] :
       {std::pair{&c.shutdown_cli, true}, std::pair{&c.startup_cli, false}}) {
    if (cli->app->parsed()) {
      const ClusterConfig cluster =
          clusterConfigFor(cli->args.kubeconfig, cli->args.host_root, env);
      auto cfg = commandConfig(cli->config, cli->app, &cli->flags, c.log_level_flag, env, &cluster);
      if (!cfg) return kExitUsage;
      return is_shutdown ? runShutdownCommand(*cfg, cli->args, env)
                         : runStartupCommand(*cfg, cli->args, env);
    }
  }
  if (c.upgrade->parsed()) {
    // No per-key flags: the file and the environment (auto_upgrade_url, log_level).
    const ClusterConfig cluster =
        clusterConfigFor(c.upgrade_args.kubeconfig, c.upgrade_args.host_root, env);
    auto cfg = commandConfig(c.upgrade_config, nullptr, nullptr, c.log_level_flag, env, &cluster);
    if (!cfg) return kExitUsage;
    return runUpgradeCommand(*cfg, c.upgrade_args, env);
  }
  if (c.certs.check->parsed()) {
    const ClusterConfig cluster =
        clusterConfigFor(c.certs.check_kubeconfig, c.certs.check_args.host_root, env);
    auto cfg =
        commandConfig(c.certs.check_config, nullptr, nullptr, c.log_level_flag, env, &cluster);
    if (!cfg) return kExitUsage;
    c.certs.check_args.kubeconfig = c.certs.check_kubeconfig;
    return runCertsCheckCommand(*cfg, c.certs.check_args, env, base::SystemClock());
  }
  if (c.certs.renew->parsed()) {
    const ClusterConfig cluster =
        clusterConfigFor(c.certs.renew_args.kubeconfig, c.certs.renew_args.host_root, env);
    auto cfg =
        commandConfig(c.certs.renew_config, nullptr, nullptr, c.log_level_flag, env, &cluster);
    if (!cfg) return kExitUsage;
    return runCertsRenewCommand(*cfg, c.certs.renew_args, env);
  }
  if (c.purge->parsed()) {
    const ClusterConfig cluster =
        clusterConfigFor(c.purge_args.kubeconfig, c.purge_args.host_root, env);
    auto cfg =
        commandConfig(c.purge_config, c.purge, &c.purge_flags, c.log_level_flag, env, &cluster);
    if (!cfg) return kExitUsage;
    return runPurgeNodeCommand(*cfg, c.purge_args, env);
  }
  if (c.maintenance.parsed() != nullptr) {
    const ClusterConfig cluster =
        clusterConfigFor(c.maintenance.args.kubeconfig, c.maintenance.args.host_root, env);
    auto cfg =
        commandConfig(c.maintenance.config, nullptr, nullptr, c.log_level_flag, env, &cluster);
    if (!cfg) return kExitUsage;
    return runMaintenanceCommand(*cfg, c.maintenance.args, env);
  }
  if (c.job.parsed() != nullptr) {
    const ClusterConfig cluster =
        clusterConfigFor(c.job.args.kubeconfig, c.job.args.host_root, env);
    auto cfg = commandConfig(c.job.config, nullptr, nullptr, c.log_level_flag, env, &cluster);
    if (!cfg) return kExitUsage;
    return runJobCommand(*cfg, c.job.args, env);
  }
  if (c.agent->parsed()) {
    return agentCommand(c.agent_config, c.agent, c.agent_flags, c.log_level_flag, c.agent_args,
                        env);
  }
  *env.err << "error: no command given. Run 'ekco --help' for usage.\n";
  return kExitUsage;
}

}  // namespace

int runCli(const std::vector<std::string>& original_args, const CliEnv& env) {
  // Installed as /usr/bin/ekco-purge-node (EKCO's manual purge command): `ekco purge-node`.
  std::vector<std::string> args = original_args;
  if (!args.empty() && std::filesystem::path(args[0]).filename() == "ekco-purge-node") {
    args.insert(args.begin() + 1, "purge-node");
  }
  CLI::App app{"ekco: keeps a kubeadm cluster's nodes healthy (EKCO-compatible host agent)",
               "ekco"};
  app.require_subcommand(1);
  // Options of the root (--log-level) may also follow a subcommand.
  app.fallthrough(true);
  // On the heap: GCC 12 at -O3 inlines Commands' constructor into runCli and then warns
  // (maybe-uninitialized, a false positive) about the unwinding path of its string members.
  const auto commands = std::make_unique<Commands>();
  Commands& c = *commands;
  app.add_option("--log-level,--log_level", c.log_level_flag,
                 "debug, info, warn or error (default: log_level from the config, else info)");

  c.version = app.add_subcommand("version", "Print the version and the library versions");
  addConfigCommands(app, c);
  addStatusCommand(app, c);
  addAgentCommand(app, c);
  addRebootCommands(app, c);
  addUpgradeCommand(app, c);
  addPurgeCommand(app, c);
  addCertsCommands(app, c.certs);
  addMaintenanceCommands(app, c.maintenance);
  addJobCommands(app, c.job);
  addRenderCommands(app, c);

  if (auto exit_code = parseArgs(app, args, env)) return *exit_code;
  if (auto exit_code = applyLogLevelFlag(c.log_level_flag, env)) return *exit_code;
  return dispatch(c, env);
}

}  // namespace ekco::agent
