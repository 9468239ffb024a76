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
#include "agent/cli/completion.h"
#include "agent/cli/definition.h"
#include "agent/cli/manual.h"
#include "agent/cli/status_cmd.h"
#include "agent/config/config.h"
#include "agent/config/kurl_installer.h"
#include "agent/config/reference.h"
#include "agent/edge/cluster_config.h"
#include "agent/edge/command.h"
#include "agent/edge/command_config.h"
#include "agent/features/api_address/api_address_cmd.h"
#include "agent/features/certs/certs_cmd.h"
#include "agent/features/host_jobs/job_cmd.h"
#include "agent/features/host_units/host_units.h"
#include "agent/features/purge/purge_cmd.h"
#include "agent/features/reboot/shutdown_cmd.h"
#include "agent/features/upgrade/upgrade_cmd.h"
#include "agent/maintenance/maintenance_cmd.h"
#include "base/log/log.h"
#include "base/os/file_read.h"
#include "base/version_info.h"
#include "haproxy/render.h"
#include "hostfs/local_host_fs.h"
#include "kube/transport/curl_transport.h"
#include "pki/certificate.h"
#include "units/render.h"

namespace ekco::agent {
namespace {

int configCheck(const std::string& file, const CliEnv& env) {
  ConfigLoader loader;
  loader.loadFile(file);
  (void)loader.finish();
  if (!reportConfig(loader.problems(), loader.notices(), *env.err)) return kExitUsage;
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
  applyConfigFlags(cmd, flags, loader);
  if (!log_level_flag.empty()) loader.setFlag("log_level", log_level_flag);
  Config cfg = loader.finish();
  if (!reportConfig(loader.problems(), loader.notices(), *env.err)) return kExitUsage;
  if (cluster != nullptr) {
    *env.out << "# sources: " << describeConfigSources(loader.sources(), *cluster) << "\n";
  }
  *env.out << renderConfigYaml(redactSecrets(std::move(cfg)));
  return kExitOk;
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
  if (!reportConfig(conv.problems, conv.notices, *env.err)) return kExitUsage;
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
  if (!reportConfig(loader.problems(), loader.notices(), *env.err)) return kExitUsage;
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
    if (!reportConfig(loader.problems(), {}, *env.err)) return kExitUsage;
    options.socket_path = cfg.health_socket;
  }
  return runStatus(options, *env.out, *env.err, base::SystemClock());
}

class VersionCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ = root.add_subcommand("version", "Print the version and the library versions");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& /*log_level*/, const CliEnv& env) override {
    *env.out << versionText();
    return kExitOk;
  }

 private:
  CLI::App* app_ = nullptr;
};

// `ekco config check|show|from-kurl`.
class ConfigCommands final : public Command {
 public:
  void add(CLI::App& root) override {
    auto* config = root.add_subcommand("config", "Validate, show and convert ekco configuration");
    config->require_subcommand(1);

    check_ = config->add_subcommand(
        "check", "Validate a config.yaml: prints 'FILE: ok', or one line per problem and exit 2");
    check_->add_option("FILE", check_file_, "The config file")->required();
    setExitStatus(check_, "0 valid (warnings allowed); 2 one error line per problem");

    show_ = config->add_subcommand(
        "show", "Print the effective configuration (file, then EKCO_* environment, then flags)");
    show_->add_option("--config", show_file_,
                      "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
    show_->add_flag("--effective", show_effective_,
                    "What a host command would use: the agents' ConfigMap kurl/ekco-config (when "
                    "the API answers) under the file, environment and flags; the sources first");
    show_->add_option("--kubeconfig", show_kubeconfig_,
                      "With --effective: kubeconfig (default: KUBECONFIG, in-cluster, then the "
                      "host's /etc/kubernetes/admin.conf)");
    show_->add_option("--host-root", show_host_root_,
                      "With --effective: where the host's / is (default /)");
    show_->add_option("--explain", show_explain_,
                      "Describe one key instead (type, default, environment variable, flag, "
                      "kURL Installer field, EKCO, whether ekco acts on it)");
    addConfigFlags(show_, show_flags_);
    setExitStatus(show_, "0 printed; 2 a bad config or flag, or no such --explain key");

    reference_ = config->add_subcommand(
        "reference",
        "Print the configuration reference generated from the key table: the generated part of "
        "docs/configuration.md, or with --format man the ekco-config(5) page");
    reference_->add_option("--format", reference_format_, "markdown (default) or man")
        ->check(CLI::IsMember({"markdown", "man"}));

    from_kurl_ = config->add_subcommand(
        "from-kurl", "Print the config.yaml equivalent to a kURL Installer spec (spec.ekco.*)");
    from_kurl_->add_option("INSTALLER", kurl_file_, "The kURL Installer YAML file")->required();
    setExitStatus(from_kurl_, "0 converted; 2 the file cannot be read or the spec is invalid");
  }
  bool parsed() const override {
    return check_->parsed() || show_->parsed() || from_kurl_->parsed() || reference_->parsed();
  }
  int run(const std::string& log_level, const CliEnv& env) override {
    if (check_->parsed()) return configCheck(check_file_, env);
    if (from_kurl_->parsed()) return configFromKurl(kurl_file_, env);
    if (reference_->parsed()) {
      *env.out << renderConfigReference(reference_format_ == "man" ? ReferenceFormat::kMan
                                                                   : ReferenceFormat::kMarkdown);
      return kExitOk;
    }
    if (!show_explain_.empty()) {
      auto explained = explainKey(show_explain_);
      if (!explained) {
        *env.err << "error: config show --explain: " << explained.error().message() << "\n";
        return kExitUsage;
      }
      *env.out << *explained;
      return kExitOk;
    }
    std::optional<ClusterConfig> cluster;
    if (show_effective_) cluster = clusterConfigFor(show_kubeconfig_, show_host_root_, env);
    return configShow(show_file_, show_, show_flags_, log_level, env,
                      cluster ? &*cluster : nullptr);
  }

 private:
  CLI::App* check_ = nullptr;
  std::string check_file_{};
  CLI::App* show_ = nullptr;
  std::string show_file_{};
  FlagValues show_flags_{};
  bool show_effective_ = false;
  std::string show_kubeconfig_{};
  std::string show_host_root_{};
  std::string show_explain_{};
  CLI::App* from_kurl_ = nullptr;
  std::string kurl_file_{};
  CLI::App* reference_ = nullptr;
  std::string reference_format_ = "markdown";
};

class StatusCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ =
        root.add_subcommand("status",
                            "Print the local agent's status from its health socket (exit 0 ready, "
                            "1 degraded, 2 unreachable)");
    app_->add_option("--socket", options_.socket_path,
                     "The agent's health socket (default: health_socket from the config, "
                     "/run/ekco/ekco.sock)");
    app_->add_option("--config", config_,
                     "Where health_socket is read from (default /etc/ekco/config.yaml when it "
                     "exists; EKCO_HEALTH_SOCKET too)");
    app_->add_option("--host-root", options_.host_root,
                     "Find the socket under this directory (e.g. /host in a DaemonSet pod)");
    auto* status_json =
        app_->add_flag("--json", options_.json, "Print the /status JSON as the agent serves it");
    app_->add_option("--probe", options_.probe,
                     "Ask only /healthz or /readyz and print one line (a DaemonSet probe)")
        ->check(CLI::IsMember({"healthz", "readyz"}))
        ->excludes(status_json);
    setExitStatus(app_,
                  "0 ready (--probe: it answered 200); 1 degraded (--probe: another answer); "
                  "2 the socket cannot be reached, or a bad config");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& /*log_level*/, const CliEnv& env) override {
    return statusCommand(options_, config_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  StatusOptions options_{.socket_path = ""};
  std::string config_{};
};

class AgentCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ = root.add_subcommand(
        "agent",
        "Run the node agent: caches, leader election, controllers, health socket (until "
        "SIGTERM)");
    app_->add_option("--config", config_,
                     "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
    app_->add_option("--kubeconfig", args_.kubeconfig,
                     "kubeconfig (default: KUBECONFIG, in-cluster, then the host's "
                     "/etc/kubernetes/admin.conf and kubelet.conf)");
    app_->add_option("--node-name", args_.node_name,
                     "This node's name (default: NODE_NAME, then the host name)");
    app_->add_option("--host-root", args_.host_root,
                     "Where the host's / is (/host in a DaemonSet pod; default /)");
    app_->add_option("--socket", args_.socket,
                     "Health socket path (default: health_socket under --host-root)");
    app_->add_flag("--dry-run", args_.dry_run,
                   "Decide and log plans, change nothing in the cluster or on the host");
    addConfigFlags(app_, flags_);
    setExitStatus(app_,
                  "0 after a clean stop (SIGTERM); 1 it could not start (no kubeconfig, another "
                  "agent on the socket), a thread failed, or it stopped to be started again "
                  "(its kubeconfig moved: systemd or the kubelet restarts it); 2 a bad config "
                  "or flag");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    return agentCommand(config_, app_, flags_, log_level, args_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  std::string config_{};
  FlagValues flags_{};
  AgentCommandArgs args_{};
};

// `ekco render haproxy|manifest|units`.
class RenderCommands final : public Command {
 public:
  void add(CLI::App& root) override {
    auto* render = root.add_subcommand(
        "render",
        "Show the files ekco installs on the host: print them, or write them under --out (units)");
    render->require_subcommand(1);
    haproxy_ = render->add_subcommand(
        "haproxy", "Print the internal load balancer's haproxy.cfg for the given kube-apiservers");
    haproxy_
        ->add_option("--endpoints", args_.endpoints,
                     "kube-apiservers, comma-separated: HOST[:PORT] or [IPv6]:PORT (port 6443 by "
                     "default); HOST is an IP address or a DNS name")
        ->required();
    haproxy_->add_option("--bind", args_.bind, "Listen address, IP:PORT (default 127.0.0.1:6444)");
    haproxy_->add_flag("--bind-ipv6-loopback", args_.bind_ipv6_loopback,
                       "Also listen on [::1] at the same port");
    haproxy_->add_option("--image", args_.image,
                         "HAProxy image the config is for: its tag enables directives of "
                         "newer versions (default haproxy:lts-alpine)");
    manifest_ = render->add_subcommand(
        "manifest", "Print the HAProxy static pod (/etc/kubernetes/manifests/haproxy.yaml)");
    manifest_->add_option("--image", args_.image, "HAProxy image (default haproxy:lts-alpine)");
    manifest_->add_option("--bind", args_.bind,
                          "HAProxy's listen address, IP:PORT: the liveness probe's host and "
                          "port (default 127.0.0.1:6444)");
    units_ = render->add_subcommand(
        "units", "Write the systemd units and /opt/ekco scripts the agent installs, under --out");
    units_->add_option("--config", units_args_.config,
                       "Config file (default /etc/ekco/config.yaml; absent means defaults)");
    units_
        ->add_option("--out", units_args_.out,
                     "Directory to write into, in the host's layout (created)")
        ->required();
    units_->add_option("--bin", units_args_.bin,
                       "The ekco binary the units run (default /usr/bin/ekco)");
    for (CLI::App* sub : {haproxy_, manifest_}) {
      setExitStatus(sub, "0 printed; 2 a bad value (one error line)");
    }
    setExitStatus(units_, "0 written; 1 a file could not be written; 2 a bad config or value");
  }
  bool parsed() const override {
    return haproxy_->parsed() || manifest_->parsed() || units_->parsed();
  }
  int run(const std::string& /*log_level*/, const CliEnv& env) override {
    if (haproxy_->parsed()) return renderHaproxy(args_, env);
    if (manifest_->parsed()) return renderManifest(args_, env);
    return renderUnits(units_args_, env);
  }

 private:
  CLI::App* haproxy_ = nullptr;
  CLI::App* manifest_ = nullptr;
  CLI::App* units_ = nullptr;
  RenderArgs args_{};
  RenderUnitsArgs units_args_{};
};

// `ekco manual` and `ekco completion`: ekco(8), docs/commands.md and the bash completion, from
// the command line as every command of the table added itself to it.
class DocsCommands final : public Command {
 public:
  // `root_values`: the known values of the root's own options (--log-level).
  DocsCommands(const std::vector<std::unique_ptr<Command>>& table,
               std::vector<ArgumentValues> root_values)
      : table_(table), root_values_(std::move(root_values)) {}
  void add(CLI::App& root) override {
    root_ = &root;
    manual_ = root.add_subcommand(
        "manual",
        "Print the manual generated from the command line: the ekco(8) man page, or "
        "with --format markdown docs/commands.md");
    manual_->add_option("--format", manual_format_, "man (default) or markdown")
        ->check(CLI::IsMember({"man", "markdown"}));
    completion_ = root.add_subcommand(
        "completion", "Print the shell completion script (the packages install it for bash)");
    completion_->add_option("SHELL", shell_, "The shell")
        ->required()
        ->check(CLI::IsMember({"bash"}));
  }
  bool parsed() const override { return manual_->parsed() || completion_->parsed(); }
  int run(const std::string& /*log_level*/, const CliEnv& env) override {
    std::vector<ArgumentValues> values = root_values_;
    for (const auto& command : table_) {
      for (ArgumentValues& v : command->argumentValues()) values.push_back(std::move(v));
    }
    const CommandDef definition = defineCommandLine(*root_, values);
    if (completion_->parsed()) {
      *env.out << renderBashCompletion(definition);
    } else {
      *env.out << renderManual(
          definition, manual_format_ == "markdown" ? ManualFormat::kMarkdown : ManualFormat::kMan);
    }
    return kExitOk;
  }

 private:
  const std::vector<std::unique_ptr<Command>>& table_;
  const std::vector<ArgumentValues> root_values_;
  CLI::App* root_ = nullptr;
  CLI::App* manual_ = nullptr;
  std::string manual_format_ = "man";
  CLI::App* completion_ = nullptr;
  std::string shell_{};
};

// Every command, in the order `ekco --help` lists them: the commands no feature owns are here,
// the others in their feature's folder.
std::vector<std::unique_ptr<Command>> commandTable() {
  std::vector<std::unique_ptr<Command>> table;
  table.push_back(std::make_unique<VersionCommand>());
  table.push_back(std::make_unique<ConfigCommands>());
  table.push_back(std::make_unique<StatusCommand>());
  table.push_back(std::make_unique<AgentCommand>());
  table.push_back(rebootCommands());
  table.push_back(upgradeCommand());
  table.push_back(purgeNodeCommand());
  table.push_back(certsCommands());
  table.push_back(rotateKotsadmCertsCommand());
  table.push_back(regenCertCommand());
  table.push_back(setKubeconfigServerCommand());
  table.push_back(changeLoadBalancerCommand());
  table.push_back(maintenanceCommands());
  table.push_back(jobCommands());
  table.push_back(std::make_unique<RenderCommands>());
  return table;
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
  std::string log_level_flag;
  app.add_option("--log-level,--log_level", log_level_flag,
                 "debug, info, warn or error (default: log_level from the config, else info)");
  std::vector<std::unique_ptr<Command>> table = commandTable();
  ArgumentValues log_levels{.command = "", .option = "--log-level", .values = {}};
  for (base::LogLevel level : {base::LogLevel::kDebug, base::LogLevel::kInfo, base::LogLevel::kWarn,
                               base::LogLevel::kError}) {
    log_levels.values.emplace_back(base::logLevelName(level));
  }
  table.push_back(std::make_unique<DocsCommands>(table, std::vector<ArgumentValues>{log_levels}));
  for (const auto& command : table) command->add(app);

  if (auto exit_code = parseArgs(app, args, env)) return *exit_code;
  if (auto exit_code = applyLogLevelFlag(log_level_flag, env)) return *exit_code;
  for (const auto& command : table) {
    if (command->parsed()) return command->run(log_level_flag, env);
  }
  *env.err << "error: no command given. Run 'ekco --help' for usage.\n";
  return kExitUsage;
}

}  // namespace ekco::agent
