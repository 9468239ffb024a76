#include "kube/retry.h"

#include <gtest/gtest.h>

namespace ekco::kube {
namespace {

using base::ErrorCode;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kIdem = Idempotency::kIdempotent;
constexpr auto kPost = Idempotency::kNotIdempotent;

Failure http(int status, ErrorCode code, std::optional<seconds> retry_after = std::nullopt) {
  return {.code = code, .http_status = status, .retry_after = retry_after};
}
Failure transport(ErrorCode code) { return {.code = code}; }

TEST(Retry, NonTransientErrorsAreNeverRetried) {
  for (auto [status, code] : {std::pair{404, ErrorCode::kNotFound},
                              {409, ErrorCode::kConflict},
                              {409, ErrorCode::kAlreadyExists},
                              {410, ErrorCode::kGone},
                              {403, ErrorCode::kPermissionDenied},
                              {401, ErrorCode::kUnauthenticated},
                              {422, ErrorCode::kInvalidArgument},
                              {400, ErrorCode::kInvalidArgument}}) {
    EXPECT_FALSE(isRetryable(http(status, code), kIdem)) << status;
    EXPECT_FALSE(isRetryable(http(status, code), kPost)) << status;
  }
  EXPECT_FALSE(isRetryable(transport(ErrorCode::kCancelled), kIdem));
}

TEST(Retry, IdempotentRequestsRetryEveryTransientFailure) {
  EXPECT_TRUE(isRetryable(transport(ErrorCode::kUnavailable), kIdem));
  EXPECT_TRUE(isRetryable(transport(ErrorCode::kTimeout), kIdem));
  EXPECT_TRUE(isRetryable(transport(ErrorCode::kIo), kIdem));
  EXPECT_TRUE(isRetryable(http(429, ErrorCode::kTooManyRequests), kIdem));
  EXPECT_TRUE(isRetryable(http(500, ErrorCode::kUnavailable), kIdem));
  EXPECT_TRUE(isRetryable(http(502, ErrorCode::kUnavailable), kIdem));
  EXPECT_TRUE(isRetryable(http(503, ErrorCode::kUnavailable), kIdem));
  EXPECT_TRUE(isRetryable(http(504, ErrorCode::kTimeout), kIdem));
  EXPECT_TRUE(isRetryable(http(500, ErrorCode::kTimeout), kIdem));  // ServerTimeout
}

TEST(Retry, PostsRetryOnlyWhenTheServerProvablyDidNotProcessThem) {
  EXPECT_TRUE(isRetryable(transport(ErrorCode::kUnavailable), kPost));  // never connected
  EXPECT_TRUE(isRetryable(http(429, ErrorCode::kTooManyRequests), kPost));
  EXPECT_TRUE(isRetryable(http(503, ErrorCode::kUnavailable, seconds(1)), kPost));

  EXPECT_FALSE(isRetryable(transport(ErrorCode::kTimeout), kPost));
  EXPECT_FALSE(isRetryable(transport(ErrorCode::kIo), kPost));
  EXPECT_FALSE(isRetryable(http(503, ErrorCode::kUnavailable), kPost));
  EXPECT_FALSE(isRetryable(http(500, ErrorCode::kUnavailable), kPost));
  EXPECT_FALSE(isRetryable(http(504, ErrorCode::kTimeout), kPost));
}

TEST(Retry, BackoffDoublesFromTheBaseUpToTheCap) {
  RetryPolicy policy{.max_attempts = 10, .jitter = 0};
  const auto f = http(503, ErrorCode::kUnavailable);
  std::vector<long long> delays;
  for (int attempt = 1; attempt < 10; ++attempt) {
    delays.push_back(retryDelay(policy, attempt, f, kIdem, 0.5)->count());
  }
  EXPECT_EQ(delays, (std::vector<long long>{200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000}));
}

TEST(Retry, JitterRemovesUpToItsFractionOfTheDelay) {
  RetryPolicy policy{.jitter = 0.5};
  const auto f = transport(ErrorCode::kUnavailable);
  EXPECT_EQ(retryDelay(policy, 2, f, kIdem, 0.0), milliseconds(400));
  EXPECT_EQ(retryDelay(policy, 2, f, kIdem, 0.5), milliseconds(300));
  EXPECT_EQ(retryDelay(policy, 2, f, kIdem, 0.999), milliseconds(200));
}

TEST(Retry, RetryAfterRaisesTheDelayButIsCapped) {
  RetryPolicy policy{.max_retry_after = seconds(10)};
  EXPECT_EQ(retryDelay(policy, 1, http(429, ErrorCode::kTooManyRequests, seconds(3)), kIdem, 0),
            milliseconds(3000));
  EXPECT_EQ(retryDelay(policy, 1, http(429, ErrorCode::kTooManyRequests, seconds(600)), kIdem, 0),
            milliseconds(10000));
  // A Retry-After shorter than the backoff does not shorten it.
  EXPECT_EQ(retryDelay(policy, 4, http(429, ErrorCode::kTooManyRequests, seconds(0)), kIdem, 0),
            milliseconds(1600));
}

TEST(Retry, StopsAfterMaxAttempts) {
  RetryPolicy policy{.max_attempts = 3};
  const auto f = transport(ErrorCode::kUnavailable);
  EXPECT_TRUE(retryDelay(policy, 1, f, kIdem, 0));
  EXPECT_TRUE(retryDelay(policy, 2, f, kIdem, 0));
  EXPECT_FALSE(retryDelay(policy, 3, f, kIdem, 0));
  EXPECT_FALSE(retryDelay(RetryPolicy{.max_attempts = 1}, 1, f, kIdem, 0));
}

}  // namespace
}  // namespace ekco::kube
