#include "rook/purge_node.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/resource.h"

namespace ekco::rook {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

std::string stringAt(const json& object, std::initializer_list<std::string_view> path) {
  const json* v = kube::jsonFind(object, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

bool allDigits(std::string_view s) {
  return !s.empty() && s.size() <= 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string joinCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

base::Result<std::string> cephPod(kube::KubeClient& client, const std::string& ns) {
  for (const char* app : {"rook-ceph-tools", "rook-ceph-operator"}) {
    auto pods = client.list(
        kube::resources::kPods, ns,
        {.label_selector = std::string("app=") + app, .field_selector = "status.phase=Running"});
    if (!pods) return std::move(pods).error().wrap("find the " + std::string(app) + " pod");
    for (const json& pod : pods->value("items", json::array())) {
      if (stringAt(pod, {"metadata", "deletionTimestamp"}).empty()) {
        return stringAt(pod, {"metadata", "name"});
      }
    }
  }
  return Error(
      "no Running rook-ceph-tools (or rook-ceph-operator) pod in " + ns + " to run ceph in",
      ErrorCode::kNotFound);
}

base::Result<std::vector<OsdDeployment>> osdDeploymentsOnHost(const json& list,
                                                              std::string_view hostname) {
  std::vector<OsdDeployment> out;
  const json* items = kube::jsonFind(list, {"items"});
  if (items == nullptr || !items->is_array()) return out;
  for (const json& d : *items) {
    if (stringAt(d, {"spec", "template", "spec", "nodeSelector", "kubernetes.io/hostname"}) !=
        hostname) {
      continue;
    }
    const std::string name = stringAt(d, {"metadata", "name"});
    const std::string id = stringAt(d, {"metadata", "labels", "ceph-osd-id"});
    if (!allDigits(id)) {
      return Error(fmt::format("Deployment {}: label ceph-osd-id \"{}\" is not an OSD id", name,
                               id.substr(0, 32)),
                   ErrorCode::kParse);
    }
    out.push_back({name, id});
  }
  std::sort(out.begin(), out.end(),
            [](const OsdDeployment& a, const OsdDeployment& b) { return a.name < b.name; });
  return out;
}

std::optional<json> storageNodesPatch(const json& ceph_cluster, std::string_view node) {
  const json* use_all = kube::jsonFind(ceph_cluster, {"spec", "storage", "useAllNodes"});
  if (use_all != nullptr && use_all->is_boolean() && use_all->get<bool>()) return std::nullopt;
  const json* nodes = kube::jsonFind(ceph_cluster, {"spec", "storage", "nodes"});
  if (nodes == nullptr || !nodes->is_array()) return std::nullopt;
  json kept = json::array();
  for (const json& n : *nodes) {
    if (!(n.is_object() && n.value("name", "") == node)) kept.push_back(n);
  }
  if (kept.size() == nodes->size()) return std::nullopt;
  return json::array({{{"op", "test"}, {"path", "/spec/storage/nodes"}, {"value", *nodes}},
                      {{"op", "replace"}, {"path", "/spec/storage/nodes"}, {"value", kept}}});
}

std::vector<std::vector<std::string>> cephOsdPurgeCommands(std::string_view osd_id) {
  return {{"ceph", "osd", "down", std::string(osd_id)},
          {"ceph", "osd", "purge", std::string(osd_id), "--yes-i-really-mean-it"}};
}

std::vector<std::string> cephCrushRemoveCommand(std::string_view hostname) {
  return {"ceph", "osd", "crush", "rm", std::string(hostname)};
}

// Five numbered steps whose order is the point (spec, OSDs, Deployments, host bucket); kept
// whole so the order reads at a glance.
base::Result<PurgeResult> purgeNode(kube::KubeClient& client, kube::PodExecutor& exec,
                                    std::string_view node, std::string_view hostname,
                                    const PurgeOptions& options) {
  PurgeResult result;
  const std::string prefix = options.dry_run ? "would " : "";
  auto cluster = client.get(kube::resources::kCephClusters, options.ns, options.cluster);
  if (!cluster) {
    if (cluster.error().code() == ErrorCode::kNotFound) {
      result.rook_present = false;
      result.actions.push_back("no CephCluster " + options.ns + "/" + options.cluster +
                               ": nothing to do for Rook");
      return result;
    }
    return std::move(cluster).error().wrap("get CephCluster");
  }

  // 1. Out of the cluster spec, so the operator does not re-create the OSDs.
  if (auto patch = storageNodesPatch(*cluster, node)) {
    if (!options.dry_run) {
      auto patched = client.patch(kube::resources::kCephClusters, options.ns, options.cluster,
                                  kube::PatchType::kJson, *patch);
      if (!patched)
        return std::move(patched).error().wrap("remove " + std::string(node) +
                                               " from the CephCluster's storage nodes");
    }
    result.actions.push_back(prefix + "remove " + std::string(node) + " from CephCluster " +
                             options.ns + "/" + options.cluster + " spec.storage.nodes");
  }

  // 2. The OSDs scheduled to that host.
  auto deployments = client.list(kube::resources::kDeployments, options.ns,
                                 {.label_selector = "app=rook-ceph-osd"});
  if (!deployments) return std::move(deployments).error().wrap("list OSD Deployments");
  auto osds = osdDeploymentsOnHost(*deployments, hostname);
  if (!osds) return std::move(osds).error();
  result.osds = *osds;

  std::string pod;
  auto run = [&](const std::vector<std::string>& command) -> base::Status {
    if (options.dry_run) {
      result.actions.push_back(prefix + "run `" + joinCommand(command) + "`");
      return base::ok();
    }
    if (pod.empty()) {
      auto found = cephPod(client, options.ns);
      if (!found) return std::move(found).error();
      pod = *found;
    }
    auto ran = exec.exec({.ns = options.ns, .pod = pod, .container = "", .command = command});
    if (!ran) return std::move(ran).error().wrap("`" + joinCommand(command) + "` in " + pod);
    if (ran->exit_code != 0) {
      std::string err = ran->stderr_data.empty() ? ran->stdout_data : ran->stderr_data;
      std::replace(err.begin(), err.end(), '\n', ' ');
      return Error(
          fmt::format("`{}` in {} exited {}: {}", joinCommand(command), pod, ran->exit_code, err),
          ErrorCode::kUnknown);
    }
    result.actions.push_back("ran `" + joinCommand(command) + "` in " + pod);
    base::logInfo("ceph command", {{"pod", pod}, {"command", joinCommand(command)}});
    return base::ok();
  };

  // 3. Each OSD down and purged while its Deployment still names its id.
  for (const OsdDeployment& osd : *osds) {
    const auto commands = cephOsdPurgeCommands(osd.osd_id);
    // `ceph osd down` fails for an OSD that is already down or gone: EKCO ignored it too.
    if (auto down = run(commands[0]); !down) {
      base::logWarn("ceph osd down failed",
                    {{"osd", osd.osd_id}, {"error", down.error().message()}});
    }
    EKCO_TRY(run(commands[1]));
  }
  // 4. The Deployments (their pods cannot run on a dead node anyway).
  for (const OsdDeployment& osd : *osds) {
    if (!options.dry_run) {
      auto removed = client.remove(kube::resources::kDeployments, options.ns, osd.name,
                                   {.propagation_policy = "Background"});
      if (!removed && removed.error().code() != ErrorCode::kNotFound) {
        return removed.error().wrap("delete Deployment " + osd.name);
      }
    }
    result.actions.push_back(prefix + "delete Deployment " + options.ns + "/" + osd.name +
                             " (osd." + osd.osd_id + ")");
  }
  // 5. The host bucket, last: it can only go once it holds no OSD.
  EKCO_TRY(run(cephCrushRemoveCommand(hostname)));
  return result;
}

}  // namespace ekco::rook
