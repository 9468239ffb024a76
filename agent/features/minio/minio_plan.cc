#include "agent/features/minio/minio_plan.h"

#include <charconv>

#include <fmt/format.h>

#include "agent/features/minio/kotsadm_ha.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;
using Step = MinioPlan::Step;

namespace {

constexpr std::string_view kDesiredScale = "kurl.sh/desired-scale";

}  // namespace

Result<std::optional<std::int64_t>> desiredMinioScale(const json& sts) {
  const std::string text = kube::jsonText(
      kube::jsonField(kube::jsonField(sts, "metadata"), "annotations"), kDesiredScale);
  std::int64_t want = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), want);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || want < 0) {
    return Error(fmt::format("StatefulSet ha-minio: annotation {} is {}, not a replica count",
                             kDesiredScale, base::quoteForMessage(text)),
                 ErrorCode::kInvalidArgument);
  }
  const std::int64_t current =
      kube::jsonInteger(kube::jsonField(sts, "spec"), "replicas").value_or(1);
  if (current == want) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(want);
}

bool inOfflineWindow(const StorageMigrationState& state) {
  return state.running() && state.migration == "minio" &&
         (state.phase == "stopping-writes" || state.phase == "copying" ||
          state.phase == "verifying" || state.phase == "switching");
}

json recordedSelector(const StorageMigrationState& state) {
  json selector = json::parse(state.value("service-selector"), nullptr, false);
  if (selector.is_discarded() || !selector.is_object() || selector.empty()) {
    selector = {{"app", "minio"}};
  }
  return selector;
}

const json& disabledMinioSelector() {
  static const json selector = {{"doesnotexist", "doesnotexist"}};
  return selector;
}

Result<MinioPlan> planMinio(const MinioView& v) {
  MinioPlan plan;
  const auto wait = [&plan](std::string why) {
    plan.step = Step::kWait;
    plan.summary = std::move(why);
    return plan;
  };
  if (!v.nodes_synced) {
    plan.step = Step::kWaitForNodes;
    plan.summary = "waiting for the node cache";
    return plan;
  }
  // Maintenance mode: the offline window is closed, nothing else is done.
  if (v.paused) {
    plan.step = Step::kCloseWindow;
    return plan;
  }
  if (v.state.present && v.state.migration != "minio") {
    return wait("waiting: another storage migration is running (" + v.state.describe() + ")");
  }
  // A migration under way goes on whatever the node count: MinIO may be offline.
  if (v.state.running()) {
    plan.step = Step::kContinue;
    return plan;
  }
  const std::int64_t ready = countReadyNodes(v.nodes);
  if (ready < 3) return wait(fmt::format("{} Ready nodes: fewer than 3, MinIO left alone", ready));
  if (!v.storage_class) {
    return wait(
        "no OpenEBS local PV StorageClass (provisioner openebs.io/local): MinIO left alone");
  }
  if (!v.statefulset) return wait("StatefulSet " + v.ns + "/ha-minio absent: nothing to manage");

  // ha-minio at its desired scale, first.
  auto want = desiredMinioScale(*v.statefulset);
  if (!want) return std::move(want).error();
  plan.scale_to = *want;
  std::string scaled = "ha-minio at its desired scale";
  if (*want) {
    scaled = fmt::format("scale ha-minio to {} ({})", **want, kDesiredScale);
    if (v.dry_run) scaled = "would " + scaled + " (dry run)";
  }
  if (v.read_error) {
    plan.step = Step::kFail;
    plan.summary = scaled;
    return plan;
  }

  if (!v.deployment) {
    plan.summary = scaled + "; no single-replica MinIO left to migrate";
    // Rebalance only at the desired scale, healthy, and with no migration state (not even a
    // failed one: a person looks at that first).
    std::string why;
    if (v.state.present) {
      why = fmt::format("waiting: ConfigMap {}/{} exists ({})", v.migration_namespace,
                        kStorageMigrationConfigMap, v.state.describe());
    } else if (*want) {
      why = "waiting: ha-minio is not at its desired scale";
    } else if (v.healthy_host.empty()) {
      why = "waiting: no ha-minio pod reports /minio/health/cluster 200";
    }
    if (!why.empty()) {
      plan.summary += "; rebalance " + why;
      plan.rebalance = {{"decision", why}, {"dry_run", v.dry_run}};
      return plan;
    }
    plan.step = Step::kRebalance;
    return plan;
  }
  if (v.state.present) {  // failed
    return wait(fmt::format(
        "{}; the MinIO migration failed: {}; the old MinIO serves again; delete ConfigMap {}/{} "
        "to retry",
        scaled, v.state.value("failure"), v.migration_namespace, kStorageMigrationConfigMap));
  }
  if (v.healthy_host.empty()) {
    plan.summary = scaled + "; waiting for ha-minio to report /minio/health/cluster 200";
    // EKCO: "make sure the Service isn't left disabled".
    if (v.service_selector == disabledMinioSelector()) plan.step = Step::kRestoreService;
    return plan;
  }
  plan.step = Step::kStartMigration;
  plan.plan = fmt::format(
      "{}\nmigrate the single-replica MinIO to ha-minio ({}): stop writes, copy, verify, switch "
      "the Service, delete the old one",
      scaled, v.healthy_host);
  plan.summary = v.dry_run ? "would migrate MinIO to ha-minio (dry run)"
                           : "migrating MinIO to ha-minio (" + v.healthy_host + ")";
  return plan;
}

}  // namespace ekco::agent
