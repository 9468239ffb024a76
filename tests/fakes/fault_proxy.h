// A TLS fault proxy for the fault matrix (issue 24): listens on 127.0.0.1 (an ephemeral port),
// terminates TLS with a certificate the clients trust (kubesim's serving certificate, so the
// agents' kubeconfig keeps kubesim's CA and bearer token), and forwards each request to the
// upstream API server over a new verified TLS connection. A fault, switchable at run time from
// any thread, decides what the clients get:
//
//   kPass         requests and responses forwarded unchanged
//   kRefuse       new connections reset at accept (RST); open ones reset
//   kHang         requests read and never answered; open streams go silent. When the fault is
//                 lifted, those connections close without an answer.
//   kSlow         `latency` before the request is forwarded and before each response chunk
//   kReset        the request reaches the upstream; its response is cut with an RST after the
//                 header and half of the first body bytes; open streams are reset
//   k429 / k500   a share `rate` of requests (exactly: a running sum, no randomness) answered
//                 with a synthesised Status (TooManyRequests / InternalError, Retry-After: 1)
//   kTruncate     responses cut short after half of their first body bytes (mid-JSON), then a
//                 clean close; open streams closed
//   kEndlessLine  watch requests answered 200 with one line that never ends (no newline, ever);
//                 open watches closed so their clients come back for it; other requests pass
//
// One request per connection: the proxy asks the upstream for `Connection: close`, so the end
// of a response is the end of its connection. It counts requests (request heads read, and
// connections reset at accept) per second of its own steady clock. HTTP/1.1 only (no ALPN).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::fakes {

enum class FaultMode { kPass, kRefuse, kHang, kSlow, kReset, k429, k500, kTruncate, kEndlessLine };

struct Fault {
  FaultMode mode = FaultMode::kPass;
  double rate = 1.0;                       // k429/k500: share of requests answered so (0-1)
  std::chrono::milliseconds latency{200};  // kSlow: per request and per response chunk
};

// "pass", "refuse", "hang", "slow 200ms", "reset", "429 @50%", ...
std::string describeFault(const Fault& fault);

struct FaultProxyOptions {
  std::string upstream_host = "127.0.0.1";  // an IP address, verified against the certificate
  std::uint16_t upstream_port = 0;
  std::string upstream_ca_pem{};  // trusted for the upstream's certificate
  std::string cert_pem{};         // presented to clients (with its key)
  std::string key_pem{};
};

class FaultProxy {
 public:
  using Clock = std::chrono::steady_clock;

  [[nodiscard]] static base::Result<std::unique_ptr<FaultProxy>> start(FaultProxyOptions options);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::uint16_t port() const;
  std::string url() const;  // "https://127.0.0.1:PORT"

  void setFault(const Fault& fault);
  Fault fault() const;

  // Requests since start (request heads read, plus connections reset at accept).
  std::int64_t requests() const;
  // The largest number of requests in one whole second of the proxy's clock that overlaps
  // [from, to].
  std::int64_t peakPerSecond(Clock::time_point from, Clock::time_point to) const;

  // Closes the listener and every connection and joins all threads. Idempotent.
  void stop();

  class Impl;

 private:
  explicit FaultProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ekco::fakes
