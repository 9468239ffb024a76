#include "agent/features/certs/certs_cmd.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iterator>
#include <nlohmann/json.hpp>
#include <ostream>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "agent/features/certs/certs.h"
#include "agent/features/certs/certs_renewal.h"
#include "agent/features/certs/cluster_secrets.h"
#include "base/duration.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "pki/probe.h"
#include "pki/renew.h"

namespace ekco::agent {

namespace {

using nlohmann::json;

// kubeadm's "Jan 02, 2006 15:04 UTC".
std::string expires(base::WallTime t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const auto days = std::chrono::floor<std::chrono::days>(secs);
  const std::chrono::year_month_day ymd{days};
  const std::chrono::hh_mm_ss hms{secs - days};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  return fmt::format("{} {:02}, {:04} {:02}:{:02} UTC",
                     kMonths[static_cast<unsigned>(ymd.month()) - 1],
                     static_cast<unsigned>(ymd.day()), static_cast<int>(ymd.year()),
                     hms.hours().count(), hms.minutes().count());
}

// kubeadm's residual time: "364d", "47h", "59m"; "expired" once past.
std::string residual(std::chrono::seconds left) {
  using namespace std::chrono;
  if (left <= seconds::zero()) return "expired";
  if (left >= hours(48)) return fmt::format("{}d", duration_cast<days>(left).count());
  if (left >= hours(2)) return fmt::format("{}h", duration_cast<hours>(left).count());
  return fmt::format("{}m", std::max<long>(1, duration_cast<minutes>(left).count()));
}

// The CN of an RFC 2253 name ("CN=kubernetes" -> "kubernetes"), else the whole name.
std::string commonName(const std::string& dn) {
  for (std::size_t at = 0; at < dn.size();) {
    std::size_t end = dn.find(',', at);
    if (end == std::string::npos) end = dn.size();
    std::string_view part(dn.data() + at, end - at);
    if (part.starts_with("CN=")) return std::string(part.substr(3));
    at = end + 1;
  }
  return dn;
}

json toJson(const CertState& s) {
  json j = {{"name", s.name},
            {"file", s.file},
            {"missing", s.missing},
            {"externally_managed", s.external_ca},
            {"renew", s.due}};
  if (!s.ca.empty()) j["certificate_authority"] = s.ca;
  if (!s.problem.empty()) j["problem"] = s.problem;
  if (!s.not_renewable.empty()) j["not_renewable"] = s.not_renewable;
  if (s.cert) {
    j["expires"] = kube::formatRfc3339(s.cert->not_after);
    j["residual_seconds"] = s.left.count();
    j["days_left"] = std::chrono::floor<std::chrono::days>(s.left).count();
    j["subject"] = s.cert->subject;
    j["issuer"] = s.cert->issuer;
    j["serial"] = s.cert->serial;
  }
  return j;
}

json toJson(const ClusterSecretState& s) {
  json j = {{"name", s.name}, {"secret", s.secret}, {"present", s.present}, {"renew", s.due}};
  if (!s.note.empty()) j["note"] = s.note;
  if (!s.problem.empty()) j["problem"] = s.problem;
  if (s.cert) {
    j["expires"] = kube::formatRfc3339(s.cert->not_after);
    j["residual_seconds"] = s.left.count();
    j["days_left"] = std::chrono::floor<std::chrono::days>(s.left).count();
    j["subject"] = s.cert->subject;
    j["issuer"] = s.cert->issuer;
  }
  return j;
}

void table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 3, ' ');
    }
    out << line << "\n";
  }
}

}  // namespace

int runCertsCheckCommand(const Config& config, const CertsCheckArgs& args, const CliEnv& env,
                         const base::Clock& clock) {
  if (args.host_root.empty() || args.host_root.front() != '/') {
    *env.err << "error: --host-root: want an absolute path (got " << args.host_root << ")\n";
    return kExitUsage;
  }
  auto fs = openHostRoot(args.host_root, clock);
  if (!fs) {
    *env.err << "error: " << fs.error().message() << "\n";
    return kExitFailure;
  }
  InspectOptions options;
  options.certificates_dir = config.certificates_dir;
  options.ttl = std::chrono::duration_cast<std::chrono::seconds>(config.rotate_certs_ttl);
  options.now = clock.wallNow();
  const Inspection in = inspectCertificates(**fs, options);

  bool failing = false;
  for (const auto* list : {&in.certificates, &in.authorities}) {
    for (const CertState& s : *list) {
      if (!s.problem.empty() || (s.cert && s.left < options.ttl)) failing = true;
    }
  }
  std::vector<ClusterSecretState> secrets;
  if (args.cluster) {
    CommandClient c;
    if (auto built = buildCommandClient(
            c,
            {.host_root = args.host_root,
             .kubeconfig = args.kubeconfig,
             .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30)}},
            env.environment, clock);
        !built) {
      *env.err << "error: certs check --cluster: " << built.error().message() << "\n";
      return kExitFailure;
    }
    ClusterCertsOptions cluster = clusterCertsOptions(config);
    cluster.now = options.now;
    secrets = inspectClusterSecrets(*c.client, **fs, cluster);
    for (const ClusterSecretState& s : secrets) {
      if (s.due || !s.problem.empty()) failing = true;
    }
  }
  if (args.json) {
    json doc = {{"ttl_seconds", options.ttl.count()},
                {"certificates_dir", options.certificates_dir},
                {"certificates", json::array()},
                {"authorities", json::array()}};
    for (const CertState& s : in.certificates) doc["certificates"].push_back(toJson(s));
    for (const CertState& s : in.authorities) doc["authorities"].push_back(toJson(s));
    if (args.cluster) {
      doc["secrets"] = json::array();
      for (const ClusterSecretState& s : secrets) doc["secrets"].push_back(toJson(s));
    }
    *env.out << kube::jsonDump(doc, 2) << "\n";
    return failing ? kExitFailure : kExitOk;
  }

  const auto yesNo = [](bool b) { return std::string(b ? "yes" : "no"); };
  std::vector<std::string> problems;
  std::vector<std::vector<std::string>> rows = {{"CERTIFICATE", "EXPIRES", "RESIDUAL TIME",
                                                 "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED",
                                                 "ISSUER", "RENEW"}};
  for (const CertState& s : in.certificates) {
    if (s.missing) {
      rows.push_back({s.name, "missing", "-", s.ca, yesNo(s.external_ca), "-", "no"});
    } else if (!s.cert) {
      rows.push_back({s.name, "unreadable", "-", s.ca, yesNo(s.external_ca), "-", "no"});
    } else {
      rows.push_back({s.name, expires(s.cert->not_after), residual(s.left), s.ca,
                      yesNo(s.external_ca), commonName(s.cert->issuer), yesNo(s.due)});
    }
    if (!s.problem.empty()) problems.push_back(s.problem);
    if (!s.not_renewable.empty() && s.left < options.ttl) {
      problems.push_back(fmt::format("{} is not renewable: {}", s.name, s.not_renewable));
    }
  }
  table(*env.out, rows);
  *env.out << "\n";
  std::vector<std::vector<std::string>> cas = {
      {"CERTIFICATE AUTHORITY", "EXPIRES", "RESIDUAL TIME", "EXTERNALLY MANAGED"}};
  for (const CertState& s : in.authorities) {
    if (s.missing) {
      cas.push_back({s.name, "missing", "-", "-"});
    } else if (!s.cert) {
      cas.push_back({s.name, "unreadable", "-", "-"});
    } else {
      cas.push_back({s.name, expires(s.cert->not_after), residual(s.left), yesNo(s.external_ca)});
    }
    if (!s.problem.empty()) problems.push_back(s.problem);
  }
  table(*env.out, cas);
  if (args.cluster) {
    *env.out << "\n";
    std::vector<std::vector<std::string>> rows2 = {
        {"CLUSTER CERTIFICATE", "SECRET", "EXPIRES", "RESIDUAL TIME", "ISSUER", "RENEW", "NOTE"}};
    for (const ClusterSecretState& s : secrets) {
      if (!s.cert) {
        rows2.push_back({s.name, s.secret, s.present ? "unreadable" : "absent", "-", "-", "no",
                         s.note.empty() ? "-" : s.note});
      } else {
        rows2.push_back({s.name, s.secret, expires(s.cert->not_after), residual(s.left),
                         s.cert->issuer_common_name.empty() ? "-" : s.cert->issuer_common_name,
                         yesNo(s.due), s.note.empty() ? "-" : s.note});
      }
      if (!s.problem.empty()) problems.push_back(s.problem);
    }
    table(*env.out, rows2);
  }
  for (const std::string& p : problems) *env.out << "problem: " << p << "\n";
  if (failing) {
    *env.out << fmt::format(
        "\nSome certificates expire within rotate_certs_ttl ({}d) or cannot be read.\n",
        std::chrono::floor<std::chrono::days>(options.ttl).count());
  }
  return failing ? kExitFailure : kExitOk;
}

namespace {

// regen-cert's checks before anything: the names apiserver.crt would have; "" and nothing to do
// when they are its names already (said on `out`); an error for a name that must stay.
base::Result<bool> reissueNeeded(const hostfs::HostFs& fs, const Config& config,
                                 const AltNameChange& change, std::ostream& out) {
  const std::string cert_path = config.certificates_dir + "/apiserver.crt";
  auto text = fs.read(cert_path);
  if (!text) return std::move(text).error();
  auto cert = pki::parseCertificate(*text, cert_path);
  if (!cert) return std::move(cert).error();
  // The names the cluster itself reaches the apiserver by stay.
  auto manifest = fs.read(std::string(kDefaultManifestsDir) + "/kube-apiserver.yaml");
  const std::string advertise = manifest ? apiserverEndpoint(*manifest).host : "";
  for (const std::string& name : change.drop) {
    if (name == "kubernetes" || name.starts_with("kubernetes.default") ||
        (!advertise.empty() && name == advertise)) {
      return base::Error(
          fmt::format("{} is not dropped: the cluster reaches the apiserver by it ({})", name,
                      name == advertise ? "its --advertise-address" : "the kubernetes Service"),
          base::ErrorCode::kInvalidArgument);
    }
  }
  const std::vector<std::string> now = altNames(*cert);
  const std::vector<std::string> then = changedAltNames(*cert, change);
  if (now == then) {
    out << fmt::format("apiserver already has the names {}; nothing to change\n",
                       fmt::join(now, ", "));
    return false;
  }
  if (then.empty()) {
    return base::Error("apiserver would have no name left", base::ErrorCode::kInvalidArgument);
  }
  return true;
}

}  // namespace

int runCertsRenewCommand(const Config& config, const CertsRenewArgs& args, const CliEnv& env) {
  const std::string& what = args.command;
  if (args.host_root.empty() || args.host_root.front() != '/') {
    *env.err << "error: --host-root: want an absolute path (got " << args.host_root << ")\n";
    return kExitUsage;
  }
  std::string node = args.node_name;
  if (node.empty()) {
    auto resolved = resolveNodeName("", envValue(env.environment, "NODE_NAME"), hostName());
    if (!resolved) {
      *env.err << "error: " << what << ": " << resolved.error().message() << "\n";
      return kExitUsage;
    }
    node = *resolved;
  }
  base::SystemClock clock;
  CommandClient c;
  if (auto built = buildCommandClient(
          c,
          {.host_root = args.host_root,
           .kubeconfig = args.kubeconfig,
           .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30),
                                           .reporting_instance = node}},
          env.environment, clock);
      !built) {
    *env.err << "error: " << what << ": " << built.error().message() << "\n";
    return kExitFailure;
  }
  if (args.alt_names) {
    auto needed = reissueNeeded(*c.host_fs, config, *args.alt_names, *env.out);
    if (!needed) {
      *env.err << "error: " << what << ": " << needed.error().message() << "\n";
      return needed.error().code() == base::ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    if (!*needed) return kExitOk;
  }
  CertRenewalOptions options;
  options.inspect.certificates_dir = config.certificates_dir;
  options.inspect.ttl = std::chrono::duration_cast<std::chrono::seconds>(config.rotate_certs_ttl);
  options.inspect.now = clock.wallNow();
  options.names = args.names;
  options.alt_names = args.alt_names;
  options.force = args.force;
  options.dry_run = args.dry_run;
  options.node_name = node;
  options.lease_namespace = config.leader_election_namespace;
  options.verify_timeout = args.verify_timeout;
  options.poll = args.poll;
  options.lease_wait = args.lease_wait;
  auto report = runCertRenewal(options, {.fs = *c.host_fs,
                                         .kube = *c.client,
                                         .clock = clock,
                                         .probe = [&clock](const std::string& host, int port) {
                                           return pki::presentedCertificate(
                                               host, port, std::chrono::seconds(5), clock);
                                         }});
  if (!report) {
    *env.err << "error: " << what << ": " << report.error().message() << "\n";
    return report.error().code() == base::ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  for (const std::string& line : report->lines) *env.out << line << "\n";
  if (args.dry_run) *env.out << "Dry run: nothing was changed.\n";
  // A certificate that should have been renewed and was not is a failure, whatever else was.
  for (const std::string& n : report->not_renewed) *env.err << "error: not renewed: " << n << "\n";
  return report->not_renewed.empty() ? kExitOk : kExitFailure;
}

int runClusterRenewCommand(const Config& config, const ClusterRenewArgs& args, const CliEnv& env) {
  const std::string& what = args.command;
  if (args.host_root.empty() || args.host_root.front() != '/') {
    *env.err << "error: --host-root: want an absolute path (got " << args.host_root << ")\n";
    return kExitUsage;
  }
  for (const std::string& name : args.names) {
    if (std::find(std::begin(kClusterSecretNames), std::end(kClusterSecretNames), name) ==
        std::end(kClusterSecretNames)) {
      *env.err << fmt::format("error: {}: unknown cluster certificate {}; known: {}\n", what,
                              base::quoteForMessage(name), fmt::join(kClusterSecretNames, ", "));
      return kExitUsage;
    }
  }
  base::SystemClock clock;
  auto node = resolveNodeName("", envValue(env.environment, "NODE_NAME"), hostName());
  CommandClient c;
  if (auto built = buildCommandClient(
          c,
          {.host_root = args.host_root,
           .kubeconfig = args.kubeconfig,
           .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30),
                                           .reporting_instance = node ? *node : ""}},
          env.environment, clock);
      !built) {
    *env.err << "error: " << what << ": " << built.error().message() << "\n";
    return kExitFailure;
  }
  ClusterCertsOptions options = clusterCertsOptions(config);
  if (args.ttl) options.ttl = *args.ttl;
  options.now = clock.wallNow();
  options.force = args.force;
  options.dry_run = args.dry_run;
  options.names = args.names;
  // What is left alone, and why; a named one that cannot be renewed here is a failure.
  std::vector<std::string> not_renewed;
  const auto named = [&args](const std::string& n) {
    return std::find(args.names.begin(), args.names.end(), n) != args.names.end();
  };
  const std::vector<ClusterSecretState> states =
      inspectClusterSecrets(*c.client, *c.host_fs, options);
  for (const ClusterSecretState& s : states) {
    if (!clusterSecretSelected(options.names, s.name) || !s.problem.empty() || s.due) continue;
    if (!s.present || !s.note.empty() || !s.cert) {
      const std::string why = !s.present ? "absent (the add-on is not installed)" : s.note;
      *env.out << fmt::format("{} (secret {}): {}; left alone\n", s.name, s.secret, why);
      if (named(s.name)) not_renewed.push_back(s.name + ": " + why);
    } else {
      *env.out << fmt::format("{} (secret {}) has {} until expiration, more than {}; skipped\n",
                              s.name, s.secret, base::formatDuration(s.left),
                              base::formatDuration(options.ttl));
    }
  }
  const ClusterCertsReport report = renewClusterSecrets(
      *c.client, *c.host_fs, options, states,
      secretEventRecorder(*c.client, [&env](const std::string& error) {
        *env.err << "warning: an Event could not be recorded: " << error << "\n";
      }));
  for (const std::string& line : report.lines) *env.out << line << "\n";
  if (args.dry_run) *env.out << "Dry run: nothing was changed.\n";
  for (const std::string& e : report.errors) *env.err << "error: " << e << "\n";
  for (const std::string& n : not_renewed) *env.err << "error: not renewed: " << n << "\n";
  return report.errors.empty() && not_renewed.empty() ? kExitOk : kExitFailure;
}

namespace {

// `ekco certs check|renew` on the command line: what the flags parse into (CLI11 keeps pointers
// into it, so it stays where runCli made it).
struct CertsCli {
  CLI::App* check = nullptr;
  std::string check_config{};
  std::string check_kubeconfig{};
  CertsCheckArgs check_args{};
  CLI::App* renew = nullptr;
  std::string renew_config{};
  CertsRenewArgs renew_args{};
};

void addCertsCommands(CLI::App& app, CertsCli& c) {
  auto* certs = app.add_subcommand("certs", "This node's control-plane certificates");
  certs->require_subcommand(1);
  c.check = certs->add_subcommand(
      "check",
      "List every kubeadm certificate of this node with its expiry, residual time, CA, issuer "
      "and whether ekco would renew it; exit 1 if any is within rotate_certs_ttl");
  setExitStatus(c.check,
                "0 every certificate present is readable and outside rotate_certs_ttl; 1 "
                "otherwise; 2 a bad config");
  c.check->add_option("--config", c.check_config,
                      "Config file (default /etc/ekco/config.yaml; absent means all "
                      "defaults)");
  c.check->add_option("--kubeconfig", c.check_kubeconfig,
                      "kubeconfig, to read the agents' ConfigMap kurl/ekco-config "
                      "(default: KUBECONFIG, then the host's /etc/kubernetes/admin.conf)");
  c.check->add_option("--host-root", c.check_args.host_root, "Where the host's / is (default /)");
  c.check->add_flag("--json", c.check_args.json, "Print JSON instead of tables");
  c.check->add_flag("--cluster", c.check_args.cluster,
                    "Also the cluster's TLS secrets ekco renews (registry, kurl-proxy, kotsadm "
                    "kubelet client, Contour/Envoy), read through the API");

  c.renew = certs->add_subcommand(
      "renew",
      "Renew this node's certificates now (those within rotate_certs_ttl, or NAME...), under "
      "the cluster's disruption Lease; restart the static pods that load them and verify");
  setExitStatus(c.renew,
                "0 renewed and verified, or nothing due; 1 failed (restored), a named one "
                "cannot be renewed here, or another primary holds the Lease; 2 bad usage "
                "or an unknown name");
  c.renew->add_option("NAME", c.renew_args.names,
                      "Certificates to renew (kubeadm's names: apiserver, admin.conf, ...)");
  c.renew->add_option("--config", c.renew_config,
                      "Config file (default /etc/ekco/config.yaml; absent means all "
                      "defaults)");
  c.renew->add_option("--kubeconfig", c.renew_args.kubeconfig,
                      "kubeconfig (default: KUBECONFIG, then the host's "
                      "/etc/kubernetes/admin.conf)");
  c.renew->add_option("--host-root", c.renew_args.host_root, "Where the host's / is (default /)");
  c.renew->add_option("--node-name", c.renew_args.node_name,
                      "This node's name (default: NODE_NAME, then the host name)");
  c.renew->add_flag("--force", c.renew_args.force, "Renew even those outside rotate_certs_ttl");
  c.renew->add_flag("--dry-run", c.renew_args.dry_run,
                    "Say what would be renewed and restarted; change nothing");
  c.renew->add_flag("--cluster", c.renew_args.cluster,
                    "Renew the cluster's TLS secrets instead (NAME: contour, envoy, registry, "
                    "kurl-proxy, kotsadm-kubelet-client), as the cluster-certificates "
                    "controller does: on a control-plane host");
}

class CertsCommands final : public Command {
 public:
  void add(CLI::App& root) override { addCertsCommands(root, c_); }
  bool parsed() const override { return c_.check->parsed() || c_.renew->parsed(); }
  std::vector<ArgumentValues> argumentValues() const override {
    // kubeadm's names (the directories do not change them); the cluster's, for --cluster, are
    // in that flag's help.
    ArgumentValues names{.command = "certs renew", .option = "NAME", .values = {}};
    for (const CertSpec& s : kubeadmCertificates("/etc/kubernetes/pki", "/etc/kubernetes")) {
      names.values.push_back(s.name);
    }
    return {std::move(names)};
  }
  int run(const std::string& log_level, const CliEnv& env) override {
    if (c_.check->parsed()) {
      auto config = hostCommandConfig(c_.check_config, nullptr, nullptr, log_level,
                                      c_.check_kubeconfig, c_.check_args.host_root, env);
      if (!config) return kExitUsage;
      c_.check_args.kubeconfig = c_.check_kubeconfig;
      return runCertsCheckCommand(*config, c_.check_args, env, base::SystemClock());
    }
    auto config = hostCommandConfig(c_.renew_config, nullptr, nullptr, log_level,
                                    c_.renew_args.kubeconfig, c_.renew_args.host_root, env);
    if (!config) return kExitUsage;
    if (c_.renew_args.cluster) {
      return runClusterRenewCommand(*config,
                                    {.names = c_.renew_args.names,
                                     .host_root = c_.renew_args.host_root,
                                     .kubeconfig = c_.renew_args.kubeconfig,
                                     .force = c_.renew_args.force,
                                     .dry_run = c_.renew_args.dry_run},
                                    env);
    }
    return runCertsRenewCommand(*config, c_.renew_args, env);
  }

 private:
  CertsCli c_{};
};

class RotateKotsadmCertsCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ = root.add_subcommand(
        "rotate-kotsadm-certs",
        "Renew the kotsadm UI's self-signed certificate (secret kurl_proxy_cert_secret) now if "
        "it expires within --ttl (EKCO's command; as `ekco certs renew --cluster kurl-proxy`)");
    setExitStatus(app_, "0 renewed, or not due; 1 failed; 2 bad usage or config");
    app_->add_option("--ttl", ttl_,
                     "Renew if it expires within this long (Go syntax; default 4320h, 180 days)");
    app_->add_flag("--dry-run", args_.dry_run, "Say what would be renewed; change nothing");
    addHostCommandFlags(app_, config_, args_.kubeconfig, args_.host_root,
                        "Config file, for the secret's name and namespace (default "
                        "/etc/ekco/config.yaml)");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    auto ttl = base::parseDuration(ttl_);
    if (!ttl || *ttl <= base::Duration::zero()) {
      *env.err << "error: --ttl " << base::quoteForMessage(ttl_)
               << ": want a positive Go duration (4320h)\n";
      return kExitUsage;
    }
    auto config = hostCommandConfig(config_, nullptr, nullptr, log_level, args_.kubeconfig,
                                    args_.host_root, env);
    if (!config) return kExitUsage;
    args_.names = {"kurl-proxy"};
    args_.ttl = std::chrono::duration_cast<std::chrono::seconds>(*ttl);
    args_.command = "rotate-kotsadm-certs";
    return runClusterRenewCommand(*config, args_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  std::string config_{};
  std::string ttl_ = "4320h";
  ClusterRenewArgs args_{};
};

class RegenCertCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ = root.add_subcommand(
        "regen-cert",
        "Re-issue this node's apiserver certificate with names added or dropped (IP addresses "
        "or DNS names), keeping its subject, other names, usages and expiry; verify that the "
        "apiserver serves it (it reloads the file itself) (EKCO's command)");
    setExitStatus(app_,
                  "0 re-issued and verified, or it already has exactly those names; 1 "
                  "failed (restored); 2 bad usage, a bad name or a name that must stay");
    app_->add_option("--add-alt-names", add_, "Names to add (comma-separated)")->delimiter(',');
    app_->add_option("--drop-alt-names", drop_, "Names to drop (comma-separated)")->delimiter(',');
    app_->add_option("--node-name", args_.node_name,
                     "This node's name (default: NODE_NAME, then the host name)");
    app_->add_flag("--dry-run", args_.dry_run, "Say what the names would be; change nothing");
    addHostCommandFlags(app_, config_, args_.kubeconfig, args_.host_root,
                        "Config file, for certificates_dir (default /etc/ekco/config.yaml)");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    AltNameChange change;
    for (auto [list, out, flag] : {std::tuple{&add_, &change.add, "--add-alt-names"},
                                   std::tuple{&drop_, &change.drop, "--drop-alt-names"}}) {
      for (const std::string& name : *list) {
        if (name.empty()) continue;  // "a,,b", a trailing comma
        auto canonical = pki::canonicalAltName(name, flag);
        if (!canonical) {
          *env.err << "error: regen-cert: " << canonical.error().message() << "\n";
          return kExitUsage;
        }
        out->push_back(std::move(*canonical));
      }
    }
    if (change.add.empty() && change.drop.empty()) {
      *env.err << "error: regen-cert: nothing to do: give --add-alt-names or --drop-alt-names\n";
      return kExitUsage;
    }
    for (const std::string& name : change.add) {
      if (std::find(change.drop.begin(), change.drop.end(), name) != change.drop.end()) {
        *env.err << "error: regen-cert: " << name << " is both added and dropped\n";
        return kExitUsage;
      }
    }
    auto config = hostCommandConfig(config_, nullptr, nullptr, log_level, args_.kubeconfig,
                                    args_.host_root, env);
    if (!config) return kExitUsage;
    args_.names = {"apiserver"};
    args_.force = true;
    args_.alt_names = std::move(change);
    args_.command = "regen-cert";
    return runCertsRenewCommand(*config, args_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  std::string config_{};
  std::vector<std::string> add_{};
  std::vector<std::string> drop_{};
  CertsRenewArgs args_{};
};

}  // namespace

std::unique_ptr<Command> certsCommands() { return std::make_unique<CertsCommands>(); }

std::unique_ptr<Command> regenCertCommand() { return std::make_unique<RegenCertCommand>(); }

std::unique_ptr<Command> rotateKotsadmCertsCommand() {
  return std::make_unique<RotateKotsadmCertsCommand>();
}

}  // namespace ekco::agent
