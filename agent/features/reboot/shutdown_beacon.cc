#include "agent/features/reboot/shutdown_beacon.h"

#include <algorithm>
#include <cctype>

#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

bool isUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : std::isxdigit(static_cast<unsigned char>(s[i])) == 0) return false;
  }
  return true;
}

}  // namespace

base::Result<std::string> readBootId(const hostfs::HostFs& host_fs) {
  auto text = host_fs.read(kBootIdPath);
  if (!text) return std::move(text).error().wrap("read the boot id");
  std::string id = *text;
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back())) != 0) id.pop_back();
  if (!isUuid(id)) {
    return Error(
        std::string(kBootIdPath) + ": not a boot id (want a UUID): \"" + id.substr(0, 64) + "\"",
        ErrorCode::kParse);
  }
  return id;
}

std::optional<Beacon> beaconOf(const kube::NodeRecord& node) {
  auto at = node.annotation(kShutdownAtAnnotation);
  auto boot = node.annotation(kShutdownBootIdAnnotation);
  if (!at || !boot || boot->empty()) return std::nullopt;
  auto parsed = kube::parseRfc3339(*at);
  if (!parsed) return std::nullopt;
  return Beacon{.at = *parsed, .boot_id = std::string(*boot)};
}

const kube::TaintRecord* outOfServiceTaint(const kube::NodeRecord& node) {
  return node.taint(kTaintOutOfService);
}

bool outOfServiceByEkco(const kube::NodeRecord& node) {
  const kube::TaintRecord* taint = outOfServiceTaint(node);
  auto by = node.annotation(kOutOfServiceByAnnotation);
  if (taint == nullptr || !by || *by != kOutOfServiceByEkco) return false;
  auto at = node.annotation(kOutOfServiceAtAnnotation);
  if (!at) return true;  // a marker from before the timeAdded was recorded
  auto recorded = kube::parseRfc3339(*at);
  return recorded && taint->time_added && *recorded == *taint->time_added;
}

json beaconPatch(base::WallTime at, const std::string& boot_id) {
  return {{"metadata",
           {{"annotations",
             {{std::string(kShutdownAtAnnotation), kube::formatRfc3339(at)},
              {std::string(kShutdownBootIdAnnotation), boot_id}}}}}};
}

base::Status recordShutdownBeacon(kube::KubeClient& client, const hostfs::HostFs& host_fs,
                                  const base::Clock& clock, const std::string& node_name,
                                  bool dry_run) {
  auto boot_id = readBootId(host_fs);
  if (!boot_id) return std::move(boot_id).error();
  const base::WallTime at = clock.wallNow();
  if (dry_run) {
    base::logInfo(
        "shutdown: dry run: would record the shutdown beacon",
        {{"node", node_name}, {"shutdown_at", kube::formatRfc3339(at)}, {"boot_id", *boot_id}});
    return base::ok();
  }
  auto patched = client.patch(kube::resources::kNodes, "", node_name, kube::PatchType::kMerge,
                              beaconPatch(at, *boot_id));
  if (!patched)
    return std::move(patched).error().wrap("record the shutdown beacon on " + node_name);
  base::logInfo(
      "shutdown: beacon recorded (the leader may mark the node out of service once it "
      "stops reporting)",
      {{"node", node_name}, {"shutdown_at", kube::formatRfc3339(at)}, {"boot_id", *boot_id}});
  return base::ok();
}

base::Result<json> settleBeaconOnStartup(kube::KubeClient& client, const json& node,
                                         const std::string& boot_id, bool dry_run) {
  auto record = kube::projectNode(node);
  if (!record) return std::move(record).error();
  const std::string name = record->name.str();
  const auto beacon = beaconOf(*record);
  const bool has_marker = record->annotation(kShutdownAtAnnotation).has_value() ||
                          record->annotation(kShutdownBootIdAnnotation).has_value();
  if (!beacon && !has_marker) return node;
  const bool rebooted = beacon && beacon->boot_id != boot_id;
  const bool ours = outOfServiceByEkco(*record);
  json annotations = {{std::string(kShutdownAtAnnotation), nullptr},
                      {std::string(kShutdownBootIdAnnotation), nullptr}};
  json patch = {{"metadata", {{"annotations", annotations}}}};
  // (1) Only ekco's taint, and only with the proof of a reboot.
  const bool untaint = rebooted && ours;
  if (untaint) {
    json taints = json::array();
    const json& current = kube::jsonArray(kube::jsonField(node, "spec"), "taints");
    for (const json& t : current) {
      if (kube::jsonText(t, "key") != kTaintOutOfService) taints.push_back(t);
    }
    patch["spec"] = {{"taints", taints}};
    patch["metadata"]["annotations"][std::string(kOutOfServiceByAnnotation)] = nullptr;
    patch["metadata"]["annotations"][std::string(kOutOfServiceAtAnnotation)] = nullptr;
  }
  // (2) Guarded by the resourceVersion read: a person's taint added meanwhile is never dropped.
  const std::string rv = kube::jsonText(kube::jsonField(node, "metadata"), "resourceVersion");
  if (!rv.empty()) patch["metadata"]["resourceVersion"] = rv;
  const std::string why = !beacon ? "an unreadable beacon"
                          : rebooted
                              ? "the boot id changed: the node rebooted"
                              : "the boot id did not change: the shutdown did not end in a reboot";
  const std::string what =
      untaint ? "removed ekco's out-of-service taint and the shutdown beacon"
      : outOfServiceTaint(*record) != nullptr && !ours
          ? "removed the shutdown beacon; the out-of-service taint is not ekco's and stays"
      : ours ? "removed the shutdown beacon; ekco's out-of-service taint stays until the kubelet "
               "reports Ready (the leader removes it)"
             : "removed the shutdown beacon";
  const std::string beacon_boot =
      std::string(record->annotation(kShutdownBootIdAnnotation).value_or(""));
  if (dry_run) {
    base::logInfo(
        "startup: dry run: would have " + what,
        {{"node", name}, {"reason", why}, {"beacon_boot_id", beacon_boot}, {"boot_id", boot_id}});
    return node;
  }
  auto patched = client.patch(kube::resources::kNodes, "", name, kube::PatchType::kMerge, patch);
  if (!patched) return std::move(patched).error();
  base::logInfo(
      "startup: " + what,
      {{"node", name}, {"reason", why}, {"beacon_boot_id", beacon_boot}, {"boot_id", boot_id}});
  if (untaint) {
    auto recorded = client.recordEvent(
        {.involved_resource = kube::resources::kNodes,
         .involved_name = name,
         .involved_uid = record->uid,
         .reason = "OutOfServiceTaintRemoved",
         .message = "ekco startup: the node rebooted (boot id " + beacon_boot + " -> " + boot_id +
                    "); removed the node.kubernetes.io/out-of-service taint ekco had applied"});
    if (!recorded) base::logWarn("cannot record event", {{"error", recorded.error().message()}});
  }
  return std::move(*patched);
}

}  // namespace ekco::agent
