#include "agent/features/webhook/webhook_config.h"

#include <fmt/format.h>

#include "base/log.h"
#include "kube/json_fields.h"
#include "kube/timestamp.h"
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

base::Status WebhookConfigController::fenced(std::string_view what) const {
  if (options_.is_leader_fresh && !options_.is_leader_fresh()) {
    return Error(fmt::format("{}: not done: this agent's leadership is not fresh", what),
                 ErrorCode::kUnavailable);
  }
  return base::ok();
}

void WebhookConfigController::changed(Pass& pass, std::string line, const kube::Resource& r,
                                      std::string_view ns, std::string_view name,
                                      std::string reason, std::string_view action) {
  base::logInfo("pod image overrides webhook",
                {{"change", line}, {"object", fmt::format("{} {}", r.kind, name)}});
  if (options_.record_event) {
    options_.record_event({.involved_resource = r,
                           .involved_namespace = std::string(ns),
                           .involved_name = std::string(name),
                           .reason = std::move(reason),
                           .message = "ekco: " + line});
  }
  if (options_.count_action) options_.count_action(action);
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
    if (options_.dry_run) {
      pass.lines.push_back("would " + what);
      pass.changed = true;
      return Error("dry run: no CA yet", ErrorCode::kNotFound);
    }
    auto ca = pki::createCa({.common_name = "ekco-webhook-ca", .now = clock_.wallNow()});
    if (!ca) return std::move(ca).error().wrap("make the webhook CA");
    const webhook::CaPair pair{.cert_pem = ca->cert_pem, .key_pem = ca->key_pem};
    EKCO_TRY(fenced(what));
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

base::Status WebhookConfigController::ensureService(Pass& pass) {
  // (2) The Service the configuration points at.
  const std::string name(webhook::kServiceName);
  const json want = webhook::desiredService(options_.ns, options_.target_port);
  auto have = read(kube::resources::kServices, options_.ns, name);
  EKCO_TRY(have);
  const WebhookStep step = serviceStep(true, *have, want);
  {
    std::lock_guard lock(mu_);
    status_["service"] = {{"name", options_.ns + "/" + name},
                          {"present", have->has_value()},
                          {"step", webhookStepName(step)}};
  }
  if (step == WebhookStep::kNone) return base::ok();
  const std::string what = fmt::format("{} the Service {}/{} (port 443 -> {})",
                                       step == WebhookStep::kCreate ? "create" : "fix", options_.ns,
                                       name, options_.target_port);
  if (options_.dry_run) {
    pass.lines.push_back("would " + what);
    pass.changed = true;
    return base::ok();
  }
  EKCO_TRY(fenced(what));
  if (step == WebhookStep::kCreate) {
    auto created = client_.create(kube::resources::kServices, options_.ns, want);
    if (!created && created.error().code() == ErrorCode::kAlreadyExists) {
      pass.conflict = true;
      return base::ok();
    }
    if (!created) return std::move(created).error().wrap(what);
  } else {
    const json patch = json::array(
        {kube::resourceVersionTest(kube::jsonResourceVersion(**have)),
         {{"op", "add"}, {"path", "/spec/selector"}, {"value", want["spec"]["selector"]}},
         {{"op", "add"}, {"path", "/spec/ports"}, {"value", want["spec"]["ports"]}}});
    auto patched =
        client_.patch(kube::resources::kServices, options_.ns, name, kube::PatchType::kJson, patch);
    if (!patched) {
      const ErrorCode code = patched.error().code();
      if (code == ErrorCode::kInvalidArgument || code == ErrorCode::kConflict ||
          code == ErrorCode::kNotFound) {
        pass.conflict = true;
        return base::ok();
      }
      return std::move(patched).error().wrap(what);
    }
  }
  changed(pass,
          fmt::format("{} the Service {}/{} (port 443 -> {})",
                      step == WebhookStep::kCreate ? "created" : "fixed", options_.ns, name,
                      options_.target_port),
          kube::resources::kServices, options_.ns, name,
          step == WebhookStep::kCreate ? "WebhookServiceCreated" : "WebhookServiceUpdated",
          "webhook_service_changed");
  return base::ok();
}

base::Status WebhookConfigController::ensureConfiguration(
    Pass& pass, const std::optional<webhook::CaPair>& ca) {
  // (3) The configuration itself.
  const std::string name(webhook::kConfigurationName);
  auto have = read(kMutatingWebhookConfigurations, "", name);
  EKCO_TRY(have);
  const json want =
      options_.enabled && ca ? webhook::desiredConfiguration(options_.ns, ca->cert_pem) : json();
  const WebhookStep step = configurationStep(options_.enabled, *have, want);
  {
    std::lock_guard lock(mu_);
    status_["configuration"] = {{"name", name},
                                {"present", have->has_value()},
                                {"wanted", options_.enabled},
                                {"step", webhookStepName(step)}};
  }
  if (step == WebhookStep::kNone) return base::ok();
  const std::string what =
      step == WebhookStep::kCreate ? "create the MutatingWebhookConfiguration " + name
      : step == WebhookStep::kUpdate
          ? "update the MutatingWebhookConfiguration " + name +
                " (caBundle, rules or selector differ)"
          : "delete the MutatingWebhookConfiguration " + name + " (pod_image_overrides is empty)";
  if (options_.dry_run) {
    pass.lines.push_back("would " + what);
    pass.changed = true;
    return base::ok();
  }
  EKCO_TRY(fenced(what));
  std::string done;
  std::string reason;
  if (step == WebhookStep::kCreate) {
    auto created = client_.create(kMutatingWebhookConfigurations, "", want);
    if (!created && created.error().code() == ErrorCode::kAlreadyExists) {
      pass.conflict = true;
      return base::ok();
    }
    if (!created) return std::move(created).error().wrap(what);
    done = "created";
    reason = "WebhookConfigurationCreated";
  } else if (step == WebhookStep::kUpdate) {
    json body = want;
    body["metadata"]["resourceVersion"] = kube::jsonResourceVersion(**have);
    auto updated = client_.update(kMutatingWebhookConfigurations, "", body);
    if (!updated && (updated.error().code() == ErrorCode::kConflict ||
                     updated.error().code() == ErrorCode::kNotFound)) {
      pass.conflict = true;
      return base::ok();
    }
    if (!updated) return std::move(updated).error().wrap(what);
    done = "updated";
    reason = "WebhookConfigurationUpdated";
  } else {
    kube::DeleteOptions opts;
    opts.precondition_resource_version = kube::jsonResourceVersion(**have);
    auto removed = client_.remove(kMutatingWebhookConfigurations, "", name, opts);
    if (!removed && removed.error().code() == ErrorCode::kConflict) {
      pass.conflict = true;
      return base::ok();
    }
    if (!removed && removed.error().code() != ErrorCode::kNotFound) {
      return std::move(removed).error().wrap(what);
    }
    done = "deleted";
    reason = "WebhookConfigurationDeleted";
  }
  changed(pass, done + what.substr(what.find(' ')), kMutatingWebhookConfigurations, "", name,
          reason, "webhook_configuration_" + done);
  return base::ok();
}

Result<ReconcileResult> WebhookConfigController::reconcile() {
  Pass pass;
  std::optional<webhook::CaPair> ca;
  if (options_.enabled) {
    auto got = ensureCa(pass);
    if (!got) {
      // dry run without a CA: nothing more can be planned exactly.
      if (!(options_.dry_run && got.error().code() == ErrorCode::kNotFound)) {
        return std::move(got).error();
      }
    } else {
      ca = std::move(*got);
    }
    EKCO_TRY(ensureService(pass));
  }
  if (!options_.enabled || ca || !options_.dry_run) EKCO_TRY(ensureConfiguration(pass, ca));
  ReconcileResult result;
  for (const std::string& line : pass.lines) {
    if (!result.plan.empty()) result.plan += "\n";
    result.plan += line;
  }
  if (options_.dry_run && pass.changed) {
    base::logInfo("dry run: pod image overrides webhook", {{"plan", result.plan}});
  }
  result.summary = pass.conflict      ? "an object changed meanwhile; looking again"
                   : pass.changed     ? (options_.dry_run ? "would change (dry run)" : "changed")
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
      .caches = {},
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        return std::make_shared<WebhookConfigController>(
            d.client, d.clock,
            WebhookConfigOptions{.ns = d.config.leader_election_namespace,
                                 .enabled = !d.config.pod_image_overrides.empty(),
                                 .target_port = static_cast<int>(d.config.pod_image_overrides_port),
                                 .dry_run = d.dry_run,
                                 .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     d.config.reconcile_interval),
                                 .is_leader_fresh = d.is_leader_fresh,
                                 .record_event = d.eventRecorder(),
                                 .count_action = d.count_action});
      },
  };
}

}  // namespace ekco::agent
