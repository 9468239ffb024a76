#include "agent/cli/upgrade_cmd.h"

#include "agent/runtime/command_env.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <mutex>
#include <ostream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "base/strings.h"
#include "base/version_info.h"
#include "hostfs/local_host_fs.h"
#include "kube/curl_transport.h"
#include "kube/kubeconfig.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/timestamp.h"

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

// Text from the network, for an error message: printable ASCII kept, the rest as \xNN, at
// most 64 characters.
std::string escapeForMessage(std::string_view text) {
  std::string out;
  std::size_t shown = 0;
  for (unsigned char c : text) {
    if (++shown > 64) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

std::string quoteForMessage(std::string_view text) { return "\"" + escapeForMessage(text) + "\""; }

using base::trimSpace;

// ---------------------------------------------------------------------------------------------
// libcurl

void curlGlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Exchange {
  std::map<std::string, std::string> headers{};
  std::string status_line{};
  std::string body{};
  std::size_t max_body = 0;
  bool too_large = false;
};

size_t onHeader(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t n = size * count;
  std::string_view line = trimSpace(std::string_view(data, n));
  if (line.substr(0, 5) == "HTTP/") {  // a new response (after a redirect): start over
    ex->headers.clear();
    ex->status_line = std::string(line);
    return n;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return n;
  std::string name(trimSpace(line.substr(0, colon)));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  ex->headers[name] = std::string(trimSpace(line.substr(colon + 1)));
  return n;
}

size_t onBody(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t n = size * count;
  if (ex->body.size() + n > ex->max_body) {
    ex->too_large = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  ex->body.append(data, n);
  return n;
}

// "HTTP 500 Internal Server Error" from "HTTP/1.1 500 Internal Server Error".
std::string statusText(long code, std::string_view status_line) {
  std::string out = fmt::format("HTTP {}", code);
  const std::size_t sp = status_line.find(' ');
  const std::size_t sp2 = sp == std::string_view::npos ? sp : status_line.find(' ', sp + 1);
  if (sp2 != std::string_view::npos) {
    std::string_view reason = trimSpace(status_line.substr(sp2 + 1));
    if (!reason.empty()) out += " " + escapeForMessage(reason);
  }
  return out;
}

class CurlHttpFetcher final : public HttpFetcher {
 public:
  explicit CurlHttpFetcher(const HttpFetchOptions& options) : options_(options) {
    curlGlobalInit();
  }

  Result<std::map<std::string, std::string>> head(const std::string& url) override {
    Exchange ex;
    EKCO_TRY(perform(url, /*head=*/true, ex));
    return std::move(ex.headers);
  }

  Result<std::string> get(const std::string& url) override {
    Exchange ex;
    EKCO_TRY(perform(url, /*head=*/false, ex));
    return std::move(ex.body);
  }

 private:
  base::Status perform(const std::string& url, bool head, Exchange& ex) {
    CURL* easy = curl_easy_init();
    if (easy == nullptr) return Error("curl_easy_init failed", ErrorCode::kUnknown);
    struct Cleanup {
      CURL* e;
      ~Cleanup() { curl_easy_cleanup(e); }
    } cleanup{easy};
    ex.max_body = options_.max_body_bytes;
    char errbuf[CURL_ERROR_SIZE] = {0};
    const std::string user_agent = std::string("ekco/") + EKCO_VERSION;
    const auto timeout = head ? options_.head_timeout : options_.get_timeout;
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(easy, CURLOPT_MAXREDIRS, options_.max_redirects);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, user_agent.c_str());
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout.count()));
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, onHeader);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &ex);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, onBody);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &ex);
    if (head) {
      curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else {
      curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
      curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
      curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE,
                       static_cast<curl_off_t>(options_.max_body_bytes));
    }
    const CURLcode rc = curl_easy_perform(easy);
    if (ex.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
      return Error(fmt::format("the response is larger than {} bytes", options_.max_body_bytes),
                   ErrorCode::kInvalidArgument);
    }
    if (rc != CURLE_OK) {
      std::string cause =
          errbuf[0] != '\0' ? std::string(trimSpace(errbuf)) : curl_easy_strerror(rc);
      return Error(cause,
                   rc == CURLE_OPERATION_TIMEDOUT ? ErrorCode::kTimeout : ErrorCode::kUnavailable);
    }
    long code = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    if (code < 200 || code > 299) {
      return Error(statusText(code, ex.status_line),
                   code >= 500 ? ErrorCode::kUnavailable : ErrorCode::kUnknown);
    }
    return base::ok();
  }

  const HttpFetchOptions options_;
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

Result<int> countNodes(kube::KubeClient& kube) {
  auto nodes = kube.listAll(kube::resources::kNodes, "");
  if (!nodes) return std::move(nodes).error().wrap("count the cluster's nodes");
  auto items = nodes->find("items");
  if (items == nodes->end() || items->is_null()) return 0;
  if (!items->is_array()) return Error("count the cluster's nodes: items is not a list");
  return static_cast<int>(items->size());
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

  std::deque<std::string> tail;
  const auto keep = [&](std::string_view line) {
    if (options.failure_tail_lines == 0) return;
    tail.emplace_back(line);
    while (tail.size() > options.failure_tail_lines) tail.pop_front();
  };
  bool streamed = false;
  request.on_output_line = [&](base::OutputStream stream, std::string_view line) {
    streamed = true;
    base::logInfo(
        "installer",
        {{"stream", stream == base::OutputStream::kStdout ? "stdout" : "stderr"}, {"line", line}});
    keep(line);
  };
  const std::string shown = base::formatArgv(request.argv);
  base::logInfo("running the installer", {{"command", shown}, {"hash", hash}});
  auto result = deps.runner.run(request);
  if (!result) return std::move(result).error().wrap("run the installer");
  if (!streamed) {  // a runner that does not stream: log what it captured, after the fact
    for (auto [stream, data] :
         {std::pair{"stdout", &result->stdout_data}, std::pair{"stderr", &result->stderr_data}}) {
      for (std::string_view line : splitLines(*data)) {
        base::logInfo("installer", {{"stream", stream}, {"line", line}});
        keep(line);
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

std::unique_ptr<HttpFetcher> makeCurlHttpFetcher(const HttpFetchOptions& options) {
  return std::make_unique<CurlHttpFetcher>(options);
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

  auto nodes = countNodes(deps.kube);
  if (!nodes) return std::move(nodes).error();
  out.nodes = *nodes;
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
  auto body = deps.http.get(options.url);
  if (!body) return std::move(body).error().wrap("GET " + options.url);
  if (trimSpace(*body).empty()) {
    return Error(fmt::format("GET {}: the installer is empty", options.url),
                 ErrorCode::kInvalidArgument);
  }
  RemoveOnExit remove_script(deps.fs, script_path);
  auto written = deps.fs.write(script_path, *body, {.mode = 0700});
  if (!written) return std::move(written).error();
  EKCO_TRY(runInstaller(options, deps, script_path, out.hash));

  auto recorded_now = recordHash(deps.fs, record_path, out.hash, deps.clock);
  if (!recorded_now) {
    return std::move(recorded_now)
        .error()
        .wrap(fmt::format("the installer succeeded but hash {} could not be recorded", out.hash));
  }
  out.decision = UpgradeDecision::kUpgraded;
  out.message = fmt::format("upgraded: installer hash {} -> {}, recorded in {}", out.recorded_hash,
                            out.hash, record_path);
  return out;
}

namespace {

bool isHttpUrl(std::string_view url) {
  const auto starts = [&](std::string_view p) {
    return url.size() > p.size() && std::equal(p.begin(), p.end(), url.begin(), [](char a, char b) {
             return a == std::tolower(static_cast<unsigned char>(b));
           });
  };
  return starts("http://") || starts("https://");
}

}  // namespace

int runUpgradeCommand(const Config& config, const UpgradeArgs& args, const CliEnv& env) {
  UpgradeOptions options;
  options.url = args.url.empty() ? config.auto_upgrade_url : args.url;
  options.state_dir = args.state_dir;
  options.dry_run = args.dry_run;
  if (!args.url.empty() && !isHttpUrl(args.url)) {
    *env.err << "error: --url: want an http:// or https:// URL (got " << quoteForMessage(args.url)
             << ")\n";
    return kExitUsage;
  }
  if (options.state_dir.empty() || options.state_dir.front() != '/') {
    *env.err << "error: --state-dir: want an absolute path (got "
             << quoteForMessage(options.state_dir) << ")\n";
    return kExitUsage;
  }
  const std::string host_root = args.host_root.empty() ? "/" : args.host_root;
  if (host_root.front() != '/') {
    *env.err << "error: --host-root: want an absolute path (got " << quoteForMessage(host_root)
             << ")\n";
    return kExitUsage;
  }
  if (options.url.empty()) {  // before anything that needs a kubeconfig or the network
    *env.out << "auto-upgrade is not configured (auto_upgrade_url is empty and --url was not "
                "given); nothing to do\n";
    return kExitOk;
  }

  base::SystemClock clock;
  const auto fail = [&](const Error& e) {
    *env.err << "error: " << e.message() << "\n";
    return kExitFailure;
  };
  // The API is only asked when an upgrade is due, but the kubeconfig is read up front.
  CommandClient c;
  if (auto built = buildCommandClient(
          c,
          {.host_root = host_root,
           .kubeconfig = args.kubeconfig,
           .connect_timeout = std::chrono::seconds(10),
           .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30)}},
          env.environment, clock);
      !built) {
    return fail(built.error());
  }
  auto http = makeCurlHttpFetcher(HttpFetchOptions{});
  base::BoostProcessRunner runner(clock);

  auto outcome = runUpgrade(
      options,
      UpgradeDeps{
          .fs = *c.host_fs, .http = *http, .kube = *c.client, .runner = runner, .clock = clock});
  if (!outcome) return fail(outcome.error());
  *env.out << outcome->message << "\n";
  return kExitOk;
}

}  // namespace ekco::agent
