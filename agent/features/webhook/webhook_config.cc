#include "agent/features/webhook/webhook_config.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/ip_address.h"
#include "base/log/log.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "pki/certificate.h"
#include "pki/issue.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;
using webhook::kMutatingWebhookConfigurations;

namespace {

constexpr std::size_t kHistory = 10;

// What the controller owns of a configuration: its labels and webhooks.
json ownedPart(const json& want) {
  return {{"metadata", {{"labels", want["metadata"]["labels"]}}}, {"webhooks", want["webhooks"]}};
}

// The member `key` of `object` is absent, null or an empty object/array.
bool emptyOrAbsent(const json& object, std::string_view key) {
  if (!object.is_object()) return true;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ||
         ((it->is_object() || it->is_array()) && it->empty());
}

// What the controller owns of an EndpointSlice or the Endpoints: labels and endpoints, with a
// list the API dropped for being empty read as empty.
json ownedEndpointsPart(const json& want) {
  json owned = {{"metadata", {{"labels", want["metadata"]["labels"]}}}};
  for (const char* key : {"addressType", "endpoints", "ports", "subsets"}) {
    if (want.contains(key)) owned[key] = want[key];
  }
  return owned;
}

// "create the X" -> "created the X" (the line a done change is logged and recorded as).
std::string done(std::string_view what) {
  const auto space = what.find(' ');
  const std::string_view verb = what.substr(0, space);
  const std::string_view rest = space == std::string_view::npos ? "" : what.substr(space);
  const std::string past =
      verb == "fix" ? "fixed" : std::string(verb) + (verb.ends_with('e') ? "d" : "ed");
  return past + std::string(rest);
}

const kube::Resource& resourceOf(WebhookObject object) {
  switch (object) {
    case WebhookObject::kService:
      return kube::resources::kServices;
    case WebhookObject::kEndpointSlice:
      return kube::resources::kEndpointSlices;
    case WebhookObject::kEndpoints:
      return kube::resources::kEndpoints;
    case WebhookObject::kConfiguration:
      break;
  }
  return kMutatingWebhookConfigurations;
}

}  // namespace

std::string_view webhookBackingName(WebhookBacking backing) {
  return backing == WebhookBacking::kNodes ? "nodes" : "pods";
}

std::string_view webhookStepName(WebhookStep step) {
  switch (step) {
    case WebhookStep::kNone:
      return "none";
    case WebhookStep::kCreate:
      return "create";
    case WebhookStep::kUpdate:
      return "update";
    case WebhookStep::kDelete:
      return "delete";
  }
  return "?";
}

WebhookStep configurationStep(bool wanted, const std::optional<json>& have, const json& want) {
  if (!wanted) return have ? WebhookStep::kDelete : WebhookStep::kNone;
  if (!have) return WebhookStep::kCreate;
  if (!webhook::containsAll(*have, ownedPart(want))) return WebhookStep::kUpdate;
  // A selector ekco does not set narrows what the webhook sees (an older ekco's namespace
  // exclusion, someone's edit): the API defaults both to {}, which selects everything.
  const json& hooks = (*have)["webhooks"];
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    for (const char* key : {"namespaceSelector", "objectSelector"}) {
      if (!want["webhooks"][i].contains(key) && !emptyOrAbsent(hooks[i], key)) {
        return WebhookStep::kUpdate;
      }
    }
  }
  return WebhookStep::kNone;
}

WebhookStep serviceStep(bool wanted, const std::optional<json>& have, const json& want) {
  if (!wanted) return WebhookStep::kNone;
  if (!have) return WebhookStep::kCreate;
  const json& spec = want["spec"];
  if (!webhook::containsAll(*have, {{"spec", {{"ports", spec["ports"]}}}})) {
    return WebhookStep::kUpdate;
  }
  const json& have_spec = kube::jsonField(*have, "spec");
  if (spec.contains("selector")) {
    return have_spec.is_object() && have_spec.contains("selector") &&
                   have_spec["selector"] == spec["selector"]
               ? WebhookStep::kNone
               : WebhookStep::kUpdate;
  }
  return emptyOrAbsent(have_spec, "selector") ? WebhookStep::kNone : WebhookStep::kUpdate;
}

WebhookStep endpointsStep(bool wanted, const std::optional<json>& have, const json& want) {
  if (!wanted) return have ? WebhookStep::kDelete : WebhookStep::kNone;
  if (!have) return WebhookStep::kCreate;
  json seen = *have;
  for (const char* key : {"endpoints", "subsets"}) {
    if (want.contains(key) && emptyOrAbsent(seen, key)) seen[key] = json::array();
  }
  return webhook::containsAll(seen, ownedEndpointsPart(want)) ? WebhookStep::kNone
                                                              : WebhookStep::kUpdate;
}

WebhookConfigController::WebhookConfigController(kube::KubeClient& client, const base::Clock& clock,
                                                 WebhookConfigOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

Result<std::optional<json>> WebhookConfigController::read(const kube::Resource& r,
                                                          std::string_view ns,
                                                          std::string_view name) {
  auto got = client_.get(r, ns, name);
  if (got) return std::optional<json>(std::move(*got));
  if (got.error().code() == ErrorCode::kNotFound) return std::optional<json>();
  return std::move(got).error();
}

void WebhookConfigController::changed(Pass& pass, std::string line, const kube::Resource& r,
                                      std::string_view ns, std::string_view name,
                                      std::string reason, std::string_view action) {
  base::logInfo("pod image overrides webhook",
                {{"change", line}, {"object", fmt::format("{} {}", r.kind, name)}});
  options_.effects.event({.involved_resource = r,
                          .involved_namespace = std::string(ns),
                          .involved_name = std::string(name),
                          .reason = std::move(reason),
                          .message = "ekco: " + line});
  options_.effects.count(action);
  pass.changed = true;
  pass.lines.push_back(line);
  std::lock_guard lock(mu_);
  history_.push_back(
      {{"time", kube::formatRfc3339(clock_.wallNow())}, {"change", std::move(line)}});
  if (history_.size() > kHistory) history_.erase(history_.begin());
}

Result<webhook::CaPair> WebhookConfigController::ensureCa(Pass& pass) {
  // (1) The CA Secret: read; create when missing; on a lost race, read the winner's.
  const std::string name(webhook::kCaSecretName);
  auto have = read(kube::resources::kSecrets, options_.ns, name);
  EKCO_TRY(have);
  if (!*have) {
    const std::string what = fmt::format("create the CA Secret {}/{}", options_.ns, name);
    if (options_.effects.dry_run) {
      pass.lines.push_back("would " + what);
      pass.changed = true;
      return Error("dry run: no CA yet", ErrorCode::kNotFound);
    }
    auto ca = pki::createCa({.common_name = "ekco-webhook-ca", .now = clock_.wallNow()});
    if (!ca) return std::move(ca).error().wrap("make the webhook CA");
    const webhook::CaPair pair{.cert_pem = ca->cert_pem, .key_pem = ca->key_pem};
    EKCO_TRY(options_.effects.fenced(what));
    auto created = client_.create(kube::resources::kSecrets, options_.ns,
                                  webhook::caSecret(options_.ns, pair));
    if (created) {
      changed(pass, "created the CA Secret " + options_.ns + "/" + name, kube::resources::kSecrets,
              options_.ns, name, "WebhookCACreated", "webhook_ca_created");
      have = std::optional<json>(std::move(*created));
    } else if (created.error().code() == ErrorCode::kAlreadyExists) {
      // Another agent (a leader before us) made it meanwhile: theirs is the CA.
      have = read(kube::resources::kSecrets, options_.ns, name);
      EKCO_TRY(have);
      if (!*have) return Error(what + ": created and deleted meanwhile", ErrorCode::kConflict);
    } else {
      return std::move(created).error().wrap(what);
    }
  }
  auto ca = webhook::caFromSecret(**have);
  if (!ca) {
    return std::move(ca).error().wrap(
        "the webhook CA is unusable and is left alone (delete the Secret for a new CA)");
  }
  if (auto parsed = pki::parseCertificate(ca->cert_pem, "webhook CA")) {
    std::lock_guard lock(mu_);
    status_["ca"] = {{"secret", options_.ns + "/" + name},
                     {"subject", parsed->subject},
                     {"not_after", kube::formatRfc3339(parsed->not_after)}};
  }
  return ca;
}

Result<std::vector<WebhookNode>> WebhookConfigController::probeNodes(
    const std::optional<webhook::CaPair>& ca) {
  auto nodes = options_.nodes ? options_.nodes() : controlPlaneNodes();
  if (!nodes) return std::move(nodes).error().wrap("list the control-plane nodes");
  std::vector<WebhookNode> out;
  for (const kube::Node& n : *nodes) {
    if (!n.control_plane) continue;  // only control-plane agents serve (webhook_serving.h)
    WebhookNode node{.name = n.name};
    std::string_view ip;
    for (const kube::NodeAddress& a : n.addresses) {
      if (a.type == "InternalIP") {
        ip = a.address;
        break;
      }
    }
    const auto parsed = base::parseIpAddress(ip);
    if (ip.empty()) {
      node.why = "the node has no InternalIP";
    } else if (!parsed) {
      node.why = "its InternalIP " + base::quoteForMessage(ip) + " is not an IP address";
    } else if (node.address = parsed->text(); !ca) {
      node.why = "no webhook CA yet";
    } else if (!options_.probe) {
      node.why = "not probed";
    } else if (base::Status served = options_.probe({.address = node.address,
                                                     .port = options_.target_port,
                                                     .ca_pem = ca->cert_pem,
                                                     .ns = options_.ns});
               !served) {
      node.why = served.error().message();
    } else {
      node.serving = true;
    }
    out.push_back(std::move(node));
  }
  std::sort(out.begin(), out.end(),
            [](const WebhookNode& a, const WebhookNode& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<kube::Node>> WebhookConfigController::controlPlaneNodes() {
  std::vector<kube::Node> out;
  // kubeadm's role label, and the one before Kubernetes 1.24; a node with both is listed once.
  for (const char* role :
       {"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}) {
    auto list = client_.list(kube::resources::kNodes, "", {.label_selector = role});
    if (!list) return std::move(list).error();
    for (const json& item : kube::jsonField(*list, "items")) {
      auto node = kube::parseNode(item);
      if (!node) return std::move(node).error();
      if (std::none_of(out.begin(), out.end(),
                       [&](const kube::Node& n) { return n.name == node->name; })) {
        out.push_back(std::move(*node));
      }
    }
  }
  return out;
}

Result<WebhookView> WebhookConfigController::observe(Pass& pass) {
  WebhookView view;
  if (options_.enabled) {
    auto ca = ensureCa(pass);
    if (ca) {
      view.ca = std::move(*ca);
    } else if (!(options_.effects.dry_run && ca.error().code() == ErrorCode::kNotFound)) {
      // (a dry run without a CA yet plans without it)
      return std::move(ca).error();
    }
    auto service = read(kube::resources::kServices, options_.ns, webhook::kServiceName);
    if (!service) return std::move(service).error();
    view.service = std::move(*service);
    // The Service's EndpointSlices, whoever made them (a namespace holds a handful).
    auto slices = client_.list(kube::resources::kEndpointSlices, options_.ns);
    if (!slices) return std::move(slices).error().wrap("list the EndpointSlices");
    for (const json& slice : kube::jsonField(*slices, "items")) {
      const json& labels = kube::jsonField(kube::jsonField(slice, "metadata"), "labels");
      if (kube::jsonText(labels, webhook::kServiceNameLabel) == webhook::kServiceName) {
        view.slices.push_back(slice);
      }
    }
    if (options_.backing == WebhookBacking::kNodes) {
      auto nodes = probeNodes(view.ca);
      if (!nodes) return std::move(nodes).error();
      view.nodes = std::move(*nodes);
      auto endpoints = read(kube::resources::kEndpoints, options_.ns, webhook::kServiceName);
      if (!endpoints) return std::move(endpoints).error();
      view.endpoints = std::move(*endpoints);
    }
  }
  auto configuration = read(kMutatingWebhookConfigurations, "", webhook::kConfigurationName);
  if (!configuration) return std::move(configuration).error();
  view.configuration = std::move(*configuration);
  return view;
}

namespace {

// (2) Who backs the Service: the EndpointSlices and the Endpoints.
void planEndpoints(const WebhookView& view, const WebhookConfigOptions& options,
                   WebhookPlan& plan) {
  const bool nodes = options.backing == WebhookBacking::kNodes;
  json status = {{"backing", webhookBackingName(options.backing)}};
  std::vector<webhook::ServingAgent> serving;
  std::vector<std::string> serving_text;
  std::vector<std::string> not_serving_text;
  if (nodes) {
    json listed = json::array();
    for (const WebhookNode& n : view.nodes) {
      listed.push_back({{"node", n.name}, {"address", n.address}, {"serving", n.serving}});
      if (n.serving) {
        serving.push_back({.node = n.name, .address = n.address});
        serving_text.push_back(fmt::format("{} {}", n.name, n.address));
      } else {
        listed.back()["why"] = n.why;
        not_serving_text.push_back(fmt::format("{} ({})", n.name, n.why));
      }
    }
    status["nodes"] = std::move(listed);
  }
  const std::string who =
      fmt::format("serving: {}{}",
                  serving_text.empty() ? "none" : fmt::format("{}", fmt::join(serving_text, ", ")),
                  not_serving_text.empty()
                      ? ""
                      : fmt::format("; not serving: {}", fmt::join(not_serving_text, ", ")));
  auto change = [&](WebhookObject object, WebhookStep step, const std::string& name,
                    const std::optional<json>& have, json want, std::string_view why) {
    const std::string kind = object == WebhookObject::kEndpoints ? "Endpoints" : "EndpointSlice";
    plan.changes.push_back({.object = object,
                            .step = step,
                            .name = name,
                            .what = fmt::format("{} the {} {}/{} ({})", webhookStepName(step), kind,
                                                options.ns, name, why),
                            .want = std::move(want),
                            .resource_version = have ? kube::jsonResourceVersion(*have) : ""});
  };
  // Slices: the controller's leftovers go when ekco lists the agents, ekco's when the pods do.
  std::optional<json> ours[2];
  for (const json& slice : view.slices) {
    const json& meta = kube::jsonField(slice, "metadata");
    const std::string name = kube::jsonText(meta, "name");
    const bool mine =
        kube::jsonText(kube::jsonField(meta, "labels"), webhook::kSliceManagedByLabel) ==
        webhook::kEndpointSliceManager;
    if (mine && nodes && name == webhook::endpointSliceName(false)) {
      ours[0] = slice;
    } else if (mine && nodes && name == webhook::endpointSliceName(true)) {
      ours[1] = slice;
    } else if (mine && !nodes) {
      change(WebhookObject::kEndpointSlice, WebhookStep::kDelete, name, slice, json(),
             "the DaemonSet's pods back the Service");
    } else if (nodes) {
      change(WebhookObject::kEndpointSlice, WebhookStep::kDelete, name, slice, json(),
             mine ? "not a slice ekco keeps" : "made for the Service's former selector");
    }
  }
  if (nodes) {
    bool any_ipv6 = false;
    for (const webhook::ServingAgent& a : serving)
      any_ipv6 = any_ipv6 || webhook::isIpv6Address(a.address);
    for (const bool ipv6 : {false, true}) {
      const json want =
          webhook::desiredEndpointSlice(options.ns, ipv6, serving, options.target_port);
      const bool wanted = !ipv6 || any_ipv6;  // the IPv4 slice always, maybe empty
      const std::optional<json>& have = ours[ipv6 ? 1 : 0];
      const WebhookStep step = endpointsStep(wanted, have, want);
      if (step != WebhookStep::kNone) {
        change(WebhookObject::kEndpointSlice, step, webhook::endpointSliceName(ipv6), have, want,
               step == WebhookStep::kDelete ? "no IPv6 agent serves" : who);
      }
    }
    const json want = webhook::desiredEndpoints(options.ns, serving, options.target_port);
    const WebhookStep step = endpointsStep(true, view.endpoints, want);
    if (step != WebhookStep::kNone) {
      change(WebhookObject::kEndpoints, step, std::string(webhook::kServiceName), view.endpoints,
             want, who);
    }
    status["summary"] = who;
  }
  plan.status["endpoints"] = std::move(status);
}

}  // namespace

WebhookPlan planWebhook(const WebhookView& view, const WebhookConfigOptions& options) {
  WebhookPlan plan;
  if (options.enabled) {
    // (2) The Service the configuration points at.
    const std::string name(webhook::kServiceName);
    const json want = webhook::desiredService(options.ns, options.target_port,
                                              options.backing == WebhookBacking::kPods);
    const WebhookStep step = serviceStep(true, view.service, want);
    plan.status["service"] = {{"name", options.ns + "/" + name},
                              {"present", view.service.has_value()},
                              {"step", webhookStepName(step)}};
    if (step != WebhookStep::kNone) {
      json body = want;
      if (step == WebhookStep::kUpdate) {  // a JSON patch at the version read
        body = json::array(
            {kube::resourceVersionTest(kube::jsonResourceVersion(*view.service)),
             {{"op", "add"}, {"path", "/spec/ports"}, {"value", want["spec"]["ports"]}}});
        if (want["spec"].contains("selector")) {
          body.push_back(
              {{"op", "add"}, {"path", "/spec/selector"}, {"value", want["spec"]["selector"]}});
        } else if (kube::jsonField(*view.service, "spec").contains("selector")) {
          body.push_back({{"op", "remove"}, {"path", "/spec/selector"}});
        }
      }
      plan.changes.push_back(
          {.object = WebhookObject::kService,
           .step = step,
           .name = name,
           .what = fmt::format("{} the Service {}/{} (port 443 -> {}, {})",
                               step == WebhookStep::kCreate ? "create" : "fix", options.ns, name,
                               options.target_port,
                               options.backing == WebhookBacking::kPods
                                   ? "selecting the DaemonSet's pods"
                                   : "no selector: ekco lists the serving agents"),
           .want = std::move(body),
           .resource_version = view.service ? kube::jsonResourceVersion(*view.service) : ""});
    }
    planEndpoints(view, options, plan);
  }
  // (3) The configuration: not planned in a dry run before the CA exists (its caBundle).
  if (options.enabled && !view.ca) return plan;
  const std::string name(webhook::kConfigurationName);
  const json want = options.enabled ? webhook::desiredConfiguration(options.ns, view.ca->cert_pem,
                                                                    options.excluded_namespaces)
                                    : json();
  const WebhookStep step = configurationStep(options.enabled, view.configuration, want);
  plan.status["configuration"] = {{"name", name},
                                  {"present", view.configuration.has_value()},
                                  {"wanted", options.enabled},
                                  {"step", webhookStepName(step)}};
  if (step == WebhookStep::kNone) return plan;
  plan.changes.push_back(
      {.object = WebhookObject::kConfiguration,
       .step = step,
       .name = name,
       .what = step == WebhookStep::kCreate   ? "create the MutatingWebhookConfiguration " + name
               : step == WebhookStep::kUpdate ? "update the MutatingWebhookConfiguration " + name +
                                                    " (caBundle, rules or selector differ)"
                                              : "delete the MutatingWebhookConfiguration " + name +
                                                    " (pod_image_overrides is empty)",
       .want = want,
       .resource_version =
           view.configuration ? kube::jsonResourceVersion(*view.configuration) : ""});
  return plan;
}

base::Status WebhookConfigController::apply(const WebhookChange& change, Pass& pass) {
  if (options_.effects.dry_run) {
    pass.lines.push_back("would " + change.what);
    pass.changed = true;
    return base::ok();
  }
  EKCO_TRY(options_.effects.fenced(change.what));
  // A change by someone else since the read (AlreadyExists, a failed version test, Conflict,
  // NotFound) is not an error: the pass looks again at once.
  auto lost = [&pass](const base::Error& error, std::initializer_list<ErrorCode> races) {
    for (ErrorCode race : races) {
      if (error.code() == race) {
        pass.conflict = true;
        return true;
      }
    }
    return false;
  };
  const kube::Resource& r = resourceOf(change.object);
  const std::string ns = change.object == WebhookObject::kConfiguration ? "" : options_.ns;
  switch (change.step) {
    case WebhookStep::kNone:
      return base::ok();
    case WebhookStep::kCreate: {
      auto created = client_.create(r, ns, change.want);
      if (!created && lost(created.error(), {ErrorCode::kAlreadyExists})) return base::ok();
      if (!created) return std::move(created).error().wrap(change.what);
      break;
    }
    case WebhookStep::kUpdate: {
      if (change.object == WebhookObject::kService) {
        auto patched = client_.patch(r, ns, change.name, kube::PatchType::kJson, change.want);
        if (!patched && lost(patched.error(), {ErrorCode::kInvalidArgument, ErrorCode::kConflict,
                                               ErrorCode::kNotFound})) {
          return base::ok();
        }
        if (!patched) return std::move(patched).error().wrap(change.what);
        break;
      }
      json body = change.want;
      body["metadata"]["resourceVersion"] = change.resource_version;
      auto updated = client_.update(r, ns, body);
      if (!updated && lost(updated.error(), {ErrorCode::kConflict, ErrorCode::kNotFound})) {
        return base::ok();
      }
      if (!updated) return std::move(updated).error().wrap(change.what);
      break;
    }
    case WebhookStep::kDelete: {
      kube::DeleteOptions opts;
      opts.precondition_resource_version = change.resource_version;
      auto removed = client_.remove(r, ns, change.name, opts);
      if (!removed && lost(removed.error(), {ErrorCode::kConflict})) return base::ok();
      if (!removed && removed.error().code() != ErrorCode::kNotFound) {
        return std::move(removed).error().wrap(change.what);
      }
      break;
    }
  }
  const std::string_view step = webhookStepName(change.step);
  const std::string past = step == "create" ? "Created" : step == "update" ? "Updated" : "Deleted";
  std::string reason;
  std::string action;
  switch (change.object) {
    case WebhookObject::kService:
      reason = "WebhookService" + past;
      action = "webhook_service_changed";
      break;
    case WebhookObject::kEndpointSlice:
    case WebhookObject::kEndpoints:
      reason = "WebhookEndpoints" + past;
      action = "webhook_endpoints_changed";
      break;
    case WebhookObject::kConfiguration:
      reason = "WebhookConfiguration" + past;
      action = fmt::format("webhook_configuration_{}d", step);  // created, updated, deleted
      break;
  }
  changed(pass, done(change.what), r, ns, change.name, std::move(reason), action);
  return base::ok();
}

Result<ReconcileResult> WebhookConfigController::reconcile() {
  Pass pass;
  auto view = observe(pass);
  if (!view) return std::move(view).error();
  const WebhookPlan plan = planWebhook(*view, options_);
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, value] : plan.status.items()) status_[key] = value;
  }
  for (const WebhookChange& change : plan.changes) EKCO_TRY(apply(change, pass));
  ReconcileResult result;
  for (const std::string& line : pass.lines) {
    if (!result.plan.empty()) result.plan += "\n";
    result.plan += line;
  }
  if (options_.effects.dry_run && pass.changed) {
    base::logInfo("dry run: pod image overrides webhook", {{"plan", result.plan}});
  }
  result.summary = pass.conflict ? "an object changed meanwhile; looking again"
                   : pass.changed
                       ? (options_.effects.dry_run ? "would change (dry run)" : "changed")
                   : options_.enabled ? "webhook configured"
                                      : "webhook not configured (no overrides)";
  result.requeue_after = pass.conflict ? std::chrono::milliseconds(kAfterConflict)
                         : options_.enabled && options_.backing == WebhookBacking::kNodes
                             ? std::min(options_.interval, options_.probe_interval)
                             : options_.interval;
  return result;
}

json WebhookConfigController::status() const {
  std::lock_guard lock(mu_);
  json out = status_;
  out["enabled"] = options_.enabled;
  out["backing"] = webhookBackingName(options_.backing);
  out["excluded_namespaces"] = options_.excluded_namespaces;
  out["history"] = history_;
  return out;
}

ControllerSpec webhookConfigSpec() {
  return {
      .name = "pod-image-overrides",
      .scope = Scope::kLeader,
      .status_key = "pod_image_overrides",
      .enabled = [](const Config&) { return true; },  // also removes the configuration
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        const Config& c = d.config;
        const bool by_nodes = c.pod_image_overrides_endpoints == "nodes" ||
                              (c.pod_image_overrides_endpoints == "auto" && !d.in_pod);
        return std::make_shared<WebhookConfigController>(
            d.client, d.clock,
            WebhookConfigOptions{
                .ns = c.leader_election_namespace,
                .enabled = !c.pod_image_overrides.empty(),
                .target_port = static_cast<int>(c.pod_image_overrides_port),
                .backing = by_nodes ? WebhookBacking::kNodes : WebhookBacking::kPods,
                .excluded_namespaces = c.pod_image_overrides_excluded_namespaces,
                .probe = webhook::httpsProbe(d.clock, WebhookConfigController::kProbeTimeout),
                .interval =
                    std::chrono::duration_cast<std::chrono::milliseconds>(c.reconcile_interval),
                .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
