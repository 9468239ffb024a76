// KubeClient over HTTP: builds the request for each verb, maps non-2xx responses to errors
// (kube/errors.h) and retries transient failures (kube/retry.h). Holds no connection state of
// its own; the transport does. Thread-safe if the transport is (CurlTransport is).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "base/clock.h"
#include "kube/client.h"
#include "kube/retry.h"
#include "kube/transport/http_transport.h"

namespace ekco::kube {

struct RestClientOptions {
  // Timeout of each attempt of each call.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(30)};
  RetryPolicy retry{};
  // How to wait between attempts; default std::this_thread::sleep_for. Tests record instead.
  std::function<void(std::chrono::milliseconds)> sleep{};
  // Uniform in [0, 1), for jitter; default a per-client generator seeded from random_device.
  std::function<double()> random{};
  // Events: reportingInstance and source.host (the node name ekco runs on).
  std::string reporting_instance{};
};

// What one call may receive (HttpRequest::max_body_bytes): one object or Status (etcd bounds an
// object at ~1.5 MiB), a page of a paged list (the informers ask for 500 objects of a few KiB to
// ~60 KiB each), an unpaged list; one line of a watch has its own (kube/watch.h). All of them
// together are bounded by the transport's budget (base/memory_budget.h).
inline constexpr std::size_t kMaxObjectResponseBytes = std::size_t{16} << 20;
inline constexpr std::size_t kMaxListPageBytes = std::size_t{32} << 20;
inline constexpr std::size_t kMaxUnpagedListBytes = std::size_t{64} << 20;

class RestClient final : public KubeClient {
 public:
  // The transport and clock must outlive the client. The clock dates Events.
  RestClient(HttpTransport& transport, const base::Clock& clock, RestClientOptions options = {});

  base::Result<Json> get(const Resource& resource, std::string_view ns, std::string_view name,
                         std::string_view subresource = {}) override;
  base::Result<Json> list(const Resource& resource, std::string_view ns,
                          const ListOptions& options = {}) override;
  base::Result<Json> create(const Resource& resource, std::string_view ns,
                            const Json& object) override;
  base::Result<Json> update(const Resource& resource, std::string_view ns, const Json& object,
                            std::string_view subresource = {}) override;
  base::Result<Json> patch(const Resource& resource, std::string_view ns, std::string_view name,
                           PatchType type, const Json& patch,
                           std::string_view subresource = {}) override;
  base::Status remove(const Resource& resource, std::string_view ns, std::string_view name,
                      const DeleteOptions& options = {}) override;
  base::Status evict(std::string_view ns, std::string_view pod,
                     const DeleteOptions& options = {}) override;
  base::Status recordEvent(const EventSpec& event) override;
  base::Result<Json> serverVersion() override;
  base::Result<std::string> listText(const Resource& resource, std::string_view ns,
                                     const ListOptions& options = {}) override;
  base::Status watchText(const Resource& resource, std::string_view ns, const WatchOptions& options,
                         const WatchLineHandler& on_line, CancelToken* cancel = nullptr) override;
  base::Status watch(const Resource& resource, std::string_view ns, const WatchOptions& options,
                     const WatchHandler& handler, CancelToken* cancel = nullptr) override;

 private:
  // Sends with retries; returns the 2xx response or the mapped error of the last attempt.
  base::Result<HttpResponse> execute(HttpRequest request, Idempotency idempotency,
                                     std::string_view op);
  base::Result<Json> executeJson(HttpRequest request, Idempotency idempotency, std::string_view op);

  HttpTransport& transport_;
  const base::Clock& clock_;
  RestClientOptions options_;
};

}  // namespace ekco::kube
