#include "agent/features/minio/minio_ha.h"

#include <utility>

#include <fmt/format.h>

#include "agent/features/minio/kotsadm_ha.h"
#include "agent/features/minio/minio_migration.h"
#include "agent/features/minio/minio_plan.h"
#include "base/log/log.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

namespace r = kube::resources;

constexpr std::string_view kDesiredScale = "kurl.sh/desired-scale";
constexpr std::string_view kLocalPvProvisioner = "openebs.io/local";
const json kHaSelector = {{"app", "ha-minio"}};

const kube::Resource kStorageClasses{.group = "storage.k8s.io",
                                     .version = "v1",
                                     .plural = "storageclasses",
                                     .namespaced = false,
                                     .kind = "StorageClass"};

// Microseconds: the offline window (writes stopped -> switched) is reported from these.
std::string nowText(const base::Clock& clock) { return kube::formatRfc3339Micro(clock.wallNow()); }

}  // namespace

std::string podS3Host(const json& pod) {
  const json& status = kube::jsonField(pod, "status");
  const std::string ip = kube::jsonText(status, "podIP");
  if (kube::jsonText(status, "phase") != "Running" || ip.empty()) return "";
  if (!kube::jsonField(kube::jsonField(pod, "metadata"), "deletionTimestamp").is_null()) return "";
  std::int64_t port = 9000;
  const json& containers = kube::jsonField(kube::jsonField(pod, "spec"), "containers");
  if (containers.is_array() && !containers.empty()) {
    const json& ports = kube::jsonField(containers[0], "ports");
    if (ports.is_array() && !ports.empty()) {
      const auto declared = kube::jsonInteger(ports[0], "containerPort");
      if (declared && *declared > 0 && *declared <= 65535) port = *declared;
    }
  }
  return ip.find(':') != std::string::npos ? fmt::format("[{}]:{}", ip, port)
                                           : fmt::format("{}:{}", ip, port);
}

MinioHa::MinioHa(std::function<ObservedNodes()> observe, kube::KubeClient& client,
                 const base::Clock& clock, MinioHaOptions options)
    : observe_(std::move(observe)),
      client_(client),
      clock_(clock),
      options_(std::move(options)),
      rebalancer_(client, clock,
                  {.ns = options_.ns,
                   .migration_namespace = options_.migration_namespace,
                   .health =
                       [&clock](const std::string& host, const std::string& path) {
                         s3::Client probe({.host = host}, clock);
                         return probe.healthStatus(path);
                       },
                   .effects = options_.effects}) {}

std::string MinioHa::windowToClose() const {
  std::lock_guard lock(mu_);
  return window_;
}

void MinioHa::noteWindow(const StorageMigrationState& state) {
  std::string window;
  if (inOfflineWindow(state)) {
    window = "the MinIO migration's offline window (phase " + state.phase + ")";
  }
  std::lock_guard lock(mu_);
  window_ = std::move(window);
}

base::Status MinioHa::fresh(const std::string& what) const {
  // Closing the offline window while paused: the leader fencing without the maintenance check.
  const bool fresh = closing_ && options_.is_leader_fresh_to_close
                         ? options_.is_leader_fresh_to_close()
                         : options_.effects.leaderFresh();
  if (!fresh) {
    return Error(what + ": not done: this agent's leadership is not fresh",
                 ErrorCode::kUnavailable);
  }
  return {};
}

void MinioHa::event(const kube::Resource& res, const std::string& name, const std::string& reason,
                    const std::string& message, bool warning) {
  if (warning) {
    base::logWarn("minio-ha", {{"reason", reason}, {"message", message}});
  } else {
    base::logInfo("minio-ha", {{"reason", reason}, {"message", message}});
  }
  options_.effects.event({.involved_resource = res,
                          .involved_namespace = options_.ns,
                          .involved_name = name,
                          .reason = reason,
                          .message = message,
                          .type = warning ? "Warning" : "Normal"});
  options_.effects.count("minio_" + reason);
}

void MinioHa::remember(const std::string& decision, const StorageMigrationState& state,
                       json rebalance) {
  json migration = nullptr;
  if (state.present) {
    migration = json::object();
    for (const auto& [k, v] : state.data) {
      if (k != "service-selector") migration[k] = v;
    }
  }
  std::lock_guard lock(mu_);
  status_ = {{"decision", decision}, {"migration", migration}, {"rebalance", std::move(rebalance)}};
}

Result<StorageMigrationState> MinioHa::save(const StorageMigrationState& current,
                                            std::map<std::string, std::string> data) {
  data["migration"] = "minio";
  data["updated"] = nowText(clock_);
  if (auto ok = fresh("record the MinIO migration's progress"); !ok) return std::move(ok).error();
  auto saved = writeStorageMigration(client_, options_.migration_namespace, current, data);
  if (saved) noteWindow(*saved);
  return saved;
}

Result<ReconcileResult> MinioHa::closeWindow(const StorageMigrationState& state) {
  ReconcileResult result{.requeue_after = options_.interval};
  if (!inOfflineWindow(state)) {
    result.summary = "maintenance mode: paused; no MinIO migration is offline";
    remember(result.summary, state);
    return result;
  }
  const bool finish = state.phase == "switching";
  if (options_.effects.dry_run) {
    result.summary = fmt::format(
        "maintenance mode, MinIO migration in phase {}: would {} (dry run)", state.phase,
        finish ? "finish it (switch the Service to ha-minio)" : "roll it back");
    remember(result.summary, state);
    return result;
  }
  closing_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{closing_};
  if (!finish) return rollBack(state);
  base::logInfo(
      "minio-ha: maintenance mode is on; finishing the verified MinIO migration so "
      "MinIO is not left offline",
      {{"phase", state.phase}});
  auto switched = migrate(state);
  if (!switched) return switched;
  event(r::kDeployments, "minio", "MinioMigrationSwitchedInMaintenance",
        "maintenance mode is on: the verified MinIO migration was finished (the Service minio "
        "selects ha-minio) rather than leave MinIO offline; deleting the old Deployment minio and "
        "PVC minio-pv-claim waits for maintenance to end");
  result.summary =
      "maintenance mode: MinIO migration finished (Service minio switched to "
      "ha-minio); deleting the old MinIO waits for the end of maintenance";
  {
    std::lock_guard lock(mu_);
    status_["decision"] = result.summary;
  }
  return result;
}

Result<ReconcileResult> MinioHa::rollBack(const StorageMigrationState& state) {
  const json selector = recordedSelector(state);
  base::logWarn(
      "minio-ha: maintenance mode is on; rolling back the MinIO migration so MinIO is "
      "not left offline",
      {{"phase", state.phase}, {"selector", kube::jsonDump(selector)}});
  if (auto ok = setSelector(selector, "maintenance mode: the MinIO migration is rolled back");
      !ok) {
    return std::move(ok).error();
  }
  // Guards, again: the same attempt, still in that phase (not finished or cleared meanwhile by
  // another leader), and this agent still leads.
  auto again = readStorageMigration(client_, options_.migration_namespace);
  if (!again) return std::move(again).error().wrap("minio-ha: read the state again");
  if (!again->present || again->value("started") != state.value("started") ||
      again->phase != state.phase) {
    noteWindow(*again);
    return Error(
        "minio-ha: the MinIO migration's state changed while rolling it back; reading it again",
        ErrorCode::kUnavailable);
  }
  if (auto ok = fresh("clear the MinIO migration's state"); !ok) return std::move(ok).error();
  if (auto ok = clearStorageMigration(client_, options_.migration_namespace); !ok) {
    return std::move(ok).error();
  }
  noteWindow(StorageMigrationState{});
  event(r::kDeployments, "minio", "MinioMigrationRolledBack",
        fmt::format("maintenance mode is on: the MinIO migration in phase {} was rolled back "
                    "rather than leave MinIO offline: the Service minio selects the old MinIO "
                    "again ({}), whose data no write reached since writes stopped; what was "
                    "copied stays on ha-minio; the migration starts again when maintenance ends",
                    state.phase, kube::jsonDump(selector)),
        /*warning=*/true);
  ReconcileResult result{.requeue_after = options_.interval};
  result.summary = "maintenance mode: MinIO migration rolled back from phase " + state.phase +
                   "; the old MinIO serves again";
  remember(result.summary, StorageMigrationState{});
  return result;
}

Result<bool> MinioHa::storageClassPresent() {
  auto list = client_.listAll(kStorageClasses, "", {.limit = 500});
  if (!list) return std::move(list).error().wrap("list StorageClasses");
  const json& items = kube::jsonField(*list, "items");
  if (!items.is_array()) return false;
  for (const json& sc : items) {
    if (kube::jsonText(sc, "provisioner") == kLocalPvProvisioner) return true;
  }
  return false;
}

base::Status MinioHa::scale(std::int64_t want) {
  const std::string change = fmt::format("scale ha-minio to {} ({})", want, kDesiredScale);
  auto current = client_.get(r::kStatefulSets, options_.ns, "ha-minio", "scale");
  if (!current) return std::move(current).error().wrap("read ha-minio's scale");
  if (!kube::jsonField(*current, "spec").is_object()) {
    return Error("read ha-minio's scale: the Scale has no spec object", ErrorCode::kParse);
  }
  const std::int64_t from = kube::jsonInteger((*current)["spec"], "replicas").value_or(0);
  (*current)["spec"]["replicas"] = want;
  if (auto ok = fresh(change); !ok) return std::move(ok).error();
  auto updated = client_.update(r::kStatefulSets, options_.ns, *current, "scale");
  if (!updated) return std::move(updated).error().wrap(change);
  event(r::kStatefulSets, "ha-minio", "Scaled",
        fmt::format("ekco scaled ha-minio {} -> {} (annotation {})", from, want, kDesiredScale));
  return {};
}

Result<s3::Credentials> MinioHa::credentials() {
  auto secret = client_.get(r::kSecrets, options_.ns, "minio-credentials");
  if (!secret) return std::move(secret).error().wrap("read Secret minio-credentials");
  const json& data = kube::jsonField(*secret, "data");
  s3::Credentials c;
  for (auto [key, out] : {std::pair{"MINIO_ACCESS_KEY", &c.access_key},
                          std::pair{"MINIO_SECRET_KEY", &c.secret_key}}) {
    auto decoded = kube::base64Decode(kube::jsonText(data, key));
    if (!decoded || decoded->empty()) {
      return Error(fmt::format("Secret {}/minio-credentials has no {}", options_.ns, key),
                   ErrorCode::kInvalidArgument);
    }
    *out = std::move(*decoded);
  }
  return c;
}

Result<std::optional<s3::Endpoint>> MinioHa::endpoint(const std::string& selector,
                                                      bool healthy_only) {
  auto pods = client_.list(r::kPods, options_.ns, {.label_selector = selector});
  if (!pods) return std::move(pods).error().wrap("list pods " + selector);
  auto creds = credentials();
  if (!creds) return std::move(creds).error();
  std::vector<std::pair<std::string, const json*>> items;  // by name
  if (const json& list = kube::jsonField(*pods, "items"); list.is_array()) {
    for (const json& pod : list) {
      items.emplace_back(kube::jsonText(kube::jsonField(pod, "metadata"), "name"), &pod);
    }
  }
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& item : items) {
    const json& pod = *item.second;
    const std::string host = podS3Host(pod);
    if (host.empty()) continue;
    s3::Endpoint e{.host = host, .credentials = *creds};
    if (healthy_only) {
      s3::Client probe(e, clock_);
      auto status = probe.healthStatus("/minio/health/cluster");
      if (!status || *status != 200) continue;
    }
    return std::optional<s3::Endpoint>(e);
  }
  return std::optional<s3::Endpoint>();
}

base::Status MinioHa::setSelector(const json& selector, const std::string& why) {
  auto svc = client_.get(r::kServices, options_.ns, "minio");
  if (!svc) return std::move(svc).error().wrap("read Service minio");
  json current = kube::jsonField(kube::jsonField(*svc, "spec"), "selector");
  if (!current.is_object()) current = json::object();
  if (current == selector) return {};
  if (auto ok = fresh("set Service minio's selector"); !ok) return std::move(ok).error();
  const json patch =
      json::array({kube::resourceVersionTest(kube::jsonResourceVersion(*svc)),
                   {{"op", "add"}, {"path", "/spec/selector"}, {"value", selector}}});
  auto patched = client_.patch(r::kServices, options_.ns, "minio", kube::PatchType::kJson, patch);
  if (!patched) return std::move(patched).error().wrap("set Service minio's selector");
  event(r::kServices, "minio", "SelectorChanged",
        fmt::format("ekco set the selector {} -> {}: {}", kube::jsonDump(current),
                    kube::jsonDump(selector), why));
  return {};
}

Result<MinioView> MinioHa::observe() {
  ObservedNodes observed = observe_();
  MinioView v{.nodes_synced = observed.synced,
              .nodes = std::move(observed.nodes),
              .dry_run = options_.effects.dry_run,
              .ns = options_.ns,
              .migration_namespace = options_.migration_namespace};
  if (!v.nodes_synced) return v;
  auto state = readStorageMigration(client_, options_.migration_namespace);
  if (!state) return std::move(state).error().wrap("minio-ha");
  v.state = std::move(*state);
  noteWindow(v.state);
  v.paused = options_.may_act && !options_.may_act();
  // What follows decides nothing in these cases (planMinio): not read.
  if (v.paused || v.state.running() || (v.state.present && v.state.migration != "minio") ||
      countReadyNodes(v.nodes) < 3) {
    return v;
  }
  auto sc = storageClassPresent();
  if (!sc) return std::move(sc).error();
  v.storage_class = *sc;
  if (!v.storage_class) return v;
  auto sts = client_.get(r::kStatefulSets, options_.ns, "ha-minio");
  if (!sts) {
    if (sts.error().code() != ErrorCode::kNotFound) {
      return std::move(sts).error().wrap("read StatefulSet ha-minio");
    }
    return v;
  }
  v.statefulset = std::move(*sts);
  // From here a failed read fails the pass after ha-minio is scaled.
  auto deployment = client_.get(r::kDeployments, options_.ns, "minio");
  if (!deployment && deployment.error().code() != ErrorCode::kNotFound) {
    v.read_error = std::move(deployment).error().wrap("read Deployment minio");
    return v;
  }
  v.deployment = deployment.has_value();
  if (v.deployment) {
    auto svc = client_.get(r::kServices, options_.ns, "minio");
    if (svc) v.service_selector = kube::jsonField(kube::jsonField(*svc, "spec"), "selector");
  }
  auto healthy = endpoint("app=ha-minio", /*healthy_only=*/true);
  if (!healthy) {
    v.read_error = std::move(healthy).error();
    return v;
  }
  if (*healthy) v.healthy_host = (*healthy)->host;
  return v;
}

Result<ReconcileResult> MinioHa::reconcile() {
  auto view = observe();
  if (!view) return std::move(view).error();
  auto plan = planMinio(*view);
  if (!plan) return std::move(plan).error();
  return apply(*plan, *view);
}

Result<ReconcileResult> MinioHa::apply(const MinioPlan& plan, const MinioView& view) {
  using Step = MinioPlan::Step;
  switch (plan.step) {
    case Step::kWaitForNodes:
      return ReconcileResult{.summary = plan.summary};
    case Step::kCloseWindow:
      return closeWindow(view.state);
    case Step::kContinue:
      return migrate(view.state);
    default:
      break;
  }
  ReconcileResult result{.summary = plan.summary, .requeue_after = options_.interval};
  if (plan.scale_to && !view.dry_run) EKCO_TRY(scale(*plan.scale_to));
  switch (plan.step) {
    case Step::kFail:
      return *view.read_error;
    case Step::kRestoreService:
      if (!view.dry_run) {
        EKCO_TRY(setSelector({{"app", "minio"}}, "no migration is running"));
      }
      break;
    case Step::kRebalance: {
      auto rebalanced = rebalancer_.pass(*view.statefulset, view.nodes);
      if (!rebalanced) return std::move(rebalanced).error();
      result.summary += "; " + rebalanced->summary;
      if (rebalanced->status.value("rule", json()).is_string()) result.plan = rebalanced->summary;
      remember(result.summary, view.state, std::move(rebalanced->status));
      return result;
    }
    case Step::kStartMigration:
      return startMigration(plan, view);
    default:
      break;
  }
  remember(result.summary, view.state, plan.rebalance);
  return result;
}

Result<ReconcileResult> MinioHa::startMigration(const MinioPlan& plan, const MinioView& view) {
  ReconcileResult result{.summary = plan.summary, .requeue_after = options_.interval};
  result.plan = plan.plan;
  if (view.dry_run) {
    if (planned_ != result.plan) {
      planned_ = result.plan;
      base::logInfo("dry run: would migrate MinIO", {{"to", view.healthy_host}});
    }
    remember(result.summary, view.state);
    return result;
  }
  // (1) Record the Service's selector (read again, right before), then disable it.
  auto svc = client_.get(r::kServices, options_.ns, "minio");
  if (!svc) return std::move(svc).error().wrap("read Service minio");
  json selector = kube::jsonField(kube::jsonField(*svc, "spec"), "selector");
  if (!selector.is_object()) selector = json::object();
  auto started = save(view.state, {{"phase", "stopping-writes"},
                                   {"started", nowText(clock_)},
                                   {"service-selector", kube::jsonDump(selector)}});
  if (!started) return std::move(started).error();
  event(r::kDeployments, "minio", "MinioMigrationStarted",
        "ekco is migrating the single-replica MinIO's data to ha-minio; MinIO is offline until "
        "the Service minio is switched");
  return migrate(*started);
}

Result<ReconcileResult> MinioHa::migrate(StorageMigrationState state) {
  ReconcileResult result{.requeue_after = std::chrono::milliseconds(0)};
  const std::string phase = state.phase;
  if (options_.effects.dry_run) {
    result.summary = "a MinIO migration is " + phase + "; dry run: not continued";
    result.requeue_after = options_.interval;
    remember(result.summary, state);
    return result;
  }
  auto data = state.data;
  if (phase == "stopping-writes") {
    if (auto ok = setSelector(disabledMinioSelector(),
                              "stop writes to the old MinIO during the "
                              "migration");
        !ok) {
      return std::move(ok).error();
    }
    data["phase"] = "copying";
    data["writes-stopped"] = nowText(clock_);
    auto next = save(state, data);
    if (!next) return std::move(next).error();
    result.summary = "MinIO writes stopped; copying";
    remember(result.summary, *next);
    return result;
  }
  if (phase == "copying" || phase == "verifying") {
    auto source = endpoint("app=minio", false);
    if (!source) return std::move(source).error();
    auto target = endpoint("app=ha-minio", true);
    if (!target) return std::move(target).error();
    if (!*source || !*target) {
      return Error(fmt::format("MinIO migration {}: no running {} pod to {} ", phase,
                               !*source ? "app=minio" : "healthy app=ha-minio",
                               !*source ? "copy from" : "copy to"),
                   ErrorCode::kUnavailable);
    }
    s3::Client from(**source, clock_);
    s3::Client to(**target, clock_);
    if (digests_started_ != state.value("started")) {  // another attempt's, or none
      digests_.clear();
      digests_started_ = state.value("started");
    }
    if (phase == "copying") {
      CopyProgress progress = parseProgress(data);
      StorageMigrationState current = state;
      auto done = copyBuckets(from, to, progress,
                              {.tmp_dir = options_.tmp_dir,
                               .budget = options_.copy_budget,
                               .checkpoint_every = options_.checkpoint_every,
                               .checkpoint = [&](const CopyProgress& p) -> base::Status {
                                 auto d = current.data;
                                 for (auto& [k, v] : progressData(p)) d[k] = v;
                                 auto saved = save(current, d);
                                 if (!saved) return std::move(saved).error();
                                 current = std::move(*saved);
                                 return {};
                               },
                               .digests = &digests_},
                              clock_);
      if (!done) return std::move(done).error().wrap("MinIO migration: copy");
      data = current.data;
      if (!*done) {
        result.summary = fmt::format("copying MinIO: {} objects, {} bytes so far", progress.objects,
                                     progress.bytes);
        remember(result.summary, current);
        return result;
      }
      data["phase"] = "verifying";
      auto next = save(current, data);
      if (!next) return std::move(next).error();
      event(r::kDeployments, "minio", "MinioDataCopied",
            fmt::format("copied {} objects ({} bytes), {} already on ha-minio; verifying",
                        progress.objects, progress.bytes, progress.skipped));
      result.summary = "MinIO data copied; verifying";
      remember(result.summary, *next);
      return result;
    }
    // (3) verifying
    auto verified = verifyCopy(from, to, &digests_);
    if (!verified) return std::move(verified).error().wrap("MinIO migration: verify");
    digests_.clear();  // this attempt is decided
    if (!verified->ok()) {
      if (auto ok = setSelector(recordedSelector(state), "the MinIO migration failed verification");
          !ok) {
        return std::move(ok).error();
      }
      data["phase"] = "failed";
      data["failure"] = "verification: " + verified->describe();
      auto failed = save(state, data);
      if (!failed) return std::move(failed).error();
      event(r::kDeployments, "minio", "MinioMigrationFailed",
            fmt::format("the copy on ha-minio differs from the source ({}); the old MinIO and its "
                        "data are kept and serve again; delete ConfigMap {}/{} to retry",
                        verified->describe(), options_.migration_namespace,
                        kStorageMigrationConfigMap),
            /*warning=*/true);
      result.summary = "MinIO migration failed: " + data["failure"];
      result.requeue_after = options_.interval;
      remember(result.summary, *failed);
      return result;
    }
    data["phase"] = "switching";
    data["verified"] = verified->describe();
    auto next = save(state, data);
    if (!next) return std::move(next).error();
    event(r::kDeployments, "minio", "MinioDataVerified", verified->describe());
    result.summary = "MinIO copy verified: " + verified->describe();
    remember(result.summary, *next);
    return result;
  }
  if (phase == "switching") {
    // (4)
    if (auto ok = setSelector(kHaSelector, "the MinIO migration is verified"); !ok) {
      return std::move(ok).error();
    }
    data["phase"] = "cleaning-up";
    data["switched"] = nowText(clock_);
    auto next = save(state, data);
    if (!next) return std::move(next).error();
    result.summary = "Service minio switched to ha-minio";
    remember(result.summary, *next);
    return result;
  }
  if (phase == "cleaning-up") {
    // (5) only now, after the verification passed and the Service was switched.
    if (auto ok = fresh("delete the old MinIO"); !ok) return std::move(ok).error();
    for (auto [res, name] : {std::pair{&r::kDeployments, "minio"},
                             std::pair{&r::kPersistentVolumeClaims, "minio-pv-claim"}}) {
      auto removed = client_.remove(*res, options_.ns, name);
      if (!removed && removed.error().code() != ErrorCode::kNotFound) {
        return std::move(removed).error().wrap(fmt::format("delete {} {}", res->kind, name));
      }
    }
    std::string window = "unknown";
    auto stopped = kube::parseRfc3339(state.value("writes-stopped"));
    auto switched = kube::parseRfc3339(state.value("switched"));
    if (stopped && switched) {
      window = fmt::format("{:.1f}s", std::chrono::duration<double>(*switched - *stopped).count());
    }
    if (auto ok = clearStorageMigration(client_, options_.migration_namespace); !ok) {
      return std::move(ok).error();
    }
    noteWindow(StorageMigrationState{});
    event(r::kStatefulSets, "ha-minio", "MinioMigrationCompleted",
          fmt::format("MinIO now runs on ha-minio; the single-replica Deployment minio and PVC "
                      "minio-pv-claim were deleted ({}; offline for {})",
                      state.value("verified"), window));
    result.summary = "MinIO migration completed (offline " + window + ")";
    result.requeue_after = options_.interval;
    {
      std::lock_guard lock(mu_);
      status_ = {{"decision", result.summary}, {"migration", nullptr}, {"offline", window}};
    }
    return result;
  }
  return Error(
      fmt::format("storage migration state: unknown phase {}", base::quoteForMessage(phase)),
      ErrorCode::kInvalidArgument);
}

json MinioHa::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

ControllerSpec minioHaSpec() {
  return {
      .name = "minio-ha",
      .scope = Scope::kLeader,
      .status_key = "minio_ha",
      .enabled = [](const Config& c) { return c.enable_ha_minio && !c.minio_namespace.empty(); },
      .watches = {clusterNodesWatch()},
      .pauses_in_maintenance = true,  // scales, switches Services, deletes the old MinIO
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        return std::make_shared<MinioHa>(
            std::move(*nodes), d.client, d.clock,
            MinioHaOptions{.ns = d.config.minio_namespace,
                           .migration_namespace = d.config.leader_election_namespace,
                           .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                               d.config.reconcile_interval),
                           .may_act = d.may_act,
                           .is_leader_fresh_to_close = d.is_leader_fresh_to_close,
                           .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
