// One HTTP exchange with the API server, behind an interface so the REST client's mapping and
// retry rules are tested with a fake (tests/kube) and the real one (curl_transport.cc) is the
// only file that touches libcurl.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/memory_budget.h"
#include "base/result.h"
#include "kube/transport/cancel_token.h"

namespace ekco::kube {

struct HttpRequest {
  std::string method = "GET";
  // Path and query, already encoded: "/api/v1/namespaces/kube-system/pods?limit=500".
  std::string target{};
  // Extra headers as "Name: value" pairs (Authorization is added by the transport).
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string body{};
  // Total time for the whole exchange (connect, send, receive). Always finite.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // Streams: when no byte arrives for about this long (whole seconds, at least 1 s) — before the
  // headers or between chunks — the exchange ends with kTimeout ("no data for 90 s"): a server
  // that accepted the connection and went silent is found long before `timeout`. 0: no bound.
  std::chrono::milliseconds idle_timeout{0};
  // Streams only: called once the response's status and headers have arrived (before any
  // body), with the status. A watch learns from it that the server answered, even when no
  // event follows for minutes.
  std::function<void(int status)> on_headers{};
  // A collected body longer than this ends the exchange with kIo ("larger than ..."); 0: the
  // transport's own bound. The REST client sets one per kind of call (kube/rest_client.h).
  std::size_t max_body_bytes = 0;
};

struct HttpResponse {
  int status = 0;
  // The status line's reason phrase ("Internal Server Error"); "" over HTTP/2 and when absent.
  std::string reason{};
  // The protocol the answer came over: 10, 11 (HTTP/1.x), 20 (HTTP/2); 0 when unknown.
  int http_version = 0;
  // Header names lower-cased; a repeated header keeps its last value.
  std::map<std::string, std::string> headers{};
  std::string body{};

  // The header's value or "" (name in lower case).
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Called with each chunk of a 2xx streaming body as it arrives (chunks do not follow line
// boundaries). Returning false ends the stream early; that is not an error.
using ChunkHandler = std::function<bool(std::string_view chunk)>;

// Failures of the exchange itself (no HTTP status was received) are Errors whose code says how
// far the request got, which decides whether a non-idempotent request may be retried:
//   kUnavailable  the request provably did not reach the server: name resolution, connect
//                 (refused or timed out), TLS handshake or certificate verification failed;
//   kTimeout      the total timeout passed after the request may have been sent;
//   kIo           the connection broke after the request may have been sent;
//   kCancelled    the CancelToken was cancelled (streams only).
// Any HTTP status, 4xx and 5xx included, is a successful exchange: a value, not an Error.
// Implementations are thread-safe: concurrent calls are allowed.
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;

  [[nodiscard]] virtual base::Result<HttpResponse> send(const HttpRequest& request) = 0;

  // Like send, but a 2xx body is handed to on_chunk as it arrives instead of being collected
  // (the returned response then has an empty body); a non-2xx body is collected as usual, for
  // the error. Returns when the server ends the body or on_chunk returns false (the response),
  // when request.timeout passes (kTimeout) or when cancel is cancelled (kCancelled).
  [[nodiscard]] virtual base::Result<HttpResponse> stream(const HttpRequest& request,
                                                          const ChunkHandler& on_chunk,
                                                          CancelToken& cancel) = 0;

  // The budget collected bodies are charged to (base/memory_budget.h), which the handlers of a
  // stream charge what they keep of it to as well (a watch's partial line); null: none.
  virtual base::MemoryBudget* budget() const { return nullptr; }
};

}  // namespace ekco::kube
