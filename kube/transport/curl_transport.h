// The tree's one libcurl adapter: every Kubernetes API call (CurlTransport) and every other URL
// ekco fetches (fetchUrl: kURL's installer for `ekco upgrade`) goes through here.
//
// Connections. Easy handles are pooled (up to max_idle_handles kept); each keeps its live
// connection between calls (curl_easy_reset keeps connections, the DNS cache and TLS sessions),
// so sequential calls reuse one connection, HTTP/2 where the server offers it by ALPN, else
// HTTP/1.1 keep-alive. Concurrent calls use separate handles. A watch stream uses a handle of
// its own, driven by a private multi handle so CancelToken::cancel wakes it at once
// (curl_multi_wakeup).
//
// TLS comes from the Connection's PEM text (CAINFO/SSLCERT/SSLKEY blobs); tls_server_name is
// honoured by addressing the request to that name and connecting to the real host
// (CURLOPT_CONNECT_TO), so both SNI and certificate verification use it. A connection without a
// CA of its own (and not insecure) trusts the system CA bundle ekco chose
// (kube/transport/system_trust.h), never libcurl's built-in Debian paths.
//
// Authentication: client certificate and/or "Authorization: Bearer". A token_file is re-read at
// most every Connection::token_refresh (measured on the clock's monotonic time); if a re-read
// fails the previous token is kept.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/memory_budget.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/transport/connection.h"
#include "kube/transport/http_transport.h"
#include "kube/transport/system_trust.h"
#include "kube/transport/token_source.h"

namespace ekco::kube {

struct CurlTransportOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // A longer response body ends the call with kIo ("larger than 64 MiB"): send's whole body,
  // and a stream's body when its status is not 2xx (a 2xx stream goes to the handler, which
  // bounds what it keeps). A request's own max_body_bytes (the REST client's per-call bounds,
  // kube/rest_client.h) applies when it is smaller.
  std::size_t max_response_bytes = std::size_t{64} << 20;
  // What collected bodies are charged to, all calls of all transports together; a body the
  // budget cannot take ends its call with kIo ("the agent's buffer budget (...) cannot hold the
  // response").
  // Null: base::processBufferBudget(). Tests give their own.
  base::MemoryBudget* budget = nullptr;
  std::size_t max_idle_handles = 4;
  std::string user_agent = "ekco";
  // What a connection without ca_pem trusts; unset: processSystemTrust(). Tests set it.
  std::optional<SystemTrust> system_trust{};
};

class CurlTransport final : public HttpTransport {
 public:
  // token_fs reads connection.token_file (the process's own filesystem); it may be null when
  // token_file is empty. token_fs and clock must outlive the transport.
  static base::Result<std::unique_ptr<CurlTransport>> create(Connection connection,
                                                             const hostfs::HostFs* token_fs,
                                                             const base::Clock& clock,
                                                             CurlTransportOptions options = {});
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  base::Result<HttpResponse> send(const HttpRequest& request) override;
  base::Result<HttpResponse> stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                    CancelToken& cancel) override;

  // New connections opened so far, over all calls (CURLINFO_NUM_CONNECTS summed): a measure of
  // connection reuse.
  std::uint64_t connectionsOpened() const { return connections_opened_.load(); }

  base::MemoryBudget* budget() const override { return budget_; }

 private:
  struct Target {
    std::string url_prefix;  // "https://name:port" the request URL starts with
    std::string connect_to;  // CURLOPT_CONNECT_TO entry, "" when not needed
  };
  CurlTransport(Connection connection, Target target, const hostfs::HostFs* token_fs,
                const base::Clock& clock, CurlTransportOptions options);

  void* acquire();
  void release(void* handle);

  const Connection connection_;
  const Target target_;
  const CurlTransportOptions options_;
  base::MemoryBudget* const budget_;
  TokenSource token_;

  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* easy handles, guarded by mu_

  std::atomic<std::uint64_t> connections_opened_{0};
};

// One fetch of a URL that is not an API server (kURL's installer for `ekco upgrade`): no
// credentials, the system trust store unless ca_pem is set, no pooled connection.
struct UrlFetchRequest {
  std::string url{};
  bool head = false;  // HEAD instead of GET (no body is read)
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // The whole fetch, every redirect included.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // A longer body ends the fetch with kInvalidArgument ("larger than N bytes").
  std::size_t max_body_bytes = std::size_t{100} << 20;
  int max_redirects = 10;
  // Plain http:// for the URL and its redirects. Whatever this says, a redirect from https to
  // http is refused: once a fetch is on TLS it stays on TLS.
  bool allow_http = false;
  std::string ca_pem{};  // PEM; "" = the system trust store (system_trust)
  std::string user_agent = "ekco";
  // What a fetch without ca_pem trusts; unset: processSystemTrust(). Tests set it.
  std::optional<SystemTrust> system_trust{};
};

// Follows redirects itself (301, 302, 303, 307, 308 with a Location), checking each hop: http or
// https only, http only when allow_http, never https -> http, at most max_redirects. Returns the
// final response (any HTTP status is a value, as for HttpTransport). Errors: kInvalidArgument
// for a refused URL or redirect, too many redirects or a body over the bound; otherwise the
// transport codes of HttpTransport (kUnavailable: nothing was sent; kTimeout; kIo). Messages
// name the URL that failed, and a certificate that does not verify against the system trust
// names the bundle ("(system CA bundle: /etc/pki/tls/certs/ca-bundle.crt (RHEL family))").
// The clock measures `timeout` over the hops.
[[nodiscard]] base::Result<HttpResponse> fetchUrl(const UrlFetchRequest& request,
                                                  const base::Clock& clock);

// Why `url` is not one fetchUrl fetches ("" when it is): an http:// or https:// URL with a host,
// no whitespace or control characters (checked by libcurl's own URL parser), plain http only
// when allow_http. Config validation and `ekco upgrade` ask this, so they agree with the fetch.
// When plain http is the only problem and `http_opt_in` is given (how the caller lets it in:
// "set auto_upgrade_allow_http: true"), the answer ends "; use https://, or <http_opt_in>".
std::string urlProblem(std::string_view url, bool allow_http, std::string_view http_opt_in = {});

// The linked libcurl's version ("7.88.1"), for `ekco version`.
std::string curlVersion();

}  // namespace ekco::kube
