#include "agent/features/api_address/set_kubeconfig_server.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/features/api_address/kubeconfig_server.h"
#include "base/duration.h"
#include "base/log/log.h"
#include "kube/decode/objects.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::agent::api_address {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

// In a backup directory: the server its run moved the files to.
constexpr std::string_view kTargetFile = "target";

constexpr const char* kAdminFiles[] = {"admin.conf", "super-admin.conf", "controller-manager.conf",
                                       "scheduler.conf"};

struct Change {
  std::string name;  // "kubelet.conf"
  std::string path;  // host path
  std::string old_text;
  std::string new_text;
};

class Switch {
 public:
  Switch(const KubeconfigSwitchOptions& o, const KubeconfigSwitchDeps& d) : o_(o), d_(d) {}

  Result<KubeconfigSwitchReport> run() {
    EKCO_TRY(checkServerUrl(o_.server, "--server"));
    // A resumed run whose files were already written: the old files are in its backup.
    if (o_.restart_when_unchanged && !o_.run_id.empty() && !o_.dry_run) {
      auto resumed = fromBackup();
      if (!resumed) return std::move(resumed).error();
      if (!resumed->empty()) return switchAndVerify(*resumed, report_.backup_dir);
    }
    // 1.
    const std::string kubelet_path = o_.kubernetes_dir + "/kubelet.conf";
    auto kubelet = d_.fs.read(kubelet_path);
    if (!kubelet) return std::move(kubelet).error();
    auto servers = kubeconfigServers(*kubelet, kubelet_path);
    if (!servers) return std::move(servers).error();
    report_.old_server = servers->front();
    std::vector<Change> changes;
    EKCO_TRY(plan("kubelet.conf", kubelet_path, std::move(*kubelet), changes));
    if (o_.admin) {
      for (const char* name : kAdminFiles) {
        const std::string path = o_.kubernetes_dir + "/" + name;
        auto present = d_.fs.exists(path);
        if (!present) return std::move(present).error();
        if (!*present) continue;  // super-admin.conf before kubeadm 1.29
        auto text = d_.fs.read(path);
        if (!text) return std::move(text).error();
        EKCO_TRY(plan(name, path, std::move(*text), changes));
      }
    }
    if (changes.empty() && !o_.restart_when_unchanged) {
      say(fmt::format("the kubeconfigs already point at {}; nothing to change", o_.server));
      return std::move(report_);
    }
    if (changes.empty() && !o_.dry_run) return restartOnly();
    // 2.
    if (o_.dry_run) {
      for (const Change& c : changes) {
        say(fmt::format("would point {} at {} (was {})", c.path, o_.server, report_.old_server));
      }
      say("would restart " + std::string(kKubeletUnit));
      return std::move(report_);
    }
    if (d_.systemd == nullptr) {
      return Error("no systemd to restart kubelet with", ErrorCode::kInvalidArgument);
    }
    // 3.
    const std::string dir =
        o_.kubernetes_dir + "/.ekco-backup/kubeconfig-" + kube::formatCompactUtc(o_.now);
    EKCO_TRY(d_.fs.makeDirs(dir, 0700));
    for (const Change& c : changes) {
      EKCO_TRY(d_.fs.write(dir + "/" + c.name, c.old_text, {.mode = 0600}));
    }
    // What the files were moved to: a resumed run finds its backup by it.
    EKCO_TRY(d_.fs.write(dir + "/" + std::string(kTargetFile), targetText(), {.mode = 0600}));
    report_.backup_dir = dir;
    return switchAndVerify(changes, dir);
  }

 private:
  // Steps 4 to 7 for `changes` (their old texts backed up in `dir`).
  Result<KubeconfigSwitchReport> switchAndVerify(const std::vector<Change>& changes,
                                                 const std::string& dir) {
    if (d_.systemd == nullptr) {
      return Error("no systemd to restart kubelet with", ErrorCode::kInvalidArgument);
    }
    // 4.
    for (const Change& c : changes) {
      if (auto written = d_.fs.write(c.path, c.new_text); !written) {
        restore(changes, "writing " + c.path + " failed");
        return std::move(written).error().wrap("the previous kubeconfigs were restored from " +
                                               dir);
      }
      report_.changed.push_back(c.name);
      say(fmt::format("pointed {} at {} (was {})", c.path, o_.server, report_.old_server));
    }
    say("backup of the previous files in " + dir);
    // 5, 6.
    const base::WallTime restarted_at = d_.clock.wallNow();
    base::Status outcome = d_.systemd->restartUnit(std::string(kKubeletUnit), o_.restart_timeout);
    if (outcome) {
      say("restarted " + std::string(kKubeletUnit));
      outcome = verify(restarted_at);
    }
    if (outcome) {
      say("verified: kubelet works through " + o_.server);
      return std::move(report_);
    }
    // 7.
    const std::string why = outcome.error().message();
    base::logError("set kubeconfig server: restoring the previous kubeconfigs",
                   {{"server", o_.server}, {"error", why}});
    restore(changes, why);
    if (auto again = d_.systemd->restartUnit(std::string(kKubeletUnit), o_.restart_timeout);
        !again) {
      return Error(fmt::format("{}; the previous kubeconfigs were restored from {} but kubelet "
                               "did not restart: {}",
                               why, dir, again.error().message()),
                   ErrorCode::kUnavailable);
    }
    return Error(fmt::format("{}; the previous kubeconfigs were restored from {} and kubelet "
                             "restarted with them",
                             why, dir),
                 ErrorCode::kUnavailable);
  }

  // A backup's target file: the server and the run's id.
  std::string targetText() const { return o_.server + "\n" + o_.run_id + "\n"; }

  // The newest backup of this run (its target file), as changes: each
  // backed-up file's old text, and that text pointed at the server. Empty: there is none.
  Result<std::vector<Change>> fromBackup() {
    std::vector<Change> out;
    const std::string root = o_.kubernetes_dir + "/.ekco-backup";
    auto present = d_.fs.exists(root);
    if (!present) return std::move(present).error();
    if (!*present) return out;
    auto entries = d_.fs.list(root);
    if (!entries) return std::move(entries).error();
    std::vector<std::string> runs;
    for (const std::string& e : *entries) {
      if (e.starts_with("kubeconfig-")) runs.push_back(e);
    }
    std::sort(runs.rbegin(), runs.rend());  // the newest first (the stamps sort as text)
    for (const std::string& run : runs) {
      const std::string dir = root + "/" + run;
      auto target = d_.fs.read(dir + "/" + std::string(kTargetFile));
      if (!target || *target != targetText()) continue;
      // A run that changed anything changed kubelet.conf: its old server is the old address.
      auto old_kubelet = d_.fs.read(dir + "/kubelet.conf");
      if (!old_kubelet) continue;
      auto servers = kubeconfigServers(*old_kubelet, dir + "/kubelet.conf");
      if (!servers) return std::move(servers).error();
      report_.old_server = servers->front();
      auto files = d_.fs.list(dir);
      if (!files) return std::move(files).error();
      for (const std::string& f : *files) {
        if (f == kTargetFile) continue;
        auto old_text = d_.fs.read(dir + "/" + f);
        if (!old_text) return std::move(old_text).error();
        auto new_text = withServer(*old_text, report_.old_server, o_.server, dir + "/" + f);
        if (!new_text) return std::move(new_text).error();
        out.push_back({.name = f,
                       .path = o_.kubernetes_dir + "/" + f,
                       .old_text = std::move(*old_text),
                       .new_text = std::move(*new_text)});
      }
      report_.backup_dir = dir;
      say("resuming the switch backed up in " + dir);
      return out;
    }
    return out;
  }

  // The files already point at the server (written by an interrupted run): kubelet restarted
  // and verified; nothing to restore on failure.
  Result<KubeconfigSwitchReport> restartOnly() {
    if (d_.systemd == nullptr) {
      return Error("no systemd to restart kubelet with", ErrorCode::kInvalidArgument);
    }
    say(
        fmt::format("the kubeconfigs already point at {}; restarting kubelet to be sure it uses "
                    "them",
                    o_.server));
    const base::WallTime restarted_at = d_.clock.wallNow();
    EKCO_TRY(d_.systemd->restartUnit(std::string(kKubeletUnit), o_.restart_timeout));
    say("restarted " + std::string(kKubeletUnit));
    EKCO_TRY(verify(restarted_at));
    say("verified: kubelet works through " + o_.server);
    return std::move(report_);
  }

  void say(std::string line) {
    base::logInfo("set kubeconfig server", {{"step", line}});
    report_.lines.push_back(std::move(line));
  }

  base::Status plan(const std::string& name, const std::string& path, std::string text,
                    std::vector<Change>& changes) {
    auto rewritten = withServer(text, report_.old_server, o_.server, path);
    if (!rewritten) return std::move(rewritten).error();
    if (*rewritten != text) {
      changes.push_back({.name = name,
                         .path = path,
                         .old_text = std::move(text),
                         .new_text = std::move(*rewritten)});
    }
    return base::ok();
  }

  base::Status verify(base::WallTime restarted_at) {
    if (!d_.verify) return base::ok();
    const base::MonoTime deadline = d_.clock.monoNow() + o_.verify_timeout;
    while (true) {
      base::Status checked = d_.verify(restarted_at);
      if (checked) return base::ok();
      if (d_.clock.monoNow() + o_.poll > deadline) {
        return Error(
            fmt::format("not verified within {}: {}", base::formatDuration(o_.verify_timeout),
                        checked.error().message()),
            ErrorCode::kTimeout);
      }
      std::this_thread::sleep_for(o_.poll);
    }
  }

  void restore(const std::vector<Change>& changes, const std::string& why) {
    for (const Change& c : changes) {
      if (auto back = d_.fs.write(c.path, c.old_text); !back) {
        base::logError("set kubeconfig server: a file could not be restored",
                       {{"file", c.path}, {"error", back.error().message()}, {"why", why}});
      }
    }
    say("restored the previous kubeconfigs (" + why + ")");
  }

  const KubeconfigSwitchOptions& o_;
  const KubeconfigSwitchDeps& d_;
  KubeconfigSwitchReport report_{};
};

// A transport built from the kubeconfig at `path` (its CA and credentials), at `server` when
// one is given instead of the file's.
Result<std::unique_ptr<kube::CurlTransport>> transportFrom(const hostfs::HostFs& fs,
                                                           const std::string& path,
                                                           const std::string& server,
                                                           const base::Clock& clock) {
  auto connection = kube::loadKubeconfig(fs, path, {}, /*token_file_readable_later=*/false);
  if (!connection) return std::move(connection).error();
  if (!server.empty()) {
    connection->server = server;
    connection->tls_server_name.clear();
  }
  return kube::CurlTransport::create(*connection, nullptr, clock,
                                     {.connect_timeout = std::chrono::seconds(5)});
}

}  // namespace

base::Status kubeletWorksThrough(const hostfs::HostFs& fs, const std::string& path,
                                 const std::string& node, base::WallTime since,
                                 const base::Clock& clock) {
  auto transport = transportFrom(fs, path, "", clock);
  if (!transport) return std::move(transport).error();
  kube::RestClient client(**transport, clock,
                          kube::RestClientOptions{.request_timeout = std::chrono::seconds(10)});
  auto lease = client.get(kube::resources::kLeases, "kube-node-lease", node);
  if (!lease) return std::move(lease).error().wrap("read kube-node-lease/" + node);
  auto parsed = kube::parseLease(*lease);
  if (!parsed) return std::move(parsed).error();
  if (!parsed->renew_time || *parsed->renew_time < since) {
    return Error(fmt::format("kubelet has not renewed kube-node-lease/{} since its restart", node),
                 ErrorCode::kUnavailable);
  }
  auto got = client.get(kube::resources::kNodes, "", node);
  if (!got) return std::move(got).error().wrap("read Node " + node);
  auto n = kube::parseNode(*got);
  if (!n) return std::move(n).error();
  const kube::NodeCondition* ready = n->condition("Ready");
  if (ready == nullptr || ready->status != "True") {
    return Error(fmt::format("Node {} is not Ready", node), ErrorCode::kUnavailable);
  }
  return base::ok();
}

base::Status apiAnswersAt(const hostfs::HostFs& fs, const std::string& path,
                          const std::string& server, const base::Clock& clock) {
  auto transport = transportFrom(fs, path, server, clock);
  if (!transport) return std::move(transport).error();
  auto answer =
      (*transport)
          ->send({.method = "GET", .target = "/version", .timeout = std::chrono::seconds(10)});
  if (!answer) return std::move(answer).error().wrap("GET " + server + "/version");
  if (answer->status != 200) {
    return Error(fmt::format("GET {}/version: HTTP {}", server, answer->status),
                 ErrorCode::kUnavailable);
  }
  return base::ok();
}

Result<KubeconfigSwitchReport> switchKubeconfigServer(const KubeconfigSwitchOptions& options,
                                                      const KubeconfigSwitchDeps& deps) {
  return Switch(options, deps).run();
}

}  // namespace ekco::agent::api_address
