#include "agent/features/webhook/webhook_config.h"

#include <fmt/format.h>

#include "base/log/log.h"
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

json ownedServicePart(const json& want) {
  return {{"spec", {{"selector", want["spec"]["selector"]}, {"ports", want["spec"]["ports"]}}}};
}

}  // namespace

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
  return webhook::containsAll(*have, ownedPart(want)) ? WebhookStep::kNone : WebhookStep::kUpdate;
}

WebhookStep serviceStep(bool wanted, const std::optional<json>& have, const json& want) {
  if (!wanted) return WebhookStep::kNone;
  if (!have) return WebhookStep::kCreate;
  return webhook::containsAll(*have, ownedServicePart(want)) ? WebhookStep::kNone
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
  }
  auto configuration = read(kMutatingWebhookConfigurations, "", webhook::kConfigurationName);
  if (!configuration) return std::move(configuration).error();
  view.configuration = std::move(*configuration);
  return view;
}

WebhookPlan planWebhook(const WebhookView& view, const WebhookConfigOptions& options) {
  WebhookPlan plan;
  if (options.enabled) {
    // (2) The Service the configuration points at.
    const std::string name(webhook::kServiceName);
    const json want = webhook::desiredService(options.ns, options.target_port);
    const WebhookStep step = serviceStep(true, view.service, want);
    plan.status["service"] = {{"name", options.ns + "/" + name},
                              {"present", view.service.has_value()},
                              {"step", webhookStepName(step)}};
    if (step != WebhookStep::kNone) {
      plan.changes.push_back(
          {.object = WebhookObject::kService,
           .step = step,
           .what = fmt::format("{} the Service {}/{} (port 443 -> {})",
                               step == WebhookStep::kCreate ? "create" : "fix", options.ns, name,
                               options.target_port),
           .want = want,
           .resource_version = view.service ? kube::jsonResourceVersion(*view.service) : ""});
    }
  }
  // (3) The configuration: not planned in a dry run before the CA exists (its caBundle).
  if (options.enabled && !view.ca) return plan;
  const std::string name(webhook::kConfigurationName);
  const json want =
      options.enabled ? webhook::desiredConfiguration(options.ns, view.ca->cert_pem) : json();
  const WebhookStep step = configurationStep(options.enabled, view.configuration, want);
  plan.status["configuration"] = {{"name", name},
                                  {"present", view.configuration.has_value()},
                                  {"wanted", options.enabled},
                                  {"step", webhookStepName(step)}};
  if (step == WebhookStep::kNone) return plan;
  plan.changes.push_back(
      {.object = WebhookObject::kConfiguration,
       .step = step,
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
  auto lost = [&pass](ErrorCode code, std::initializer_list<ErrorCode> races) {
    for (ErrorCode race : races) {
      if (code == race) {
        pass.conflict = true;
        return true;
      }
    }
    return false;
  };
  const bool create = change.step == WebhookStep::kCreate;
  if (change.object == WebhookObject::kService) {
    const std::string name(webhook::kServiceName);
    if (create) {
      auto created = client_.create(kube::resources::kServices, options_.ns, change.want);
      if (!created && lost(created.error().code(), {ErrorCode::kAlreadyExists})) {
        return base::ok();
      }
      if (!created) return std::move(created).error().wrap(change.what);
    } else {
      const json patch = json::array(
          {kube::resourceVersionTest(change.resource_version),
           {{"op", "add"}, {"path", "/spec/selector"}, {"value", change.want["spec"]["selector"]}},
           {{"op", "add"}, {"path", "/spec/ports"}, {"value", change.want["spec"]["ports"]}}});
      auto patched = client_.patch(kube::resources::kServices, options_.ns, name,
                                   kube::PatchType::kJson, patch);
      if (!patched && lost(patched.error().code(), {ErrorCode::kInvalidArgument,
                                                    ErrorCode::kConflict, ErrorCode::kNotFound})) {
        return base::ok();
      }
      if (!patched) return std::move(patched).error().wrap(change.what);
    }
    changed(pass,
            fmt::format("{} the Service {}/{} (port 443 -> {})", create ? "created" : "fixed",
                        options_.ns, name, options_.target_port),
            kube::resources::kServices, options_.ns, name,
            create ? "WebhookServiceCreated" : "WebhookServiceUpdated", "webhook_service_changed");
    return base::ok();
  }
  const std::string name(webhook::kConfigurationName);
  std::string done;
  std::string reason;
  if (create) {
    auto created = client_.create(kMutatingWebhookConfigurations, "", change.want);
    if (!created && lost(created.error().code(), {ErrorCode::kAlreadyExists})) {
      return base::ok();
    }
    if (!created) return std::move(created).error().wrap(change.what);
    done = "created";
    reason = "WebhookConfigurationCreated";
  } else if (change.step == WebhookStep::kUpdate) {
    json body = change.want;
    body["metadata"]["resourceVersion"] = change.resource_version;
    auto updated = client_.update(kMutatingWebhookConfigurations, "", body);
    if (!updated && lost(updated.error().code(), {ErrorCode::kConflict, ErrorCode::kNotFound})) {
      return base::ok();
    }
    if (!updated) return std::move(updated).error().wrap(change.what);
    done = "updated";
    reason = "WebhookConfigurationUpdated";
  } else {
    kube::DeleteOptions opts;
    opts.precondition_resource_version = change.resource_version;
    auto removed = client_.remove(kMutatingWebhookConfigurations, "", name, opts);
    if (!removed && lost(removed.error().code(), {ErrorCode::kConflict})) return base::ok();
    if (!removed && removed.error().code() != ErrorCode::kNotFound) {
      return std::move(removed).error().wrap(change.what);
    }
    done = "deleted";
    reason = "WebhookConfigurationDeleted";
  }
  changed(pass, done + change.what.substr(change.what.find(' ')), kMutatingWebhookConfigurations,
          "", name, reason, "webhook_configuration_" + done);
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
  result.requeue_after =
      pass.conflict ? std::chrono::milliseconds(kAfterConflict) : options_.interval;
  return result;
}

json WebhookConfigController::status() const {
  std::lock_guard lock(mu_);
  json out = status_;
  out["enabled"] = options_.enabled;
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
        return std::make_shared<WebhookConfigController>(
            d.client, d.clock,
            WebhookConfigOptions{.ns = d.config.leader_election_namespace,
                                 .enabled = !d.config.pod_image_overrides.empty(),
                                 .target_port = static_cast<int>(d.config.pod_image_overrides_port),
                                 .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     d.config.reconcile_interval),
                                 .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
