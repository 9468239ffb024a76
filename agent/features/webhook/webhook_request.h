// One request of the webhook's HTTPS server (webhook_server.h) over any synchronous stream: the
// server's TLS stream, and bytes in memory in the fuzz target (tests/fuzz/webhook_fuzz.cc).
// Internal to the server; not for other callers.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "agent/features/webhook/webhook_server.h"
#include "agent/serve/http_parse.h"
#include "base/os/heap.h"

namespace ekco::agent::webhook_detail {

namespace beast = boost::beast;
namespace http = boost::beast::http;

// The memory budget (webhook_server.h): bytes reserved by the requests being read and reviewed.
class ByteBudget {
 public:
  ByteBudget(std::size_t total, std::size_t large_share) : total_(total), large_(large_share) {}

  // Reserves `bytes` (a large request only up to the large share), waiting up to `wait` for
  // room; false when there was none by then or the server is stopping. A request costing more
  // than its share gets it when nothing else is reserved (it is still bounded by body_limit).
  template <class Rep, class Period>
  bool reserve(std::size_t bytes, bool large, std::chrono::duration<Rep, Period> wait) {
    std::unique_lock lock(mu_);
    const std::size_t limit = large ? large_ : total_;
    const bool got =
        cv_.wait_for(lock, wait, [&] { return stopping_ || used_ + bytes <= limit || used_ == 0; });
    if (!got || stopping_) return false;
    used_ += bytes;
    peak_ = std::max(peak_, used_);
    return true;
  }
  void release(std::size_t bytes) {
    {
      std::lock_guard lock(mu_);
      used_ -= bytes;
    }
    cv_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }
  std::pair<std::size_t, std::size_t> usedAndPeak() const {
    std::lock_guard lock(mu_);
    return {used_, peak_};
  }

 private:
  const std::size_t total_;
  const std::size_t large_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
  bool stopping_ = false;
};

// Bodies over this are "large": they may use two thirds of the budget (webhook_server.h).
inline constexpr std::size_t kLargeBody = std::size_t{256} << 10;
// Freed memory is given back to the kernel after a review of a body over this.
inline constexpr std::size_t kReleaseAfter = std::size_t{1} << 20;

using Counter = std::uint64_t WebhookServerStats::*;

// Writes a plain-text answer; false when the connection failed.
template <class Stream, class Count>
bool refuse(Stream& stream, Count& count, http::status status, unsigned version, std::string body,
            std::string_view allow = {}, Counter counter = &WebhookServerStats::refused) {
  count(counter);
  http::response<http::string_body> res{status, version};
  res.set(http::field::server, "ekco");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  if (!allow.empty()) res.set(http::field::allow, std::string(allow));
  if (status == http::status::service_unavailable) res.set(http::field::retry_after, "1");
  res.body() = std::move(body);
  res.keep_alive(false);  // every refusal closes the connection
  res.prepare_payload();
  boost::system::error_code ec;
  http::write(stream, res, ec);
  return !ec;
}

enum class Served : std::uint8_t { kClose, kKeepAlive };

// Reads one request from `stream` (bytes already read in `buffer`), answers it, and says whether
// the connection goes on. `count(&WebhookServerStats::field)` counts what happened; `ec` is the
// stream's error, if any.
template <class Stream, class Count>
Served serveRequest(Stream& stream, beast::flat_buffer& buffer, const WebhookServerOptions& options,
                    ByteBudget& budget, Count count, boost::system::error_code& ec) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(options.body_limit);
  http::read_header(stream, buffer, parser, ec);
  if (ec == http::error::body_limit) {
    // Beast checks Content-Length against the limit as the header completes: refused on the
    // header alone, the body unread.
    refuse(stream, count, http::status::payload_too_large, parser.get().version(),
           fmt::format("request body over the limit of {} bytes\n", options.body_limit));
    return Served::kClose;
  }
  if (ec) {
    if (isHttpParseError(ec)) refuse(stream, count, http::status::bad_request, 11, "bad request\n");
    return Served::kClose;
  }
  const auto& header = parser.get();
  const unsigned version = header.version();
  const std::string_view target(header.target().data(), header.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  // (1) Refused on the header alone: the body (if any) is never read, and the connection is
  // closed since its unread bytes would be taken for the next request.
  if (path != options.path) {
    refuse(stream, count, http::status::not_found, version, "not found\n");
    return Served::kClose;
  }
  if (header.method() != http::verb::post) {
    refuse(stream, count, http::status::method_not_allowed, version, "method not allowed\n",
           "POST");
    return Served::kClose;
  }
  const auto length = parser.content_length();
  if (length && *length > options.body_limit) {
    refuse(stream, count, http::status::payload_too_large, version,
           fmt::format("request body of {} bytes is over the limit of {} bytes\n", *length,
                       options.body_limit));
    return Served::kClose;
  }
  // (2) Room in the memory budget for the body and its review, before a byte of the body is
  // read; else 503 and the connection closed (its body unread).
  const std::optional<std::size_t> body_bytes =
      length ? std::optional<std::size_t>(static_cast<std::size_t>(*length)) : std::nullopt;
  const std::size_t counted = body_bytes.value_or(options.body_limit);
  const std::size_t cost = webhookRequestCost(body_bytes, options.body_limit);
  if (!budget.reserve(cost, counted > kLargeBody, options.budget_wait)) {
    refuse(stream, count, http::status::service_unavailable, version,
           "too many large reviews at once; retry\n", {}, &WebhookServerStats::busy);
    return Served::kClose;
  }
  struct Reservation {
    ByteBudget& budget;
    std::size_t bytes;
    bool release_heap;
    ~Reservation() {
      budget.release(bytes);
      if (release_heap) base::releaseFreeHeap();
    }
  } reservation{budget, cost, counted > kReleaseAfter};
  // (3) The body, bounded by body_limit (a chunked one too).
  http::read(stream, buffer, parser, ec);
  if (ec) {
    if (ec == http::error::body_limit) {
      refuse(stream, count, http::status::payload_too_large, version,
             fmt::format("request body over the limit of {} bytes\n", options.body_limit));
    } else if (isHttpParseError(ec)) {
      refuse(stream, count, http::status::bad_request, version, "bad request\n");
    }
    return Served::kClose;
  }
  // (4) The review, and its answer. The body is freed before the answer is written.
  http::request<http::string_body> req = parser.release();
  const bool keep_alive = req.keep_alive();
  http::response<http::string_body> res{http::status::ok, version};
  res.set(http::field::server, "ekco");
  res.set(http::field::content_type, "application/json");
  try {
    res.body() = options.review(req.body());
  } catch (const std::exception& e) {
    res.result(http::status::internal_server_error);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = fmt::format("internal error: {}\n", e.what());
  }
  req = {};
  count(&WebhookServerStats::reviews);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  http::write(stream, res, ec);
  if (ec || !keep_alive) return Served::kClose;
  return Served::kKeepAlive;
}

}  // namespace ekco::agent::webhook_detail
