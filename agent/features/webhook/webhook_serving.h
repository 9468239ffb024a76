// The pod image overrides webhook on this node (node controller `webhook-server`, enabled when
// `pod_image_overrides` is not empty): the HTTPS server (agent/features/webhook/webhook_server.h)
// answering the apiserver's AdmissionReviews with agent/features/webhook/image_overrides.h, and its
// certificate.
//
// Each pass reads the CA Secret <ns>/ekco-webhook-ca (made by the leader: webhook_config.h) from
// the API and, when this agent has no serving certificate yet, the CA changed, or the
// certificate is two thirds through its life, issues a new one from that CA for
// ekco.<ns>.svc and ekco.<ns>.svc.cluster.local (a new key each time, kept only in memory) and
// hands it to the server: started with the first certificate, swapped in without a restart
// after (connections open at that moment keep the old one). Until the Secret exists the server
// does not listen (the configuration's failurePolicy Ignore lets pods through unchanged).
//
// Every review is answered; a malformed one is logged as one line ("admission review refused"),
// a pod whose images were replaced as one line ("pod images overridden") and counted in
// ekco_actions_total{kind="pod_image_overridden"}. dry_run: reviews are answered allowed without
// a patch, and the would-be replacement is logged.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "agent/features/webhook/image_overrides.h"
#include "agent/features/webhook/webhook_server.h"
#include "base/clock.h"
#include "kube/client.h"

namespace ekco::agent {

struct WebhookServingOptions {
  std::string ns = "kurl";
  admission::ImageOverrides overrides{};
  // Where the server listens (a test: "127.0.0.1" and port 0).
  std::string address = "::";
  int port = kDefaultWebhookPort;
  std::chrono::seconds validity{std::chrono::hours(24 * 90)};
  // How often the CA Secret is read again (a replaced CA is served within this).
  std::chrono::milliseconds recheck{std::chrono::minutes(1)};
  bool dry_run = false;
  std::function<void(std::string_view kind)> count_action{};
};

// When a certificate valid from not_before to not_after is renewed: two thirds through.
base::WallTime renewalTime(base::WallTime not_before, base::WallTime not_after);

class WebhookServingController final : public Controller {
 public:
  static constexpr std::chrono::seconds kWaitForCa{5};

  WebhookServingController(kube::KubeClient& client, const base::Clock& clock,
                           WebhookServingOptions options);
  ~WebhookServingController() override;

  std::string name() const override { return "webhook-server"; }
  base::Result<ReconcileResult> reconcile() override;
  nlohmann::json status() const override;

  // The answer to one request body (what the server calls; thread-safe).
  std::string review(std::string_view body);
  // The port listened on, 0 before the server started.
  int port() const;

 private:
  struct Serving {
    std::string ca_pem;
    std::string cert_pem;
    base::WallTime not_after{};
    base::WallTime renew_at{};
  };

  kube::KubeClient& client_;
  const base::Clock& clock_;
  WebhookServingOptions options_;
  std::unique_ptr<WebhookServer> server_;
  std::optional<Serving> serving_;

  mutable std::mutex mu_;
  nlohmann::json status_ = nlohmann::json::object();
  std::uint64_t overridden_ = 0;
  std::uint64_t refused_ = 0;
  std::string last_refusal_;
};

ControllerSpec webhookServingSpec();

}  // namespace ekco::agent
