// Errors as values: Result<T> holds either a T or an Error, spelled like std::expected so the
// code can move to it once the toolchain has C++23. Third-party exceptions stop in the adapter
// that calls the library; everything above it passes Results.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace ekco::base {

// What kind of failure an Error is, for callers that branch on it (retry, treat as absent, ...).
// The message is for people; the code is for programs.
enum class ErrorCode {
  kUnknown,
  kInvalidArgument,  // bad input: config, flag, path, spec
  kNotFound,         // file, object or member does not exist
  kAlreadyExists,
  kPermissionDenied,  // EACCES/EPERM, HTTP 403
  kUnauthenticated,   // HTTP 401
  kConflict,          // HTTP 409, stale resourceVersion
  kGone,              // HTTP 410, watch too old
  kTooManyRequests,   // HTTP 429
  kUnavailable,       // transient: 5xx, connection refused, API down
  kTimeout,           // a deadline passed
  kEscape,            // a host path tried to leave the host root
  kIo,                // any other operating-system failure
  kParse,             // malformed YAML/JSON/PEM
  kCancelled,
};

std::string_view errorCodeName(ErrorCode code);

class Error {
 public:
  Error() = default;
  explicit Error(std::string message, ErrorCode code = ErrorCode::kUnknown)
      : message_(std::move(message)), code_(code) {}

  const std::string& message() const { return message_; }
  ErrorCode code() const { return code_; }

  // Adds context in front: "purge node-c: remove etcd member: connection refused".
  // Add context once per layer, at the layer that knows it.
  [[nodiscard]] Error wrap(std::string_view context) const& {
    return Error(std::string(context) + ": " + message_, code_);
  }
  [[nodiscard]] Error wrap(std::string_view context) && {
    message_.insert(0, std::string(context) + ": ");
    return std::move(*this);
  }

 private:
  std::string message_;
  ErrorCode code_ = ErrorCode::kUnknown;
};

// Builds an Error from the current errno value: "open /etc/x: No such file or directory".
// The code follows errno (ENOENT → kNotFound, EACCES/EPERM → kPermissionDenied, ...).
Error errnoError(std::string_view context, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  using value_type = T;

  Result(const T& value) : v_(std::in_place_index<0>, value) {}        // NOLINT: implicit by design
  Result(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT
  template <typename U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
           !std::is_same_v<std::decay_t<U>, Error> && !std::is_same_v<std::decay_t<U>, Result<T>>)
      Result(U&& value)
      : v_(std::in_place_index<0>, T(std::forward<U>(value))) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  template <typename U>
  T value_or(U&& fallback) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

  const Error& error() const& {
    assert(!has_value());
    return std::get<1>(v_);
  }
  Error&& error() && {
    assert(!has_value());
    return std::get<1>(std::move(v_));
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;

  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool has_value() const { return !error_.has_value(); }
  explicit operator bool() const { return has_value(); }
  void value() const { assert(has_value()); }

  const Error& error() const& {
    assert(!has_value());
    return *error_;
  }
  Error&& error() && {
    assert(!has_value());
    return std::move(*error_);
  }

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

inline Status ok() { return {}; }

}  // namespace ekco::base

// Returns early with the error of a Result-valued expression, else evaluates to nothing.
#define EKCO_TRY(expr)                            \
  do {                                            \
    auto&& ekco_try_result_ = (expr);             \
    if (!ekco_try_result_) {                      \
      return std::move(ekco_try_result_).error(); \
    }                                             \
  } while (false)
