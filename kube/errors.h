// From an HTTP status and the Kubernetes Status body to base::Error, so callers branch on
// ErrorCode (kNotFound, kConflict, ...) and people read the server's own message.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/transport/http_transport.h"

namespace ekco::kube {

// The parts of a metav1.Status body we use ({"kind":"Status", "message", "reason", "code",
// "details":{"name","kind"}}).
struct ApiStatus {
  std::string message{};
  std::string reason{};  // "NotFound", "AlreadyExists", "Conflict", "Expired", ...
  int code = 0;
  std::string details_name{};
  std::string details_kind{};
};

// The Status in a response body, or nullopt when the body is not JSON or not a Status.
std::optional<ApiStatus> parseStatus(std::string_view body);

// The ErrorCode for an HTTP status and Status reason. The reason wins where it is more precise
// (AlreadyExists is a 409 but kAlreadyExists; Expired/Gone are kGone; ServerTimeout and Timeout
// are kTimeout); otherwise: 400/422 kInvalidArgument, 401 kUnauthenticated, 403
// kPermissionDenied, 404 kNotFound, 409 kConflict, 410 kGone, 429 kTooManyRequests, 504
// kTimeout, other 5xx kUnavailable, anything else kUnknown.
base::ErrorCode errorCodeFor(int http_status, std::string_view reason = {});

// The Error for a non-2xx response to the operation `op` ("get nodes/node-a"):
//   get nodes/node-a: nodes "node-a" not found (NotFound, 404)
// A body that is not a Status (an HTML page from a proxy, garbage) still gives a typed error,
// with the status code and an excerpt of at most kBodyExcerpt bytes, printable ASCII only.
base::Error apiError(std::string_view op, const HttpResponse& response);
// The same for a Status that arrived without an HTTP status of its own (a watch ERROR event).
base::Error statusError(std::string_view op, const ApiStatus& status);

inline constexpr std::size_t kBodyExcerpt = 200;

// Retry-After in delta-seconds ("3"). The HTTP-date form is not used by kube-apiserver and is
// treated like a missing header: nullopt. Negative or unparsable values are nullopt too.
std::optional<std::chrono::seconds> parseRetryAfter(std::string_view value);

}  // namespace ekco::kube
