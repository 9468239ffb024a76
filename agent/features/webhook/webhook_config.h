// The pod image overrides webhook's cluster objects (leader controller `pod-image-overrides`,
// always registered: it must also remove the configuration once `pod_image_overrides` is empty).
// EKCO's pkg/webhook/server.go (../shared/reference/ekco.md §3.8) made a new self-signed
// certificate on every start and rewrote the configuration; ekco keeps one CA in a Secret so
// every agent serves the same chain, and the configuration's caBundle stays that CA.
//
// With overrides configured, each pass:
//   (1) the CA Secret <ns>/ekco-webhook-ca: created with a new CA when missing (create only: a
//       concurrent create by another agent is AlreadyExists, and its CA is read and used; an
//       existing Secret is never overwritten — an unreadable one stops the pass with an error
//       saying so, and the configuration is left as it is);
//   (2) the Service <ns>/ekco: created when missing; its selector and ports put back when they
//       differ (an EKCO-era Service selects app=ekc-operator on port 443);
//   (3) the MutatingWebhookConfiguration pod-image-overrides.kurl.sh: created when missing,
//       replaced (PUT at the resourceVersion read) when what ekco sets differs — a caBundle that
//       is not the CA's, a drifted rule or selector; fields the API defaulted are not drift.
// Without overrides: the configuration is deleted when present (the Secret and the Service stay:
// they cost nothing and keep the CA stable if overrides come back).
//
// The shape (issue 36's controller contract): observe() makes sure of the CA (1) and reads the
// Service and the configuration into a WebhookView; planWebhook(view), pure, says what to change
// (2, 3); apply() makes each change through the options' Effects.
//
// Every change: the fencing check right before it, logged, an Event (on the configuration, or on
// the Secret/Service), ekco_actions_total. dry_run: the plan in /status and the log, no write.
// A pass runs at start, on leadership and every reconcile_interval (someone deleting the
// configuration gets it back within that).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/features/webhook/webhook_objects.h"
#include "base/clock.h"
#include "kube/client.h"

namespace ekco::agent {

// What to do with one object, from what is there (nullopt: absent) and what is wanted.
enum class WebhookStep { kNone, kCreate, kUpdate, kDelete };
std::string_view webhookStepName(WebhookStep step);

// The configuration: absent+wanted create, present+unwanted delete, present+wanted but not
// containing everything `want` sets update.
WebhookStep configurationStep(bool wanted, const std::optional<nlohmann::json>& have,
                              const nlohmann::json& want);
// The Service: created when missing, updated when its spec lacks what `want` sets; never deleted.
WebhookStep serviceStep(bool wanted, const std::optional<nlohmann::json>& have,
                        const nlohmann::json& want);

// What a pass has seen: the CA (nullopt in a dry run before the Secret exists), the Service and
// the configuration as the API has them (nullopt: absent).
struct WebhookView {
  std::optional<webhook::CaPair> ca{};
  std::optional<nlohmann::json> service{};
  std::optional<nlohmann::json> configuration{};
};

enum class WebhookObject { kService, kConfiguration };

// One change, in the order the plan makes them.
struct WebhookChange {
  WebhookObject object = WebhookObject::kService;
  WebhookStep step = WebhookStep::kNone;
  std::string what{};     // "create the Service kurl/ekco (port 443 -> 6445)"
  nlohmann::json want{};  // the object ekco writes (create, update; the Service's patch values)
  std::string resource_version{};  // update, delete: the version read (a change since: conflict)
};

struct WebhookPlan {
  std::vector<WebhookChange> changes{};
  // Each object as seen and the step chosen, for /status ("service", "configuration").
  nlohmann::json status = nlohmann::json::object();
};

struct WebhookConfigOptions;
// The decision, pure: the Service only with overrides (never deleted); the configuration with
// overrides and a CA, or deleted without overrides; a dry run without a CA yet plans no
// configuration (its caBundle is not known).
WebhookPlan planWebhook(const WebhookView& view, const WebhookConfigOptions& options);

struct WebhookConfigOptions {
  std::string ns = "kurl";
  bool enabled = false;  // pod_image_overrides is not empty
  int target_port = 6445;
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class WebhookConfigController final : public Controller {
 public:
  static constexpr std::chrono::seconds kAfterConflict{1};

  WebhookConfigController(kube::KubeClient& client, const base::Clock& clock,
                          WebhookConfigOptions options);

  std::string name() const override { return "pod-image-overrides"; }
  base::Result<ReconcileResult> reconcile() override;
  nlohmann::json status() const override;

 private:
  struct Pass {
    std::vector<std::string> lines;  // the plan / what was done
    bool changed = false;
    bool conflict = false;
  };
  base::Result<std::optional<nlohmann::json>> read(const kube::Resource& r, std::string_view ns,
                                                   std::string_view name);
  // (1) the CA, then the Service and the configuration as they are.
  base::Result<WebhookView> observe(Pass& pass);
  base::Result<webhook::CaPair> ensureCa(Pass& pass);
  // (2, 3) each change of the plan.
  base::Status apply(const WebhookChange& change, Pass& pass);
  void changed(Pass& pass, std::string line, const kube::Resource& r, std::string_view ns,
               std::string_view name, std::string reason, std::string_view action);

  kube::KubeClient& client_;
  const base::Clock& clock_;
  WebhookConfigOptions options_;

  mutable std::mutex mu_;
  nlohmann::json status_ = nlohmann::json::object();
  std::vector<nlohmann::json> history_;
};

ControllerSpec webhookConfigSpec();

}  // namespace ekco::agent
