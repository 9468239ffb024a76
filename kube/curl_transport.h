// HttpTransport over libcurl: every Kubernetes API call goes through here (agent/upgrade_cmd.cc
// uses libcurl on its own for the installer URL, which is not an API server).
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
// (CURLOPT_CONNECT_TO), so both SNI and certificate verification use it.
//
// Authentication: client certificate and/or "Authorization: Bearer". A token_file is re-read at
// most every Connection::token_refresh (measured on the clock's monotonic time); if a re-read
// fails the previous token is kept.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/connection.h"
#include "kube/http_transport.h"
#include "kube/token_source.h"

namespace ekco::kube {

struct CurlTransportOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  std::size_t max_idle_handles = 4;
  std::string user_agent = "ekco";
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
  TokenSource token_;

  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* easy handles, guarded by mu_

  std::atomic<std::uint64_t> connections_opened_{0};
};

}  // namespace ekco::kube
