#include "agent/features/api_address/change_leader.h"

#include <fmt/format.h>

#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"

namespace ekco::agent {

using api_address::ChangeDecision;
using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

bool ready(const kube::NodeRecord& n) {
  const kube::ConditionRecord* c = n.condition("Ready");
  return c != nullptr && c->status == "True";
}

}  // namespace

ChangeLeaderController::ChangeLeaderController(std::function<Result<std::optional<json>>()> request,
                                               std::function<ObservedNodes()> nodes,
                                               kube::KubeClient& client, const base::Clock& clock,
                                               ChangeLeaderOptions options)
    : request_(std::move(request)),
      nodes_(std::move(nodes)),
      client_(client),
      clock_(clock),
      options_(std::move(options)) {}

Result<ReconcileResult> ChangeLeaderController::reconcile() {
  ReconcileResult result;
  result.requeue_after = options_.interval;
  auto config_map = request_();
  if (!config_map) return std::move(config_map).error();
  if (!*config_map) {
    std::lock_guard lock(mu_);
    status_ = {{"request", nullptr}};
    result.summary = "no change of the API address requested";
    return result;
  }
  const json& cm = **config_map;
  const json& data = kube::jsonField(cm, "data");
  auto request = api_address::parseRequest(cm);
  if (!request) return std::move(request).error().wrap("the request is left alone");
  const ObservedNodes observed = nodes_();
  if (!observed.synced) {
    result.summary = "waiting for the node cache";
    result.requeue_after = options_.active_interval;
    return result;
  }
  api_address::ChangeView view{
      .request = *request, .result = kube::jsonText(data, "result"), .now = clock_.wallNow()};
  const json stored_progress = json::parse(kube::jsonText(data, "progress"), nullptr, false);
  view.recorded_done = api_address::doneSteps(stored_progress, request->id);
  for (const kube::NodeRecord& n : observed.nodes) {
    api_address::ChangeNode node{
        .name = n.name.str(), .control_plane = n.control_plane, .ready = ready(n)};
    if (auto t = n.annotation(api_address::kTaskAnnotation)) {
      if (auto parsed = api_address::parseTask(*t)) node.task = std::move(*parsed);
    }
    if (auto r = n.annotation(api_address::kResultAnnotation)) {
      if (auto parsed = api_address::parseResult(*r)) node.result = std::move(*parsed);
    }
    view.nodes.push_back(std::move(node));
  }
  const ChangeDecision d = api_address::planChange(view, options_.change);
  {
    std::lock_guard lock(mu_);
    status_ = {{"request",
                {{"id", request->id},
                 {"server", request->server},
                 {"old_server", request->old_server},
                 {"internal", request->internal},
                 {"drop_old_sans", request->drop_old_sans},
                 {"exclude", request->exclude}}},
               {"result", view.result},
               {"progress", d.kind == ChangeDecision::Kind::kIdle ? stored_progress : d.progress},
               {"summary", d.summary}};
  }
  result.summary = d.summary;
  if (d.kind == ChangeDecision::Kind::kIdle) return result;
  result.requeue_after = options_.active_interval;

  // The ConfigMap first: the journal (and the result).
  const std::string progress_text = kube::jsonDump(d.progress);
  const bool finish = d.kind == ChangeDecision::Kind::kFinish;
  if (progress_text != kube::jsonText(data, "progress") || finish) {
    json patch =
        json::array({kube::resourceVersionTest(kube::jsonResourceVersion(cm)),
                     {{"op", "add"}, {"path", "/data/progress"}, {"value", progress_text}}});
    if (finish) patch.push_back({{"op", "add"}, {"path", "/data/result"}, {"value", d.result}});
    const std::string what = finish ? "record the end of the API address change: " + d.result
                                    : "record the API address change's progress";
    if (options_.effects.dry_run) {
      result.plan = "would " + what;
      return result;
    }
    EKCO_TRY(options_.effects.fenced(what));
    auto patched = client_.patch(kube::resources::kConfigMaps, options_.ns,
                                 api_address::kChangeConfigMap, kube::PatchType::kJson, patch);
    if (!patched) {
      const ErrorCode code = patched.error().code();
      if (code == ErrorCode::kInvalidArgument || code == ErrorCode::kConflict ||
          code == ErrorCode::kNotFound) {
        result.summary = "the request changed meanwhile; looking again";
        return result;  // the watch brings the new version
      }
      return std::move(patched).error().wrap(what);
    }
    if (finish) {
      for (const std::string& node : d.withdraw) {
        const json withdraw = {
            {"metadata",
             {{"annotations", {{std::string(api_address::kTaskAnnotation), nullptr}}}}}};
        if (auto withdrawn =
                client_.patch(kube::resources::kNodes, "", node, kube::PatchType::kMerge, withdraw);
            !withdrawn) {
          base::logWarn(
              "api address change: a task not withdrawn (its node does not start it "
              "once it is older than a step may take)",
              {{"node", node}, {"error", withdrawn.error().message()}});
        }
      }
      const bool success = d.result == api_address::kSuccess;
      base::logInfo("api address change ended",
                    {{"server", request->server}, {"result", d.result}});
      options_.effects.event(
          {.involved_resource = success ? kube::resources::kConfigMaps : kube::resources::kNodes,
           .involved_namespace = success ? options_.ns : "",
           .involved_name = success ? std::string(api_address::kChangeConfigMap) : d.node,
           .reason = success ? "ApiAddressChanged" : "ApiAddressChangeFailed",
           .message = success ? "ekco: every node uses " + request->server
                              : "ekco: the change to " + request->server + " stopped: " + d.result,
           .type = success ? "Normal" : "Warning"});
      options_.effects.count(success ? "api_address_changed" : "api_address_change_failed");
      return result;
    }
  }
  if (d.kind != ChangeDecision::Kind::kAssign) return result;
  // Then the node's task.
  const std::string what = fmt::format("give {} the step {} of the change to {}", d.node,
                                       api_address::stepName(d.task.step), request->server);
  if (options_.effects.dry_run) {
    result.plan = "would " + what;
    return result;
  }
  EKCO_TRY(options_.effects.fenced(what));
  const json patch = {
      {"metadata",
       {{"annotations",
         {{std::string(api_address::kTaskAnnotation), api_address::renderTask(d.task)}}}}}};
  auto patched = client_.patch(kube::resources::kNodes, "", d.node, kube::PatchType::kMerge, patch);
  if (!patched) return std::move(patched).error().wrap(what);
  base::logInfo("api address change", {{"node", d.node},
                                       {"step", api_address::stepName(d.task.step)},
                                       {"server", request->server}});
  options_.effects.event({.involved_resource = kube::resources::kNodes,
                          .involved_name = d.node,
                          .reason = "ApiAddressStep",
                          .message = "ekco: " + what});
  options_.effects.count("api_address_step");
  return result;
}

json ChangeLeaderController::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

WatchSpec apiAddressRequestWatch() {
  return {.key = "api-address-request",
          .scope = Scope::kLeader,
          .build = informerWatch<json>([](const WatchContext& c) {
            return InformerSource<json>{
                .resource = kube::resources::kConfigMaps,
                .ns = c.config.leader_election_namespace,
                .field_selector = "metadata.name=" + std::string(api_address::kChangeConfigMap),
                .project = [](const json& o) -> Result<json> { return o; },
                .label = "api-address-request",
                .what = "API address change request"};
          })};
}

ControllerSpec changeLeaderSpec() {
  return {
      .name = "api-address",
      .scope = Scope::kLeader,
      .status_key = "api_address",
      .enabled = [](const Config&) { return true; },
      .watches = {apiAddressRequestWatch(), clusterNodesWatch()},
      .pauses_in_maintenance = true,
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        auto watch = observeWatch<json>(d.watches, apiAddressRequestWatch());
        if (!watch) return std::move(watch).error();
        auto request = [observe = std::move(*watch)]() -> Result<std::optional<json>> {
          Observed<json> seen = observe();
          if (!seen.synced) {
            return Error("the request's watch has not listed yet", ErrorCode::kUnavailable);
          }
          if (seen.items.empty()) return std::optional<json>();
          return std::optional<json>(std::move(seen.items.front()));
        };
        return std::make_shared<ChangeLeaderController>(
            std::move(request), std::move(*nodes), d.client, d.clock,
            ChangeLeaderOptions{.ns = d.config.leader_election_namespace,
                                .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    d.config.reconcile_interval),
                                .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
