#include "agent/features/webhook/webhook_serving.h"

#include <algorithm>

#include <fmt/format.h>

#include "agent/features/webhook/webhook_objects.h"
#include "base/log/log.h"
#include "kube/decode/timestamp.h"
#include "pki/certificate.h"
#include "pki/issue.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

base::WallTime renewalTime(base::WallTime not_before, base::WallTime not_after) {
  return not_before + (not_after - not_before) * 2 / 3;
}

WebhookServingController::WebhookServingController(kube::KubeClient& client,
                                                   const base::Clock& clock,
                                                   WebhookServingOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

WebhookServingController::~WebhookServingController() {
  if (server_) server_->stop();
}

int WebhookServingController::port() const {
  std::lock_guard lock(mu_);
  return server_ ? server_->port() : 0;
}

std::string WebhookServingController::review(std::string_view body) {
  admission::ReviewOutcome out = admission::reviewPod(body, options_.overrides);
  if (!out.error.empty()) {
    base::logWarn("admission review refused",
                  {{"uid", out.uid}, {"pod", out.pod}, {"error", out.error}});
    std::lock_guard lock(mu_);
    ++refused_;
    last_refusal_ = out.error;
    return out.response;
  }
  if (out.changes.empty()) return out.response;
  std::string changes;
  for (const admission::ImageChange& c : out.changes) {
    if (!changes.empty()) changes += ", ";
    changes += fmt::format("{}: {} -> {}", c.path, c.from, c.to);
  }
  if (options_.dry_run) {
    base::logInfo("dry run: would override pod images",
                  {{"pod", out.pod}, {"operation", out.operation}, {"changes", changes}});
    return admission::reviewPod(body, {}).response;  // the same answer, without a patch
  }
  base::logInfo("pod images overridden",
                {{"pod", out.pod}, {"operation", out.operation}, {"changes", changes}});
  if (options_.count_action) options_.count_action("pod_image_overridden");
  std::lock_guard lock(mu_);
  ++overridden_;
  return out.response;
}

Result<ReconcileResult> WebhookServingController::reconcile() {
  const std::string secret = fmt::format("{}/{}", options_.ns, webhook::kCaSecretName);
  auto got = client_.get(kube::resources::kSecrets, options_.ns, webhook::kCaSecretName);
  if (!got && got.error().code() == ErrorCode::kNotFound) {
    std::lock_guard lock(mu_);
    status_["waiting_for"] = secret;
    return ReconcileResult{
        .summary = "waiting for the CA Secret " + secret + " (the leader creates it)",
        .requeue_after = std::chrono::milliseconds(kWaitForCa)};
  }
  if (!got) return std::move(got).error().wrap("read the webhook CA");
  auto ca = webhook::caFromSecret(*got);
  if (!ca) return std::move(ca).error();
  const base::WallTime now = clock_.wallNow();
  std::string why;
  if (!serving_) {
    why = "first certificate";
  } else if (serving_->ca_pem != ca->cert_pem) {
    why = "the CA changed";
  } else if (now >= serving_->renew_at) {
    why = "renewal (two thirds of its life passed)";
  }
  if (!why.empty()) {
    auto issued =
        pki::issueServingCertificate({.ca_cert_pem = ca->cert_pem,
                                      .ca_key_pem = ca->key_pem,
                                      .common_name = webhook::serviceDnsNames(options_.ns)[0],
                                      .dns_names = webhook::serviceDnsNames(options_.ns),
                                      .now = now,
                                      .validity = options_.validity});
    if (!issued) return std::move(issued).error().wrap("issue the webhook serving certificate");
    auto parsed = pki::parseCertificate(issued->cert_pem, "webhook serving certificate");
    EKCO_TRY(parsed);
    // The chain the server presents: the leaf, then the CA (clients verify against caBundle).
    const TlsCredentials credentials{.cert_pem = issued->cert_pem + ca->cert_pem,
                                     .key_pem = issued->key_pem};
    if (!server_) {
      auto started =
          WebhookServer::start({.address = options_.address,
                                .port = options_.port,
                                .review = [this](std::string_view body) { return review(body); }},
                               credentials);
      if (!started) return std::move(started).error();
      std::lock_guard lock(mu_);
      server_ = std::move(*started);
    } else {
      EKCO_TRY(server_->setCredentials(credentials));
    }
    serving_ = Serving{.ca_pem = ca->cert_pem,
                       .cert_pem = issued->cert_pem,
                       .not_after = parsed->not_after,
                       .renew_at = renewalTime(parsed->not_before, parsed->not_after)};
    base::logInfo("webhook serving certificate issued",
                  {{"reason", why},
                   {"names", webhook::serviceDnsNames(options_.ns)[0]},
                   {"not_after", kube::formatRfc3339(parsed->not_after)},
                   {"port", server_->port()}});
  }
  {
    std::lock_guard lock(mu_);
    status_.erase("waiting_for");
    status_["listening"] = fmt::format("{}:{}", options_.address, server_->port());
    status_["certificate"] = {{"not_after", kube::formatRfc3339(serving_->not_after)},
                              {"renew_at", kube::formatRfc3339(serving_->renew_at)},
                              {"ca_secret", secret}};
  }
  const auto until_renewal = std::chrono::ceil<std::chrono::milliseconds>(serving_->renew_at - now);
  ReconcileResult result{
      .summary = why.empty() ? "serving" : "serving with a new certificate (" + why + ")",
      .requeue_after = std::min(std::max(until_renewal, std::chrono::milliseconds(kWaitForCa)),
                                options_.recheck)};
  return result;
}

json WebhookServingController::status() const {
  std::lock_guard lock(mu_);
  json out = status_;
  out["overrides"] = options_.overrides.size();
  out["pods_overridden"] = overridden_;
  out["reviews_refused"] = refused_;
  out["last_refusal"] = last_refusal_;
  if (server_) {
    const WebhookServerStats s = server_->stats();
    out["server"] = {{"connections", s.connections},
                     {"reviews", s.reviews},
                     {"http_refused", s.refused},
                     {"tls_failures", s.tls_failures},
                     {"busy_refused", s.busy},
                     {"evicted", s.evicted},
                     {"timed_out", s.timed_out},
                     {"memory_reserved", s.reserved},
                     {"memory_reserved_peak", s.reserved_peak}};
  }
  return out;
}

ControllerSpec webhookServingSpec() {
  return {
      .name = "webhook-server",
      .scope = Scope::kNode,
      .status_key = "webhook_server",
      .enabled = [](const Config& c) { return !c.pod_image_overrides.empty(); },
      // Reads the CA's key (Secret ekco-webhook-ca), and whoever serves the webhook may rewrite
      // every pod's images: control-plane agents only (the Service selects only their pods).
      .candidates_only = true,
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        return std::make_shared<WebhookServingController>(
            d.client, d.clock,
            WebhookServingOptions{
                .ns = d.config.leader_election_namespace,
                .overrides = admission::parseImageOverrides(d.config.pod_image_overrides),
                .port = static_cast<int>(d.config.pod_image_overrides_port),
                .dry_run = d.dry_run,
                .count_action = d.count_action});
      },
  };
}

}  // namespace ekco::agent
