// kURL's auto-upgrade, the procedure behind `ekco upgrade` (agent/features/upgrade/upgrade_cmd.h)
// (EKCO's upgrade.sh, ../shared/reference/ekco.md §3.14), run by ekco-upgrade.timer. It asks the
// installer URL for its current hash (HEAD, the X-Kurl-Hash header), compares it with the last hash
// recorded in <state-dir>/upgrades.txt and, when it changed, downloads the installer and runs `bash
// <file> yes auto-upgrades-enabled`.
//
// Order of a run (the first step that decides ends it):
//   1. No URL (auto_upgrade_url empty, no --url): nothing to do, exit 0.
//   2. <state-dir>/upgrade.lock (flock LOCK_EX|LOCK_NB) is held by another run: exit 0, the
//      timer fires again. Not taken in a dry run (which writes nothing).
//   3. HEAD the URL; a transport failure, a non-2xx status, a missing or invalid X-Kurl-Hash
//      is an error (exit 1) and the next timer run tries again.
//      What is verified: the URL is https (plain http only with the allow_http opt-in), the
//      server's certificate chains to the system trust store and names the host, and every
//      redirect is checked before it is followed (http(s) only, never https -> http, at most
//      10). What is not: the installer's content (kURL publishes no signature for it) — whoever
//      controls the URL's server controls what runs as root here.
//   4. No hash recorded yet: record the current one and exit 0 without upgrading (the
//      installer seeds the file; this covers an install that did not).
//   5. The same hash: up to date, exit 0.
//   6. The cluster has more than one Node: refuse (exit 0). Checked only here, so a run with
//      nothing to do needs no API server.
//   7. Maintenance mode (with maintenance_namespace; agent/features/upgrade/upgrade_report.h): one
// an
//      operator turned on skips the run (exit 0, the timer tries again); otherwise an
//      UpgradeCheck Event, maintenance mode on with an expiry, UpgradeStarted, and after step 8
//      UpgradeComplete or UpgradeFailed and maintenance mode off.
//   8. Download the installer to <state-dir>/upgrade-installer.sh (mode 0700; removed after the
//      run, and at the start of the next one if ekco was killed), run it with its output
//      streamed to the log line by line (and a "waiting for the installer" line every
//      progress_interval it stays silent), and on exit status 0 append "<UTC RFC 3339> <hash>" to
//      upgrades.txt. A failed installer records nothing (exit 1; the next run retries).
//
// upgrades.txt is rewritten whole on every change through HostFs::write (temp file, fsync,
// rename, directory fsync), so a crash leaves the old or the new file, never a torn last line.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/os/process.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::string_view kDefaultUpgradeStateDir = "/var/lib/ekco";
inline constexpr std::string_view kUpgradeRecordFile = "upgrades.txt";
inline constexpr std::string_view kUpgradeLockFile = "upgrade.lock";
inline constexpr std::string_view kUpgradeInstallerFile = "upgrade-installer.sh";
inline constexpr std::string_view kKurlHashHeader = "X-Kurl-Hash";

// HTTP for the installer URL, behind an interface so the core can be driven without a network.
// Errors name the cause only ("HTTP 500", "Couldn't connect to server: ..."); the caller adds
// the method and URL.
class HttpFetcher {
 public:
  virtual ~HttpFetcher() = default;
  // HEAD, following redirects: the final response's headers, names lower-cased. A status other
  // than 2xx is an Error (kUnavailable for 5xx).
  [[nodiscard]] virtual base::Result<std::map<std::string, std::string>> head(
      const std::string& url) = 0;
  // GET, following redirects: the body. Non-2xx, or a body over the size limit, is an Error.
  [[nodiscard]] virtual base::Result<std::string> get(const std::string& url) = 0;
};

struct HttpFetchOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds head_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds get_timeout{std::chrono::minutes(10)};
  std::size_t max_body_bytes = std::size_t{100} << 20;
  int max_redirects = 10;
  // Plain http:// for the URL and its redirects (auto_upgrade_allow_http, --allow-http). An
  // https URL never follows a redirect to http, whatever this says.
  bool allow_http = false;
  std::string ca_pem{};  // "" = the system trust store
};

// The real fetcher: kube::fetchUrl (the tree's one libcurl adapter), http(s) only, redirects
// checked hop by hop; `clock` bounds each fetch and must outlive the fetcher.
std::unique_ptr<HttpFetcher> makeHttpFetcher(const HttpFetchOptions& options,
                                             const base::Clock& clock);

struct UpgradeOptions {
  std::string url{};
  std::string state_dir = std::string(kDefaultUpgradeStateDir);  // a host path (HostFs)
  bool dry_run = false;
  std::string shell = "bash";  // runs the installer: <shell> <file> yes auto-upgrades-enabled
  // A kURL upgrade takes minutes to an hour; past this the installer gets SIGTERM, then
  // SIGKILL after the grace.
  std::chrono::milliseconds installer_timeout{std::chrono::hours(3)};
  std::chrono::milliseconds installer_kill_grace{std::chrono::seconds(60)};
  // How many of the installer's last lines of each stream (stdout, stderr) a failure's error
  // quotes.
  std::size_t failure_tail_lines = 10;
  // While the installer prints nothing for this long, a "waiting for the installer" line says
  // how long it has run and been silent (never minutes of silence in the log).
  std::chrono::milliseconds progress_interval{std::chrono::seconds(10)};
  // Maintenance mode and phase Events (agent/features/upgrade/upgrade_report.h): the namespace of
  // the ConfigMap ekco-maintenance (the leader-election namespace); "" for neither.
  std::string maintenance_namespace{};
};

struct UpgradeDeps {
  hostfs::HostFs& fs;
  HttpFetcher& http;
  kube::KubeClient& kube;
  base::ProcessRunner& runner;
  const base::Clock& clock;
};

enum class UpgradeDecision {
  kNotConfigured,  // no URL
  kLocked,         // another run holds the lock
  kSeeded,         // no record yet: the current hash was recorded (dry run: would be)
  kUpToDate,       // the recorded hash is current
  kMultiNode,      // an upgrade is due but the cluster has more than one node
  kMaintenance,    // an upgrade is due but an operator's maintenance mode is on
  kUpgraded,       // the installer ran and succeeded; the new hash is recorded
  kWouldUpgrade,   // dry run: an upgrade is due
};

struct UpgradeOutcome {
  UpgradeDecision decision = UpgradeDecision::kNotConfigured;
  std::string hash{};           // the URL's current hash ("" before the HEAD)
  std::string recorded_hash{};  // the last recorded one before this run ("" if none)
  int nodes = 0;                // counted only when an upgrade is due
  std::string message{};        // one line for people
};

// The whole decision and action (see the top of the file). An Error means exit 1: network,
// API, filesystem or installer failure; for the installer it quotes its last output lines.
[[nodiscard]] base::Result<UpgradeOutcome> runUpgrade(const UpgradeOptions& options,
                                                      const UpgradeDeps& deps);

// X-Kurl-Hash values ekco accepts: 1 to 128 of [A-Za-z0-9._-].
bool isValidKurlHash(std::string_view hash);

// The hash of the last non-empty line of upgrades.txt (its last whitespace-separated field);
// nullopt when there is none. An invalid hash there is a kParse error naming the line.
[[nodiscard]] base::Result<std::optional<std::string>> lastRecordedHash(std::string_view content);

}  // namespace ekco::agent
