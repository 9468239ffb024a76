#include "agent/features/upgrade/upgrade.h"

#include "agent/features/upgrade/upgrade_report.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/duration.h"
#include "base/log/log.h"
#include "base/strings.h"
#include "base/version_info.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "kube/transport/curl_transport.h"

namespace ekco::agent {
namespace {

using base::Error;
using base::ErrorCode;
using base::Result;

constexpr std::string_view kInstallerArgs[] = {"yes", "auto-upgrades-enabled"};

std::string joinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (out != "/") out.push_back('/');
  out.append(name);
  return out;
}

using base::quoteForMessage;
using base::trimSpace;

// ---------------------------------------------------------------------------------------------
// HTTP, through kube's libcurl adapter

// "HTTP 500 Internal Server Error".
std::string statusText(const kube::HttpResponse& response) {
  std::string out = fmt::format("HTTP {}", response.status);
  if (!response.reason.empty()) {
    out += ' ';
    base::appendEscaped(out, std::string_view(response.reason).substr(0, 64));
    if (response.reason.size() > 64) out += "...";
  }
  return out;
}

class UrlHttpFetcher final : public HttpFetcher {
 public:
  UrlHttpFetcher(const HttpFetchOptions& options, const base::Clock& clock)
      : options_(options), clock_(clock) {}

  Result<std::map<std::string, std::string>> head(const std::string& url) override {
    auto response = fetch(url, /*head=*/true);
    if (!response) return std::move(response).error();
    return std::move(response->headers);
  }

  Result<std::string> get(const std::string& url) override {
    auto response = fetch(url, /*head=*/false);
    if (!response) return std::move(response).error();
    return std::move(response->body);
  }

 private:
  Result<kube::HttpResponse> fetch(const std::string& url, bool head) {
    kube::UrlFetchRequest request{
        .url = url,
        .head = head,
        .connect_timeout = options_.connect_timeout,
        .timeout = head ? options_.head_timeout : options_.get_timeout,
        .max_body_bytes = options_.max_body_bytes,
        .max_redirects = options_.max_redirects,
        .allow_http = options_.allow_http,
        .ca_pem = options_.ca_pem,
        .user_agent = std::string("ekco/") + EKCO_VERSION,
    };
    auto response = kube::fetchUrl(request, clock_);
    if (!response) return std::move(response).error();
    if (response->status < 200 || response->status > 299) {
      return Error(statusText(*response),
                   response->status >= 500 ? ErrorCode::kUnavailable : ErrorCode::kUnknown);
    }
    return response;
  }

  const HttpFetchOptions options_;
  const base::Clock& clock_;
};

// ---------------------------------------------------------------------------------------------
// The core

std::string formatExit(const base::ProcessResult& r, std::chrono::milliseconds timeout) {
  if (r.timed_out) {
    return fmt::format("timed out after {} s",
                       std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
  }
  if (r.term_signal != 0) return fmt::format("was killed by signal {}", r.term_signal);
  return fmt::format("exited with status {}", r.exit_code);
}

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      out.push_back(text);
      break;
    }
    out.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  return out;
}

// Removes the installer file when the run is over, whatever happened.
class RemoveOnExit {
 public:
  RemoveOnExit(hostfs::HostFs& fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  ~RemoveOnExit() {
    auto removed = fs_.remove(path_);
    if (!removed) base::logWarn("cannot remove the installer", {{"error", removed.error()}});
  }
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;

 private:
  hostfs::HostFs& fs_;
  std::string path_;
};

Result<std::string> fetchHash(const std::string& url, HttpFetcher& http) {
  auto headers = http.head(url);
  if (!headers) return std::move(headers).error().wrap("HEAD " + url);
  auto it = headers->find("x-kurl-hash");
  if (it == headers->end()) {
    return Error(fmt::format("HEAD {}: the response has no {} header", url, kKurlHashHeader),
                 ErrorCode::kNotFound);
  }
  if (!isValidKurlHash(it->second)) {
    return Error(fmt::format("HEAD {}: invalid {} header {} (want 1 to 128 characters of "
                             "A-Z a-z 0-9 . _ -)",
                             url, kKurlHashHeader, quoteForMessage(it->second)),
                 ErrorCode::kInvalidArgument);
  }
  return it->second;
}

// Appends "<UTC RFC 3339> <hash>" to the record: the whole file is rewritten atomically.
base::Status recordHash(hostfs::HostFs& fs, const std::string& record_path, const std::string& hash,
                        const base::Clock& clock) {
  std::string content;
  auto exists = fs.exists(record_path);
  if (!exists) return std::move(exists).error();
  if (*exists) {
    auto current = fs.read(record_path);
    if (!current) return std::move(current).error();
    content = std::move(*current);
    if (!content.empty() && content.back() != '\n') content.push_back('\n');
  }
  content += kube::formatRfc3339(clock.wallNow()) + " " + hash + "\n";
  auto written = fs.write(record_path, content);
  if (!written) return std::move(written).error();
  return base::ok();
}

// The names of the cluster's nodes.
Result<std::vector<std::string>> listNodeNames(kube::KubeClient& kube) {
  auto nodes = kube.listAll(kube::resources::kNodes, "");
  if (!nodes) return std::move(nodes).error().wrap("count the cluster's nodes");
  std::vector<std::string> names;
  auto items = nodes->find("items");
  if (items == nodes->end() || items->is_null()) return names;
  if (!items->is_array()) return Error("count the cluster's nodes: items is not a list");
  for (const auto& item : *items) {
    names.push_back(kube::jsonText(kube::jsonField(item, "metadata"), "name"));
  }
  return names;
}

// Runs the installer; an Error when it did not succeed, quoting its last output lines.
base::Status runInstaller(const UpgradeOptions& options, const UpgradeDeps& deps,
                          const std::string& script, const std::string& hash) {
  base::ProcessRequest request;
  request.argv = {options.shell, deps.fs.realPath(script)};
  for (std::string_view a : kInstallerArgs) request.argv.emplace_back(a);
  request.working_dir = deps.fs.realPath(options.state_dir);
  request.timeout = options.installer_timeout;
  request.kill_grace = options.installer_kill_grace;
  request.max_output_bytes = std::size_t{1} << 20;  // the lines are streamed to the log anyway

  // The last lines of each stream, kept apart: the two pipes are read in whatever order their
  // data arrives, so an error line written last to stderr may be read before stdout's last
  // lines, and one combined tail could push it out.
  std::deque<std::string> tail;
  std::deque<std::string> error_tail;
  const auto keep = [&](base::OutputStream stream, std::string_view line) {
    if (options.failure_tail_lines == 0) return;
    auto& lines = stream == base::OutputStream::kStdout ? tail : error_tail;
    lines.emplace_back(line);
    while (lines.size() > options.failure_tail_lines) lines.pop_front();
  };
  bool streamed = false;
  // The silence is measured on deps.clock: from the start, the last line, or the last
  // "waiting" line, whichever is latest.
  const base::MonoTime started = deps.clock.monoNow();
  base::MonoTime last_output = started;
  base::MonoTime last_said = started;
  request.heartbeat_interval = options.progress_interval;
  request.on_heartbeat = [&](std::chrono::milliseconds elapsed) {
    const base::MonoTime now = deps.clock.monoNow();
    if (now - std::max(last_output, last_said) < options.progress_interval) return;
    last_said = now;
    base::logInfo(
        "waiting for the installer",
        {{"hash", hash},
         {"elapsed", base::formatDuration(elapsed)},
         {"silent_for", base::formatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(
                            now - last_output))},
         {"timeout", base::formatDuration(options.installer_timeout)}});
  };
  request.on_output_line = [&](base::OutputStream stream, std::string_view line) {
    streamed = true;
    last_output = deps.clock.monoNow();
    base::logInfo(
        "installer",
        {{"stream", stream == base::OutputStream::kStdout ? "stdout" : "stderr"}, {"line", line}});
    keep(stream, line);
  };
  const std::string shown = base::formatArgv(request.argv);
  base::logInfo("running the installer", {{"command", shown}, {"hash", hash}});
  auto result = deps.runner.run(request);
  if (!result) return std::move(result).error().wrap("run the installer");
  if (!streamed) {  // a runner that does not stream: log what it captured, after the fact
    for (auto [stream, data] : {std::pair{base::OutputStream::kStdout, &result->stdout_data},
                                std::pair{base::OutputStream::kStderr, &result->stderr_data}}) {
      for (std::string_view line : splitLines(*data)) {
        base::logInfo("installer",
                      {{"stream", stream == base::OutputStream::kStdout ? "stdout" : "stderr"},
                       {"line", line}});
        keep(stream, line);
      }
    }
  }
  if (result->success()) {
    base::logInfo("the installer succeeded", {{"hash", hash}, {"duration", result->duration}});
    return base::ok();
  }
  std::string message = fmt::format("the installer ({}) {}; hash {} not recorded", shown,
                                    formatExit(*result, options.installer_timeout), hash);
  if (!tail.empty()) {
    message += "; its last output lines:";
    for (const std::string& line : tail) message += "\n  " + line;
  }
  if (!error_tail.empty()) {
    message += tail.empty() ? "; its last error lines:" : "\nits last error lines:";
    for (const std::string& line : error_tail) message += "\n  " + line;
  }
  return Error(message, result->timed_out ? ErrorCode::kTimeout : ErrorCode::kUnknown);
}

}  // namespace

bool isValidKurlHash(std::string_view hash) {
  if (hash.empty() || hash.size() > 128) return false;
  return std::all_of(hash.begin(), hash.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

Result<std::optional<std::string>> lastRecordedHash(std::string_view content) {
  std::vector<std::string_view> lines = splitLines(content);
  for (std::size_t i = lines.size(); i-- > 0;) {
    std::string_view line = trimSpace(lines[i]);
    if (line.empty()) continue;
    std::size_t sp = line.find_last_of(" \t");
    std::string_view hash = sp == std::string_view::npos ? line : line.substr(sp + 1);
    if (!isValidKurlHash(hash)) {
      return Error(fmt::format("line {}: invalid hash {}", i + 1, quoteForMessage(hash)),
                   ErrorCode::kParse);
    }
    return std::optional<std::string>(std::string(hash));
  }
  return std::optional<std::string>();
}

std::unique_ptr<HttpFetcher> makeHttpFetcher(const HttpFetchOptions& options,
                                             const base::Clock& clock) {
  return std::make_unique<UrlHttpFetcher>(options, clock);
}

Result<UpgradeOutcome> runUpgrade(const UpgradeOptions& options, const UpgradeDeps& deps) {
  UpgradeOutcome out;
  if (options.url.empty()) {
    out.decision = UpgradeDecision::kNotConfigured;
    out.message =
        "auto-upgrade is not configured (auto_upgrade_url is empty and --url was not given); "
        "nothing to do";
    return out;
  }
  const std::string record_path = joinPath(options.state_dir, kUpgradeRecordFile);
  const std::string lock_path = joinPath(options.state_dir, kUpgradeLockFile);
  const std::string script_path = joinPath(options.state_dir, kUpgradeInstallerFile);

  std::unique_ptr<hostfs::FileLock> lock;
  if (!options.dry_run) {
    EKCO_TRY(deps.fs.makeDirs(options.state_dir, 0755));
    auto locked = deps.fs.tryLock(lock_path, 0600);
    if (!locked) {
      if (locked.error().code() != ErrorCode::kUnavailable) return std::move(locked).error();
      out.decision = UpgradeDecision::kLocked;
      out.message = fmt::format("another upgrade is running ({} is locked); skipping", lock_path);
      return out;
    }
    lock = std::move(*locked);
    // Left behind by a run that was killed (the lock says no run is using it now).
    EKCO_TRY(deps.fs.remove(script_path));
    auto swept = deps.fs.sweepStaleTemps(options.state_dir, std::chrono::minutes(10));
    if (!swept) base::logWarn("cannot sweep temp files", {{"error", swept.error()}});
  }

  auto hash = fetchHash(options.url, deps.http);
  if (!hash) return std::move(hash).error();
  out.hash = *hash;

  auto exists = deps.fs.exists(record_path);
  if (!exists) return std::move(exists).error();
  std::optional<std::string> recorded;
  if (*exists) {
    auto content = deps.fs.read(record_path);
    if (!content) return std::move(content).error();
    auto last = lastRecordedHash(*content);
    if (!last) return std::move(last).error().wrap(record_path);
    recorded = std::move(*last);
  }

  if (!recorded) {
    out.decision = UpgradeDecision::kSeeded;
    if (options.dry_run) {
      out.message = fmt::format(
          "dry run: no upgrade recorded yet; would record the current installer hash {} in {} "
          "and not upgrade",
          out.hash, record_path);
      return out;
    }
    EKCO_TRY(recordHash(deps.fs, record_path, out.hash, deps.clock));
    out.message = fmt::format(
        "no upgrade recorded yet: recorded the current installer hash {} in {}; not upgrading",
        out.hash, record_path);
    base::logInfo("seeded the upgrade record", {{"hash", out.hash}, {"file", record_path}});
    return out;
  }
  out.recorded_hash = *recorded;
  if (*recorded == out.hash) {
    out.decision = UpgradeDecision::kUpToDate;
    out.message = fmt::format("up to date: installer hash {} is the last one recorded", out.hash);
    return out;
  }

  auto nodes = listNodeNames(deps.kube);
  if (!nodes) return std::move(nodes).error();
  out.nodes = static_cast<int>(nodes->size());
  if (out.nodes > 1) {
    out.decision = UpgradeDecision::kMultiNode;
    out.message = fmt::format(
        "auto-upgrade supports single-node clusters only (found {} nodes); skipping", out.nodes);
    return out;
  }

  std::string command = options.shell + " " + deps.fs.realPath(script_path);
  for (std::string_view a : kInstallerArgs) command += " " + std::string(a);
  if (options.dry_run) {
    out.decision = UpgradeDecision::kWouldUpgrade;
    out.message = fmt::format(
        "dry run: the installer hash changed ({} -> {}); would download {} to {} and run '{}'",
        out.recorded_hash, out.hash, options.url, script_path, command);
    return out;
  }

  base::logInfo("upgrade due",
                {{"from", out.recorded_hash}, {"to", out.hash}, {"url", options.url}});
  // (7) Maintenance mode and the Events, on the one node.
  std::optional<UpgradeReporter> report;
  if (!options.maintenance_namespace.empty()) {
    report.emplace(deps.kube, deps.clock, options.maintenance_namespace,
                   nodes->empty() ? std::string() : nodes->front());
    auto foreign = report->foreignMaintenance();
    if (!foreign) return std::move(foreign).error().wrap("read maintenance mode");
    if (*foreign) {
      out.decision = UpgradeDecision::kMaintenance;
      out.message = fmt::format(
          "maintenance mode is on ({}): not upgrading to installer hash {} now; the next run "
          "tries again",
          (*foreign)->reasonText(), out.hash);
      return out;
    }
    report->event("UpgradeCheck", fmt::format("the installer hash changed: {} -> {} ({})",
                                              out.recorded_hash, out.hash, options.url));
    const auto expiry = std::chrono::duration_cast<std::chrono::seconds>(
        options.installer_timeout + options.installer_kill_grace + kUpgradeMaintenanceMargin);
    if (auto entered =
            report->enter(fmt::format("ekco upgrade to installer hash {}", out.hash), expiry);
        !entered) {
      report->event(
          "UpgradeFailed",
          fmt::format("not upgraded to installer hash {}: {}", out.hash, entered.error().message()),
          "Warning");
      return std::move(entered).error().wrap("enter maintenance mode for the upgrade");
    }
    report->event("UpgradeStarted", fmt::format("maintenance mode on; running the installer "
                                                "for hash {}",
                                                out.hash));
  }
  // (8) Every failure from here is reported and leaves maintenance mode.
  auto failed = [&](Error e) -> Error {
    if (report) {
      report->event("UpgradeFailed", fmt::format("installer hash {}: {}", out.hash, e.message()),
                    "Warning");
      report->leave();
    }
    return e;
  };
  auto body = deps.http.get(options.url);
  if (!body) return failed(std::move(body).error().wrap("GET " + options.url));
  if (trimSpace(*body).empty()) {
    return failed(Error(fmt::format("GET {}: the installer is empty", options.url),
                        ErrorCode::kInvalidArgument));
  }
  RemoveOnExit remove_script(deps.fs, script_path);
  auto written = deps.fs.write(script_path, *body, {.mode = 0700});
  if (!written) return failed(std::move(written).error());
  if (auto ran = runInstaller(options, deps, script_path, out.hash); !ran) {
    return failed(std::move(ran).error());
  }

  auto recorded_now = recordHash(deps.fs, record_path, out.hash, deps.clock);
  if (!recorded_now) {
    return failed(std::move(recorded_now)
                      .error()
                      .wrap(fmt::format("the installer succeeded but hash {} could not be recorded",
                                        out.hash)));
  }
  if (report) {
    report->event("UpgradeComplete",
                  fmt::format("the installer exited with status 0; installer hash {} -> {} "
                              "recorded",
                              out.recorded_hash, out.hash));
    report->leave();
  }
  out.decision = UpgradeDecision::kUpgraded;
  out.message = fmt::format("upgraded: installer hash {} -> {}, recorded in {}", out.recorded_hash,
                            out.hash, record_path);
  return out;
}

}  // namespace ekco::agent
