// When a failed API call is tried again, and after how long. Pure: the caller sleeps (through
// an injectable function) and supplies the randomness, so tests are instant and deterministic.
//
// The rule:
//   - Never retried: everything that is not transient: NotFound, AlreadyExists, Conflict,
//     Gone, Forbidden, Unauthorized, Invalid/BadRequest, parse errors, cancellation.
//   - Transient: transport failures (kUnavailable: not connected; kTimeout; kIo: connection
//     broke), HTTP 429, 500, 502, 503, 504 and the ServerTimeout/Timeout reasons.
//   - Idempotent requests (GET, PUT, PATCH, DELETE: repeating them converges on the same
//     state; a PUT carries its resourceVersion, so a repeat after a lost success is a Conflict,
//     never a double write) retry every transient failure.
//   - Non-idempotent requests (POST: create, eviction, events) retry only when the server
//     provably did not process the request: the connection was never established (transport
//     kUnavailable), 429 (the apiserver rejects before acting), or 503 with Retry-After (the
//     apiserver's own "come back later", sent before acting). A timeout or a 500 after a POST
//     may have created the object, so it is returned to the caller (who can GET and decide).
//   - Delay: base * multiplier^(n-1), capped at max_delay, minus up to `jitter` of itself at
//     random; a Retry-After (seconds, capped at max_retry_after) raises the delay to at least
//     that. At most max_attempts attempts in all.
#pragma once

#include <chrono>
#include <optional>

#include "base/result.h"

namespace ekco::kube {

struct RetryPolicy {
  int max_attempts = 5;  // including the first; 1 means never retry
  std::chrono::milliseconds base_delay{200};
  double multiplier = 2.0;
  std::chrono::milliseconds max_delay{5000};
  double jitter = 0.5;  // fraction of the delay removed at random, in [0, 1]
  std::chrono::milliseconds max_retry_after{std::chrono::seconds(30)};
};

// One failed attempt, as the retry rule sees it.
struct Failure {
  base::ErrorCode code = base::ErrorCode::kUnknown;
  int http_status = 0;  // 0: the transport failed, no response
  std::optional<std::chrono::seconds> retry_after = std::nullopt;
};

enum class Idempotency { kIdempotent, kNotIdempotent };

// Whether the failure is worth another attempt for a request of this kind (see the rule above).
bool isRetryable(const Failure& failure, Idempotency idempotency);

// The delay before attempt `attempt + 1` after `attempt` (1-based) failed with `failure`, or
// nullopt when the call should return the failure: not retryable, or attempts exhausted.
// `random` is uniform in [0, 1).
std::optional<std::chrono::milliseconds> retryDelay(const RetryPolicy& policy, int attempt,
                                                    const Failure& failure, Idempotency idempotency,
                                                    double random);

}  // namespace ekco::kube
