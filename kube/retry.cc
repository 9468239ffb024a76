#include "kube/retry.h"

#include <algorithm>
#include <cmath>

namespace ekco::kube {

using base::ErrorCode;

bool isRetryable(const Failure& failure, Idempotency idempotency) {
  const bool transport = failure.http_status == 0;
  if (transport) {
    switch (failure.code) {
      case ErrorCode::kUnavailable:
        return true;  // never reached the server
      case ErrorCode::kTimeout:
      case ErrorCode::kIo:
        return idempotency == Idempotency::kIdempotent;
      default:
        return false;
    }
  }
  if (failure.http_status == 429) return true;
  if (failure.http_status == 503 && failure.retry_after) return true;
  switch (failure.code) {
    case ErrorCode::kTooManyRequests:
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimeout:
      return idempotency == Idempotency::kIdempotent;
    default:
      return false;
  }
}

std::optional<std::chrono::milliseconds> retryDelay(const RetryPolicy& policy, int attempt,
                                                    const Failure& failure, Idempotency idempotency,
                                                    double random) {
  if (attempt >= policy.max_attempts || !isRetryable(failure, idempotency)) return std::nullopt;
  const double base_ms = static_cast<double>(policy.base_delay.count());
  const double cap_ms = static_cast<double>(policy.max_delay.count());
  double delay_ms = std::min(cap_ms, base_ms * std::pow(policy.multiplier, attempt - 1));
  const double jitter = std::clamp(policy.jitter, 0.0, 1.0);
  delay_ms -= delay_ms * jitter * std::clamp(random, 0.0, 1.0);
  auto delay = std::chrono::milliseconds(static_cast<long long>(std::llround(delay_ms)));
  if (failure.retry_after) {
    const auto wanted =
        std::min<std::chrono::milliseconds>(*failure.retry_after, policy.max_retry_after);
    delay = std::max(delay, wanted);
  }
  return delay;
}

}  // namespace ekco::kube
