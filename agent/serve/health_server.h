// The agent's health socket: HTTP/1.1 on a unix socket (default /run/ekco/ekco.sock), read by
// `ekco status`, the DaemonSet's exec probes and people with curl --unix-socket.
//
//   GET /healthz  200 "ok\n" while the manager loop is alive, else 503 "<reason>\n" (liveness)
//   GET /readyz   200 "ok\n" once caches are synced and the API answers, else 503 "<reason>\n"
//   GET /status   200, application/json: the agent's status document (see docs/monitoring.md)
//   GET /metrics  200, text/plain; version=0.0.4: the Prometheus registry
// Any other path is 404; any other method (HEAD included) is 405 with "Allow: GET". A handler
// that was not supplied makes its path 404; a handler that throws answers 500.
//
// The answers come from callbacks the agent supplies; they run on the server's worker threads,
// concurrently with each other, so they must be thread-safe.
//
// The optional TCP listener (metrics_address) answers GET /metrics only: the metrics hold no
// secret (certificate expiry dates, node names, counters), as a node exporter's; /status and the
// probes stay on the socket.
//
// Access control is the file system's: the socket is 0660 (root's, since the agent runs as root)
// in a directory that start() creates 0750. Only root and the socket's group can connect.
//
// Connections are served by the agent's one server loop (connection_loop.h): a connection
// waiting for a request holds no thread; up to `workers` threads answer the socket's requests
// and up to `metrics_workers` the TCP listener's (started as first needed). The unix socket
// and the TCP /metrics listener have separate pools: at most max_connections are open on the
// socket and metrics_max_connections over TCP; further connections wait in their listener's
// backlog until one of the same pool ends. Clients holding every /metrics slot or worker (anyone
// who can reach metrics_address) thus never delay the liveness probe on the socket. A connection
// must send each request and take its answer within request_timeout (and send its next one within
// request_timeout of the answer), else it is closed, so a silent client holds a slot for
// request_timeout at most.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace ekco::agent {

inline constexpr std::string_view kDefaultHealthSocket = "/run/ekco/ekco.sock";

// The answer of /healthz and /readyz: 200 "ok\n" when ok, else 503 "<reason>\n".
struct Health {
  bool ok = false;
  std::string reason{};
};

struct HealthHandlers {
  std::function<Health()> healthz{};
  std::function<Health()> readyz{};
  std::function<nlohmann::json()> status{};
  std::function<std::string()> metrics{};
};

struct HealthServerOptions {
  // The path clients connect to (the agent's: `health_socket` under --host-root, or --socket).
  std::string socket_path = std::string(kDefaultHealthSocket);
  // The root the socket is confined to; socket_path must be under it. Its directory is resolved
  // the way hostfs resolves every host path (a symlink planted on the way is followed inside the
  // root, never out of it) and missing directories are created with exact modes (parents 0755,
  // the socket's own 0750), whatever the umask. "" means "/".
  std::string host_root{};
  HealthHandlers handlers{};
  // Time a connection has to send one request and read the answer (then again for each
  // further request on a kept-alive connection).
  std::chrono::milliseconds request_timeout{std::chrono::seconds(5)};
  std::size_t max_connections = 32;         // on the unix socket
  std::size_t metrics_max_connections = 8;  // on metrics_address, a pool of its own
  std::size_t workers = 4;                  // threads answering the socket's requests
  std::size_t metrics_workers = 2;          // and metrics_address's
  // Also serve GET /metrics (and nothing else: every other path is 404) over plain HTTP on this
  // TCP address, for Prometheus to scrape (config `metrics_address`): "IPv4:PORT" or
  // "[IPv6]:PORT"; port 0 takes any free port (see metricsPort()). "" = the unix socket only.
  // The same timeouts apply; the connection limits are separate (see above).
  std::string metrics_address{};
};

class HealthServer {
 public:
  // Listens on options.socket_path and serves until stop():
  //  (1) the parent directory is created with mode 0750 when missing (its own missing parents
  //      with the umask's default). An existing directory's mode is left alone: it may be shared
  //      (/run) or set up by the administrator on purpose.
  //  (2) whatever is at the path is checked without following symlinks: a socket nobody
  //      listens on (the agent died) is stale and removed; a socket that accepts a connection is
  //      another agent's, and start() fails with kAlreadyExists "another ekco agent is listening
  //      on PATH"; anything else (file, directory, symlink) fails with kAlreadyExists and is
  //      never deleted.
  //  (3) the socket is bound under a dot-prefixed temporary name in the same directory, chmod
  //      0660, and renamed into place, so the path never shows a socket with wider permissions.
  // A path longer than a sockaddr_un allows (107 bytes) is kInvalidArgument.
  [[nodiscard]] static base::Result<std::unique_ptr<HealthServer>> start(
      HealthServerOptions options);

  // Calls stop().
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Closes the listener and every connection, joins the threads and removes the socket file
  // (only if it is still the one start() bound: a newer agent's socket is left alone).
  // Idempotent; safe to call from any thread but a handler.
  void stop();

  const std::string& socketPath() const;
  // The TCP port /metrics is served on; 0 when metrics_address is "".
  int metricsPort() const;

  class Impl;

 private:
  explicit HealthServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One HTTP/1.1 exchange with a health socket (the client side of `ekco status` and the tests).
struct HealthReply {
  int status = 0;
  std::string content_type{};
  std::string body{};
};

// Sends `method target` (no body) to the unix socket at socket_path and reads the whole answer,
// all within `timeout`. Any HTTP status is a reply. Errors: the socket cannot be reached —
// missing (kNotFound), refused (kUnavailable), not allowed (kPermissionDenied), other
// (kIo) — or no complete answer within the timeout (kTimeout).
[[nodiscard]] base::Result<HealthReply> queryHealthSocket(const std::string& socket_path,
                                                          std::string_view target,
                                                          std::chrono::milliseconds timeout,
                                                          std::string_view method = "GET");

}  // namespace ekco::agent
