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
// A thread serves each connection (the apiserver keeps a few alive per server). At most
// max_connections are served at once; further connections wait in the listen backlog. A
// connection has request_timeout for the TLS handshake and the first request and its answer,
// then idle_timeout for each further request (waiting included), else it is closed: a silent
// or slow client holds a thread for a bounded time. `review` runs on connection threads,
// concurrently with itself: it must be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
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
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
  std::size_t max_connections = 64;
};

struct WebhookServerStats {
  std::uint64_t connections = 0;
  std::uint64_t reviews = 0;       // POSTs answered by `review`
  std::uint64_t refused = 0;       // 4xx answers (404, 405, 400, 413)
  std::uint64_t tls_failures = 0;  // handshakes that failed
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
