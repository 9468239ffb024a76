// The webhook server's request path (agent/features/webhook/webhook_request.h, as agent/serve/
// webhook_server.cc runs it on each TLS connection): the input is the bytes a client sends,
// after TLS, on one kept-alive connection; the server reads requests from them until it closes
// the connection or they run out, and answers each through the real review
// (agent/features/webhook/image_overrides.h) and memory budget.
//
// Checks: what the server wrote is a sequence of complete HTTP/1.1 answers, each 200 (an
// AdmissionReview JSON that allows) or a refusal (400, 404, 405, 413; 503 never: nothing else
// holds the budget), never 500; a refusal closes the connection (nothing after it); after every
// request the budget holds nothing, and it never held more than one request's cost at most.
// The memory: libFuzzer's -rss_limit_mb (scripts/fuzz: 2048) and -malloc_limit_mb (default the
// same) catch a review that grows beyond its bound.
#include <nlohmann/json.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/features/webhook/image_overrides.h"
#include "agent/features/webhook/webhook_request.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;
namespace admission = ekco::agent::admission;
namespace detail = ekco::agent::webhook_detail;
namespace http = boost::beast::http;

const admission::ImageOverrides& overrides() {
  static const admission::ImageOverrides o = admission::parseImageOverrides(
      {"nginx:1.25=registry.local/nginx:1.25", "busybox=registry.local/busybox"});
  return o;
}

// A synchronous stream over the input (read) and a string (written); the end of the input is
// the client closing its side.
class MemoryStream {
 public:
  explicit MemoryStream(std::string_view in) : in_(in) {}

  template <class Buffers>
  std::size_t read_some(const Buffers& buffers, boost::system::error_code& ec) {
    if (in_.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const std::size_t n = boost::asio::buffer_copy(buffers, boost::asio::buffer(in_));
    in_.remove_prefix(n);
    return n;
  }
  template <class Buffers>
  std::size_t read_some(const Buffers& buffers) {
    boost::system::error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class Buffers>
  std::size_t write_some(const Buffers& buffers, boost::system::error_code& ec) {
    ec = {};
    std::size_t n = 0;
    for (auto b : boost::beast::buffers_range_ref(buffers)) {
      out_.append(static_cast<const char*>(b.data()), b.size());
      n += b.size();
    }
    return n;
  }
  template <class Buffers>
  std::size_t write_some(const Buffers& buffers) {
    boost::system::error_code ec;
    return write_some(buffers, ec);
  }

  const std::string& written() const { return out_; }

 private:
  std::string_view in_;
  std::string out_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ekco::agent::WebhookServerOptions options;
  options.body_limit = 64 << 10;  // small, so that the limit itself is reached
  options.budget_wait = std::chrono::milliseconds(0);
  options.review = [](std::string_view body) {
    return admission::reviewPod(body, overrides()).response;
  };
  const std::size_t most = ekco::agent::webhookRequestCost(std::nullopt, options.body_limit);
  detail::ByteBudget budget(most, most / 3 * 2);
  MemoryStream stream(ekco::fuzz::asText(data, size));
  boost::beast::flat_buffer buffer;
  int requests = 0;
  for (;;) {
    boost::system::error_code ec;
    const detail::Served served = detail::serveRequest(
        stream, buffer, options, budget, [](auto) {}, ec);
    ++requests;
    check(budget.usedAndPeak().first == 0, "the budget is given back after each request");
    if (served == detail::Served::kClose) break;
  }
  check(budget.usedAndPeak().second <= most, "the budget never exceeded");

  // What was written: complete answers, the last of them the only one that may close.
  std::string_view out = stream.written();
  int answers = 0;
  while (!out.empty()) {
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    parser.body_limit(std::size_t{64} << 20);
    boost::system::error_code ec;
    while (!parser.is_done() && !ec) {
      const std::size_t used = parser.put(boost::asio::buffer(out.data(), out.size()), ec);
      out.remove_prefix(used);
      if (used == 0) break;
    }
    check(!ec && parser.is_done(), "a complete HTTP answer", stream.written());
    ++answers;
    const auto& res = parser.get();
    const unsigned status = res.result_int();
    check(status == 200 || status == 400 || status == 404 || status == 405 || status == 413,
          "an expected status", std::to_string(status));
    if (status != 200) {
      check(!res.keep_alive() && out.empty(), "a refusal closes the connection");
      continue;
    }
    nlohmann::json review;
    try {
      review = nlohmann::json::parse(res.body());
    } catch (const std::exception&) {
      ekco::fuzz::fail("a 200 answer is not JSON", res.body());
    }
    check(
        review.value("kind", "") == "AdmissionReview" && review["response"].value("allowed", false),
        "a 200 answer is an AdmissionReview that allows", res.body());
  }
  check(answers <= requests, "at most one answer per request");
  return 0;
}
