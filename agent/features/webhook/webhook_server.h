// The admission webhook's HTTPS server: HTTP/1.1 over TLS (Boost.Beast + OpenSSL, the health
// socket's HTTP layer), for the kube-apiserver's calls to the pod image overrides webhook.
//
//   POST <path>   (default /pod-image-overrides, EKCO's path) the body is handed to `review`,
//                 whose answer is sent as application/json, 200. Keep-alive as the client asks.
//   other paths   404; another method on <path> 405 with "Allow: POST".
//   a body over body_limit (3 MiB, the apiserver's own request limit) is refused with 413 and the
//                 connection closed, before a byte of it is read when Content-Length says so
//                 (a chunked body is read up to the limit, then refused).
//   a malformed request gets 400 and the connection is closed.
//
// TLS 1.2 or later with the credentials given to start() and swapped by setCredentials() at any
// time: connections accepted after the swap use the new certificate, open ones keep theirs.
//
// Bounded against hostile clients (any pod can reach the port; issue 34):
//   - Connections: a connection waits for its first byte, and a kept-alive one for its next
//     request, in the agent's one server loop (agent/serve/connection_loop.h), holding no
//     thread and no TLS state. When a byte arrives it is queued for one of `workers` threads
//     (started as first needed), which does the TLS handshake (within handshake_timeout) or
//     reads the request and answers it (within request_timeout), and hands it back to the
//     loop to wait for the next one. A connection with no byte within
//     handshake_timeout of its accept, or no request within request_timeout of its handshake,
//     or none within idle_timeout of its last answer, is closed. At most max_connections are
//     open: beyond, the one waiting longest for a byte is closed for the newcomer; at most
//     max_kept_alive keep a TLS session between requests (the least recently active are closed
//     beyond; the apiserver keeps a few per server and opens new ones as needed). One source
//     address has at most per_source_workers connections served at once (its others wait their
//     turn), so slow clients from one address cannot take every worker.
//   - Memory: a request reserves, before its body is read, what its review can cost (6x the
//     body's Content-Length plus 64 KiB; a chunked body is counted at body_limit) from a budget
//     of memory_budget bytes shared by every connection, and gives it back after its answer.
//     Bodies over 256 KiB may use two thirds of the budget, so ordinary reviews always find
//     room. A request that finds no room within budget_wait is answered 503 with Retry-After
//     and the connection is closed; a body over body_limit is 413 as above. Memory freed by a
//     large review is returned to the kernel (base::releaseFreeHeap).
// HTTP pipelining (a request sent before the previous answer arrived) is not served: the
// apiserver's client (Go net/http) never does it.
//
// `review` runs on the worker threads, concurrently with itself: it must be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::agent {

// The port the agents listen on (config pod_image_overrides_port): above 1024 (the DaemonSet
// drops NET_BIND_SERVICE) and beside the apiserver's 6443 and the internal load balancer's
// 6444, where nothing else of a kURL cluster listens (packages-only agents listen on the host).
inline constexpr int kDefaultWebhookPort = 6445;
inline constexpr std::string_view kImageOverridesPath = "/pod-image-overrides";

struct TlsCredentials {
  std::string cert_pem{};  // the serving certificate (and any intermediates after it)
  std::string key_pem{};
};

struct WebhookServerOptions {
  // Where to listen: an IP address ("::" means every address, IPv4 included, falling back to
  // "0.0.0.0" on a host without IPv6) and a port (0: any free port; see port()).
  std::string address = "::";
  int port = kDefaultWebhookPort;
  std::string path = std::string(kImageOverridesPath);
  // The request body in, the response body (JSON) out. Must not throw (a throw answers 500).
  std::function<std::string(std::string_view body)> review{};
  std::size_t body_limit = std::size_t{3} << 20;
  // See above. The apiserver calls a webhook with a 10 s timeout (timeoutSeconds).
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(3)};
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
  std::size_t max_connections = 1024;
  std::size_t max_kept_alive = 128;  // connections with a TLS session between requests
  std::size_t workers = 16;
  std::size_t per_source_workers = 8;
  std::size_t memory_budget = std::size_t{32} << 20;
  std::chrono::milliseconds budget_wait{std::chrono::seconds(2)};
};

// What a request of `body_bytes` (nullopt: chunked, unknown) reserves from memory_budget.
std::size_t webhookRequestCost(std::optional<std::size_t> body_bytes, std::size_t body_limit);

struct WebhookServerStats {
  std::uint64_t connections = 0;
  std::uint64_t reviews = 0;       // POSTs answered by `review`
  std::uint64_t refused = 0;       // 4xx answers (404, 405, 400, 413)
  std::uint64_t tls_failures = 0;  // handshakes that failed
  std::uint64_t busy = 0;          // 503: no room in the memory budget within budget_wait
  std::uint64_t evicted = 0;       // closed, waiting for a byte, to make room for a newcomer
  std::uint64_t timed_out = 0;     // closed at a deadline (handshake, request or idle)
  std::size_t reserved = 0;        // bytes of the memory budget reserved now
  std::size_t reserved_peak = 0;   // and at most since start()
};

class WebhookServer {
 public:
  // Binds, listens and serves until stop(). Errors: unusable credentials (kInvalidArgument),
  // an address that does not parse (kInvalidArgument), a port in use or not permitted (kIo).
  [[nodiscard]] static base::Result<std::unique_ptr<WebhookServer>> start(
      WebhookServerOptions options, const TlsCredentials& credentials);

  ~WebhookServer();  // stop()
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // New connections use these from now on. Unusable credentials are kInvalidArgument and the
  // old ones stay.
  [[nodiscard]] base::Status setCredentials(const TlsCredentials& credentials);

  // The port listened on (the one the kernel chose for port 0).
  int port() const;
  WebhookServerStats stats() const;

  // Closes the listener and every connection and joins the threads. Idempotent.
  void stop();

  class Impl;

 private:
  explicit WebhookServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ekco::agent
