// A small HTTPS client for kubesim's own tests (Boost.Beast, blocking, one connection per call),
// authenticating with the server's admin client certificate (or a bearer token) and verifying
// its CA.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/kubesim/server/server.h"

namespace ekco::kubesim::testing {

struct HttpResponse {
  int status = 0;
  std::string body{};
  std::string content_type{};
  std::string retry_after{};
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

struct ExecResult {
  std::string protocol{};
  std::string stdout_data{};
  std::string stderr_data{};
  nlohmann::json status{};
};

class TestClient {
 public:
  explicit TestClient(const Server& server);
  // Without a client certificate, sending "Authorization: Bearer <bearer_token>" instead.
  TestClient(const Server& server, const std::string& bearer_token);
  ~TestClient();

  // The Accept header of later requests and watches ("application/json" by default).
  void setAccept(std::string accept);

  HttpResponse request(const std::string& method, const std::string& target,
                       const std::string& body = "",
                       const std::string& content_type = "application/json");
  HttpResponse get(const std::string& target) { return request("GET", target); }
  HttpResponse post(const std::string& target, const nlohmann::json& body) {
    return request("POST", target, body.dump());
  }
  HttpResponse put(const std::string& target, const nlohmann::json& body) {
    return request("PUT", target, body.dump());
  }

  // Reads a watch stream: events are collected until `done(events)` is true, the server ends
  // the stream, or `timeout` passes. `on_open` runs once the response header has arrived.
  std::vector<nlohmann::json> watch(
      const std::string& target,
      const std::function<bool(const std::vector<nlohmann::json>&)>& done,
      std::chrono::milliseconds timeout, const std::function<void()>& on_open = {});

  // pods/exec over WebSocket offering `protocol`.
  ExecResult exec(const std::string& target, const std::string& protocol);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ekco::kubesim::testing
