// An HttpTransport that records requests and answers from a script, for testing the REST
// client's request building, error mapping and retries without a server.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "kube/transport/http_transport.h"

namespace ekco::kube::testing {

class FakeTransport final : public HttpTransport {
 public:
  // Queues the next answer: a response or a transport failure. When the queue is empty the
  // answer is 200 with body "{}".
  void reply(int status, std::string body = "{}", std::map<std::string, std::string> headers = {}) {
    std::lock_guard lock(mu_);
    answers_.emplace_back(
        HttpResponse{.status = status, .headers = std::move(headers), .body = std::move(body)});
  }
  void fail(base::ErrorCode code, std::string message = "transport failure") {
    std::lock_guard lock(mu_);
    answers_.emplace_back(base::Error(std::move(message), code));
  }

  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  HttpRequest last() const {
    std::lock_guard lock(mu_);
    return requests_.empty() ? HttpRequest{} : requests_.back();
  }

  // When set, answers every request (after recording it) instead of the queue: a script that
  // depends on the request, or several transports sharing one script.
  std::function<base::Result<HttpResponse>(const HttpRequest&)> answer_with{};

  base::Result<HttpResponse> send(const HttpRequest& request) override {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    if (answer_with) return answer_with(request);
    if (answers_.empty()) return HttpResponse{.status = 200, .body = "{}"};
    auto answer = std::move(answers_.front());
    answers_.pop_front();
    return answer;
  }

  // Streams the queued answer's body in chunks of chunk_size bytes.
  base::Result<HttpResponse> stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                    CancelToken& cancel) override {
    auto answer = send(request);
    if (!answer) return answer;
    if (answer->status < 200 || answer->status > 299) return answer;
    std::string body = std::move(answer->body);
    answer->body.clear();
    for (std::size_t i = 0; i < body.size(); i += chunk_size) {
      if (cancel.cancelled()) return base::Error("cancelled", base::ErrorCode::kCancelled);
      if (!on_chunk(std::string_view(body).substr(i, chunk_size))) break;
    }
    return answer;
  }

  std::size_t chunk_size = 7;

 private:
  mutable std::mutex mu_;
  std::vector<HttpRequest> requests_;
  std::deque<base::Result<HttpResponse>> answers_;
};

// The value of a request header (first match, case-sensitive name) or "".
inline std::string headerOf(const HttpRequest& request, const std::string& name) {
  for (const auto& [n, v] : request.headers) {
    if (n == name) return v;
  }
  return {};
}

}  // namespace ekco::kube::testing
