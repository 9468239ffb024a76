#include "agent/features/minio/kotsadm_ha.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "agent/policy/storage_migration.h"
#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

constexpr std::string_view kBootstrapExpect = "-bootstrap-expect";

// The N of "-bootstrap-expect=N" / "-bootstrap-expect N" forms we rewrite; nullopt when the
// argument has no number we can read (it is then rewritten too, as EKCO does).
std::optional<std::int64_t> bootstrapValue(const std::string& arg) {
  std::string_view rest = std::string_view(arg).substr(kBootstrapExpect.size());
  if (!rest.empty() && rest.front() == '=') rest.remove_prefix(1);
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
  if (ec != std::errc() || end != rest.data() + rest.size()) return std::nullopt;
  return n;
}

}  // namespace

std::int64_t countReadyNodes(const std::vector<kube::NodeRecord>& nodes) {
  return std::count_if(nodes.begin(), nodes.end(), [](const kube::NodeRecord& n) {
    const kube::ConditionRecord* ready = n.condition("Ready");
    return ready != nullptr && ready->status == "True";
  });
}

std::optional<RqlitePlan> planKotsadmRqlite(const json& sts, std::int64_t ready_nodes) {
  if (ready_nodes < kKotsadmRqliteReplicas || !sts.is_object()) return std::nullopt;
  RqlitePlan plan;
  const json& spec = kube::jsonField(sts, "spec");
  plan.replicas_from = kube::jsonInteger(spec, "replicas").value_or(1);
  plan.replicas_to = std::max(plan.replicas_from, kKotsadmRqliteReplicas);  // never down
  const json& containers =
      kube::jsonField(kube::jsonField(kube::jsonField(spec, "template"), "spec"), "containers");
  if (containers.is_array() && !containers.empty()) {
    const json& args = kube::jsonField(containers[0], "args");
    if (args.is_array()) {
      for (const json& a : args) {
        plan.args_from.push_back(a.is_string() ? a.get<std::string>() : kube::jsonDump(a));
      }
    }
  }
  plan.args_to = plan.args_from;
  for (std::size_t i = 0; i < plan.args_to.size(); ++i) {
    std::string& arg = plan.args_to[i];
    if (!arg.starts_with(kBootstrapExpect)) continue;
    if (arg == kBootstrapExpect && i + 1 < plan.args_to.size()) {
      // "-bootstrap-expect 1": Go's flag package also takes the value as the next argument.
      std::string& value = plan.args_to[i + 1];
      auto n = bootstrapValue(std::string(kBootstrapExpect) + "=" + value);
      if (!n || *n < kKotsadmRqliteReplicas) {
        value = std::to_string(kKotsadmRqliteReplicas);
        plan.args_changed = true;
      }
      continue;
    }
    auto n = bootstrapValue(arg);
    if (!n || *n < kKotsadmRqliteReplicas) {
      arg = fmt::format("{}={}", kBootstrapExpect, kKotsadmRqliteReplicas);
      plan.args_changed = true;
    }
  }
  if (plan.replicas_to == plan.replicas_from && !plan.args_changed) return std::nullopt;
  return plan;
}

KotsadmHa::KotsadmHa(std::function<ObservedNodes()> observe, kube::KubeClient& client,
                     KotsadmHaOptions options)
    : observe_(std::move(observe)), client_(client), options_(std::move(options)) {}

Result<ReconcileResult> KotsadmHa::reconcile() {
  const ObservedNodes observed = observe_();
  if (!observed.synced) return ReconcileResult{.summary = "waiting for the node cache"};
  const std::string what = fmt::format("StatefulSet {}/{}", options_.ns, options_.name);
  const std::int64_t ready = countReadyNodes(observed.nodes);
  auto remember = [&](json j) {
    j["ready_nodes"] = ready;
    std::lock_guard lock(mu_);
    last_ = std::move(j);
  };
  ReconcileResult result{.requeue_after = options_.interval};
  if (ready < kKotsadmRqliteReplicas) {
    result.summary = fmt::format("{} Ready nodes: fewer than 3, {} left alone", ready, what);
    remember({{"decision", result.summary}});
    return result;
  }
  auto sts = client_.get(kube::resources::kStatefulSets, options_.ns, options_.name);
  if (!sts) {
    if (sts.error().code() == ErrorCode::kNotFound) {
      result.summary = what + " absent: nothing to scale";
      remember({{"present", false}, {"decision", result.summary}});
      return result;
    }
    return std::move(sts).error().wrap("read " + what);
  }
  const std::optional<RqlitePlan> plan = planKotsadmRqlite(*sts, ready);
  if (!plan) {
    result.summary = what + " already highly available";
    remember({{"present", true}, {"decision", result.summary}});
    return result;
  }
  const std::string change =
      fmt::format("replicas {} -> {}{}", plan->replicas_from, plan->replicas_to,
                  plan->args_changed ? fmt::format(", -bootstrap-expect={}", kKotsadmRqliteReplicas)
                                     : std::string());
  // kURL#4326: never in the middle of a storage migration; read fresh, right before acting.
  auto migration = readStorageMigration(client_, options_.migration_namespace);
  if (!migration) return std::move(migration).error().wrap("kotsadm-ha");
  if (migration->running()) {
    result.summary = fmt::format("{}: waiting: a storage migration is running ({})", what,
                                 migration->describe());
    result.plan = change;
    remember({{"present", true}, {"decision", result.summary}});
    return result;
  }
  result.plan = what + ": " + change;
  if (options_.effects.dry_run) {
    if (planned_ != result.plan) {
      planned_ = result.plan;
      base::logInfo("dry run: would scale", {{"resource", what}, {"change", change}});
    }
    result.summary = "would scale " + what + " (dry run): " + change;
    remember({{"present", true}, {"decision", result.summary}});
    return result;
  }
  const std::string version = kube::jsonResourceVersion(*sts);
  if (version.empty()) return Error(what + ": no metadata.resourceVersion; not patched");
  if (!options_.effects.leaderFresh()) {
    return Error(what + ": not patched: this agent's leadership is not fresh",
                 ErrorCode::kUnavailable);
  }
  json patch =
      json::array({kube::resourceVersionTest(version),
                   {{"op", "add"}, {"path", "/spec/replicas"}, {"value", plan->replicas_to}}});
  if (plan->args_changed) {
    patch.push_back({{"op", "replace"},
                     {"path", "/spec/template/spec/containers/0/args"},
                     {"value", plan->args_to}});
  }
  auto patched = client_.patch(kube::resources::kStatefulSets, options_.ns, options_.name,
                               kube::PatchType::kJson, patch);
  if (!patched) {
    const ErrorCode code = patched.error().code();
    if (code == ErrorCode::kInvalidArgument || code == ErrorCode::kConflict ||
        code == ErrorCode::kNotFound) {
      result.summary = what + " changed since it was read; looking again";
      result.requeue_after = std::chrono::seconds(1);
      return result;
    }
    return std::move(patched).error().wrap("scale " + what);
  }
  const std::string reason = fmt::format("{} Ready nodes", ready);
  base::logInfo("scaled", {{"resource", what}, {"change", change}, {"reason", reason}});
  options_.effects.event({.involved_resource = kube::resources::kStatefulSets,
                          .involved_namespace = options_.ns,
                          .involved_name = options_.name,
                          .reason = "Scaled",
                          .message = fmt::format("ekco set {} ({})", change, reason)});
  options_.effects.count("kotsadm_scaled");
  result.summary = "scaled " + what + ": " + change;
  remember({{"present", true}, {"decision", result.summary}});
  return result;
}

json KotsadmHa::status() const {
  std::lock_guard lock(mu_);
  return last_;
}

ControllerSpec kotsadmHaSpec() {
  return {
      .name = "kotsadm-ha",
      .scope = Scope::kLeader,
      .status_key = "kotsadm_ha",
      .enabled = [](const Config& c) { return c.enable_ha_kotsadm; },
      .watches = {clusterNodesWatch()},
      .pauses_in_maintenance = true,  // scales kotsadm-rqlite
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        return std::make_shared<KotsadmHa>(
            std::move(*nodes), d.client,
            KotsadmHaOptions{.migration_namespace = d.config.leader_election_namespace,
                             .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 d.config.reconcile_interval),
                             .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
