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
//       differ (an EKCO-era Service selects app=ekc-operator on port 443). Who backs it
//       (pod_image_overrides_endpoints):
//         pods   the DaemonSet's pods, by selector: the cluster's EndpointSlice controller keeps
//                its endpoints; EndpointSlices ekco made (below) are deleted;
//         nodes  agents from the packages, on the hosts: the Service has no selector, and ekco
//                keeps its endpoints. Every pass probes each control-plane node's agent at the
//                node's InternalIP and pod_image_overrides_port as the apiserver would call it
//                (webhook_probe.h) and lists those that answer — and only those — in the
//                EndpointSlice <ns>/ekco-webhook-ipv4 (-ipv6 for IPv6 nodes) and the Endpoints
//                <ns>/ekco; the EndpointSlice controller's leftover slices of the Service (from
//                when it had a selector) are deleted. A node whose agent stops answering is out
//                of the endpoints at the next pass (every probe_interval, 10 s). The nodes are
//                listed by their role labels each pass (no watch: a node change does not wake
//                the controller, whose passes are cheap but not free).
//   (3) the MutatingWebhookConfiguration pod-image-overrides.kurl.sh: created when missing,
//       replaced (PUT at the resourceVersion read) when what ekco sets differs — a caBundle that
//       is not the CA's, a drifted rule or selector; fields the API defaulted are not drift.
// Without overrides: the configuration is deleted when present (the Secret, the Service and its
// endpoints stay: they cost nothing and keep the CA stable if overrides come back).
// The configuration sends the pods of every namespace (EKCO's scope) but those of
// pod_image_overrides_excluded_namespaces; its failurePolicy Ignore and 10 s timeout let pods
// through unchanged when no agent answers.
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
#include "agent/features/webhook/webhook_probe.h"
#include "base/clock.h"
#include "kube/client.h"
#include "kube/decode/objects.h"

namespace ekco::agent {

// What to do with one object, from what is there (nullopt: absent) and what is wanted.
enum class WebhookStep { kNone, kCreate, kUpdate, kDelete };
std::string_view webhookStepName(WebhookStep step);

// Who backs the Service (config pod_image_overrides_endpoints, "auto" resolved).
enum class WebhookBacking { kPods, kNodes };
std::string_view webhookBackingName(WebhookBacking backing);

// The configuration: absent+wanted create, present+unwanted delete, present+wanted but not
// containing everything `want` sets (or with a namespace or object selector `want` does not
// set) update.
WebhookStep configurationStep(bool wanted, const std::optional<nlohmann::json>& have,
                              const nlohmann::json& want);
// The Service: created when missing, updated when its spec lacks what `want` sets or has a
// selector `want` does not set; never deleted.
WebhookStep serviceStep(bool wanted, const std::optional<nlohmann::json>& have,
                        const nlohmann::json& want);
// An EndpointSlice or the Endpoints: created, updated when the endpoints, ports or labels differ
// (an empty list the API dropped is no difference), deleted when unwanted.
WebhookStep endpointsStep(bool wanted, const std::optional<nlohmann::json>& have,
                          const nlohmann::json& want);

// A control-plane node as the pass probed its agent.
struct WebhookNode {
  std::string name{};
  std::string address{};  // its InternalIP ("" when it has none: not probed)
  bool serving = false;
  std::string why{};  // why not serving
};

// What a pass has seen: the CA (nullopt in a dry run before the Secret exists), the Service and
// the configuration as the API has them (nullopt: absent); with overrides, the Service's
// EndpointSlices (labelled kubernetes.io/service-name=ekco, whoever made them); backed by nodes,
// the control-plane nodes as probed and the Endpoints <ns>/ekco.
struct WebhookView {
  std::optional<webhook::CaPair> ca{};
  std::optional<nlohmann::json> service{};
  std::optional<nlohmann::json> configuration{};
  std::vector<nlohmann::json> slices{};
  std::vector<WebhookNode> nodes{};
  std::optional<nlohmann::json> endpoints{};
};

enum class WebhookObject { kService, kEndpointSlice, kEndpoints, kConfiguration };

// One change, in the order the plan makes them.
struct WebhookChange {
  WebhookObject object = WebhookObject::kService;
  WebhookStep step = WebhookStep::kNone;
  std::string name{};     // the object's name
  std::string what{};     // "create the Service kurl/ekco (port 443 -> 6445)"
  nlohmann::json want{};  // the object ekco writes (create, update); a Service update's JSON patch
  std::string resource_version{};  // update, delete: the version read (a change since: conflict)
};

struct WebhookPlan {
  std::vector<WebhookChange> changes{};
  // Each object as seen and the step chosen, for /status ("service", "configuration").
  nlohmann::json status = nlohmann::json::object();
};

struct WebhookConfigOptions;
// The decision, pure: the Service and its endpoints only with overrides (never deleted); the
// configuration with overrides and a CA, or deleted without overrides; a dry run without a CA
// yet plans no configuration (its caBundle is not known).
WebhookPlan planWebhook(const WebhookView& view, const WebhookConfigOptions& options);

struct WebhookConfigOptions {
  std::string ns = "kurl";
  bool enabled = false;  // pod_image_overrides is not empty
  int target_port = 6445;
  WebhookBacking backing = WebhookBacking::kPods;
  std::vector<std::string> excluded_namespaces{};
  // Backed by nodes: the control-plane nodes (unset: listed from the API by their role labels,
  // each pass) and the question whether one agent serves (webhook::httpsProbe).
  std::function<base::Result<std::vector<kube::Node>>()> nodes{};
  webhook::Probe probe{};
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  // Backed by nodes: how often the agents are probed (the pass runs this often).
  std::chrono::milliseconds probe_interval{std::chrono::seconds(10)};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class WebhookConfigController final : public Controller {
 public:
  static constexpr std::chrono::seconds kAfterConflict{1};
  // One probe's bound: the apiserver's webhook timeout is 10 s, and an agent that takes longer
  // than this to answer a pod without containers is not one to send pods to.
  static constexpr std::chrono::seconds kProbeTimeout{2};

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
  // Backed by nodes: the control-plane nodes, each agent probed (with the CA; without one, a
  // dry run before the Secret exists, none is).
  base::Result<std::vector<kube::Node>> controlPlaneNodes();
  base::Result<std::vector<WebhookNode>> probeNodes(const std::optional<webhook::CaPair>& ca);
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
