// `ekco status [--socket PATH] [--host-root DIR] [--json | --probe healthz|readyz]`: asks the local
// agent's health socket for GET /readyz and GET /status and prints the status as a table (or the
// JSON as served).
//
// Exit codes, so the command can be a DaemonSet exec probe:
//   0  /readyz answered 200 (ready);
//   1  /readyz answered anything else, normally 503 (degraded): the reason is printed;
//   2  the socket cannot be reached (missing, refused, no answer within the timeout): one
//      `error:` line naming the socket path.
// A /status document that cannot be fetched or parsed is a warning, not a different exit code;
// fields that are missing or of the wrong type print as "-".
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/serve/health_server.h"
#include "base/clock.h"

namespace ekco::agent {

struct StatusOptions {
  // The CLI starts from "" and, without --socket, takes health_socket from the config.
  std::string socket_path = std::string(kDefaultHealthSocket);
  // When set, socket_path is looked up under this directory: a DaemonSet pod that mounts the
  // host's / at /host reads /host/run/ekco/ekco.sock with `--host-root /host`.
  std::string host_root{};
  // Print the /status body exactly as the agent served it (compact JSON, one line) instead of
  // the table; readiness still decides the exit code, and a degraded reason goes to stderr.
  bool json = false;
  // "healthz" or "readyz": ask only that endpoint and print one line ("ok", or why not) — the
  // DaemonSet's liveness and readiness probes. Same exit codes (0 answered 200, 1 otherwise,
  // 2 unreachable). Empty: the table.
  std::string probe{};
  // For each of the two requests.
  std::chrono::milliseconds timeout{std::chrono::seconds(3)};
};

// The socket path the options mean (host_root joined with socket_path).
std::string statusSocketPath(const StatusOptions& options);

// Runs the command; returns its exit code (kExitOk, kExitFailure or kExitUsage).
int runStatus(const StatusOptions& options, std::ostream& out, std::ostream& err,
              const base::Clock& clock);

// What /readyz said: ready on 200, else the reason (the body, or the HTTP status when empty).
struct Readiness {
  bool ready = false;
  std::string reason{};
};

// The table `ekco status` prints for a /status document (any JSON value: missing or wrong-typed
// fields print "-"), with times shown relative to `now`.
std::string renderStatusTable(const nlohmann::json& status, const Readiness& readiness,
                              base::WallTime now);

// The "system CA bundle" line for /status's system_trust object (kube/transport/system_trust.h):
// "/etc/pki/tls/certs/ca-bundle.crt (RHEL family)", "/x (SSL_CERT_FILE; warning: ...)",
// "none (warning: no CA bundle found: ...)".
std::string systemTrustLine(const nlohmann::json& trust);

// The "shutdown inhibitor" line for /status's shutdown_inhibitor object: held or not (and why),
// logind's InhibitDelayMaxSec against the drain's bound, with a warning when it is shorter.
std::string shutdownInhibitorLine(const nlohmann::json& inhibitor);

// A time relative to now: "now" within a second, "3s ago", "2m5s ago", "in 57s", "1h2m ago",
// "3d4h ago" (two units at most, truncated).
std::string formatRelativeTime(base::WallTime time, base::WallTime now);

}  // namespace ekco::agent
