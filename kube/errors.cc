#include "kube/errors.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace ekco::kube {

using base::Error;
using base::ErrorCode;

namespace {

std::string stringField(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// At most `limit` bytes of the text on one line: control and non-ASCII bytes become '?'.
std::string excerpt(std::string_view body, std::size_t limit = kBodyExcerpt) {
  std::string out;
  const bool truncated = body.size() > limit;
  for (char c : body.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : (c == '\n' || c == '\r' || c == '\t' ? ' ' : '?'));
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (truncated) out += "...";
  return out;
}

}  // namespace

std::optional<ApiStatus> parseStatus(std::string_view body) {
  // nlohmann's non-throwing parse: a discarded value instead of an exception on garbage.
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || stringField(json, "kind") != "Status") return std::nullopt;
  ApiStatus status{
      .message = stringField(json, "message"),
      .reason = stringField(json, "reason"),
  };
  if (auto it = json.find("code"); it != json.end() && it->is_number_integer()) {
    status.code = it->get<int>();
  }
  if (auto it = json.find("details"); it != json.end() && it->is_object()) {
    status.details_name = stringField(*it, "name");
    status.details_kind = stringField(*it, "kind");
  }
  return status;
}

ErrorCode errorCodeFor(int http_status, std::string_view reason) {
  if (reason == "AlreadyExists") return ErrorCode::kAlreadyExists;
  if (reason == "Expired" || reason == "Gone") return ErrorCode::kGone;
  if (reason == "ServerTimeout" || reason == "Timeout") return ErrorCode::kTimeout;
  switch (http_status) {
    case 400:
    case 422:
      return ErrorCode::kInvalidArgument;
    case 401:
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
      return ErrorCode::kConflict;
    case 410:
      return ErrorCode::kGone;
    case 429:
      return ErrorCode::kTooManyRequests;
    case 504:
      return ErrorCode::kTimeout;
    default:
      break;
  }
  if (http_status >= 500 && http_status <= 599) return ErrorCode::kUnavailable;
  return ErrorCode::kUnknown;
}

Error statusError(std::string_view op, const ApiStatus& status) {
  std::string message(op);
  message += ": ";
  // The server's own message is kept whole up to a generous limit (validation errors list
  // every field); only line breaks and control bytes are flattened, in the reason too.
  message += status.message.empty() ? "(no message)" : excerpt(status.message, 2048);
  message += " (";
  if (!status.reason.empty()) message += excerpt(status.reason, 64) + ", ";
  message += std::to_string(status.code) + ")";
  return Error(std::move(message), errorCodeFor(status.code, status.reason));
}

Error apiError(std::string_view op, const HttpResponse& response) {
  if (auto status = parseStatus(response.body)) {
    // The HTTP status is authoritative; a Status body without a code still maps correctly.
    status->code = response.status;
    return statusError(op, *status);
  }
  std::string message(op);
  message += ": HTTP " + std::to_string(response.status);
  const std::string body = excerpt(response.body);
  if (!body.empty()) message += ": " + body;
  return Error(std::move(message), errorCodeFor(response.status));
}

std::optional<std::chrono::seconds> parseRetryAfter(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  long long seconds = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || seconds < 0) {
    return std::nullopt;
  }
  return std::chrono::seconds(seconds);
}

}  // namespace ekco::kube
