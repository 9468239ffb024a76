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

struct WebhookConfigOptions {
  std::string ns = "kurl";
  bool enabled = false;  // pod_image_overrides is not empty
  int target_port = 6445;
  bool dry_run = false;
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  std::function<bool()> is_leader_fresh{};
  std::function<void(const kube::EventSpec& event)> record_event{};
  std::function<void(std::string_view kind)> count_action{};
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
  base::Result<webhook::CaPair> ensureCa(Pass& pass);
  base::Status ensureService(Pass& pass);
  base::Status ensureConfiguration(Pass& pass, const std::optional<webhook::CaPair>& ca);
  base::Status fenced(std::string_view what) const;
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
