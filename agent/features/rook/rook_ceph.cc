#include "agent/features/rook/rook_ceph.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "agent/policy/node_health.h"
#include "base/log/log.h"
#include "base/os/process.h"
#include "base/utf8.h"
#include "kube/decode/json_fields.h"
#include "kube/resource.h"
#include "rook/purge_node.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

constexpr std::size_t kHistory = 20;
constexpr std::string_view kOperatorConfig = "rook-ceph-operator-config";

std::int64_t intAt(const json& object, std::initializer_list<std::string_view> path,
                   std::int64_t fallback) {
  const json* v = kube::jsonFind(object, path);
  return v != nullptr && v->is_number_integer() ? v->get<std::int64_t>() : fallback;
}

std::string idList(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

}  // namespace

RookCephController::RookCephController(std::function<ObservedNodes()> observe,
                                       kube::KubeClient& client, kube::PodExecutor& exec,
                                       const base::Clock& clock, RookCephOptions options)
    : observe_(std::move(observe)),
      client_(client),
      exec_(exec),
      clock_(clock),
      options_(std::move(options)),
      hold_down_(options_.hold_down) {}

Result<kube::ExecResult> RookCephController::cephRun(const std::vector<std::string>& args) {
  auto pod = rook::cephPod(client_, options_.ns);
  if (!pod) return std::move(pod).error();
  std::vector<std::string> command = {"ceph"};
  command.insert(command.end(), args.begin(), args.end());
  auto ran = exec_.exec({.ns = options_.ns,
                         .pod = *pod,
                         .container = "",
                         .command = command,
                         .timeout = options_.exec_timeout});
  if (!ran) return std::move(ran).error().wrap("`" + base::formatArgv(command) + "` in " + *pod);
  return ran;
}

Result<std::string> RookCephController::ceph(const std::vector<std::string>& args) {
  auto ran = cephRun(args);
  if (!ran) return std::move(ran).error();
  if (ran->exit_code != 0) {
    std::string err = ran->stderr_data.empty() ? ran->stdout_data : ran->stderr_data;
    std::replace(err.begin(), err.end(), '\n', ' ');
    return Error(fmt::format("`ceph {}` exited {}: {}", base::formatArgv(args), ran->exit_code,
                             base::utf8Prefix(err, 512)),
                 ErrorCode::kUnknown);
  }
  return std::move(ran->stdout_data);
}

Result<bool> RookCephController::mayWrite(Pass& pass, const std::string& line) {
  pass.changed = true;
  if (options_.effects.dry_run) {
    if (planned_.insert(line).second) base::logInfo("dry run: would change Rook", {{"plan", line}});
    pass.lines.push_back("would " + line);
    return false;
  }
  if (!options_.effects.leaderFresh()) {
    return Error("not done (" + line + "): this agent's leadership is not fresh",
                 ErrorCode::kUnavailable);
  }
  return true;
}

void RookCephController::changed(Pass& pass, kube::EventSpec event, const std::string& line) {
  base::logInfo("rook: changed", {{"change", line}});
  pass.lines.push_back(line);
  options_.effects.event(event);
  options_.effects.count("rook_changed");
  std::lock_guard lock(mu_);
  history_.push_back({{"change", line}, {"reason", event.reason}});
  if (history_.size() > kHistory) history_.erase(history_.begin());
}

base::Status RookCephController::patchObject(Pass& pass, const kube::Resource& resource,
                                             const std::string& name, kube::PatchType type,
                                             const json& patch,
                                             const std::vector<kube::EventSpec>& events,
                                             const std::string& line) {
  auto write = mayWrite(pass, line);
  if (!write) return std::move(write).error();
  if (!*write) return base::ok();
  auto patched = client_.patch(resource, options_.ns, name, type, patch);
  if (!patched) {
    const ErrorCode code = patched.error().code();
    if (code == ErrorCode::kInvalidArgument || code == ErrorCode::kConflict) {
      pass.conflict = true;
      pass.lines.push_back(fmt::format("{} {}/{} changed since it was read; looking again",
                                       resource.kind, options_.ns, name));
      return base::ok();
    }
    return std::move(patched).error().wrap(fmt::format("patch {} {}", resource.kind, name));
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    changed(pass, events[i], i == 0 ? line : events[i].message);
  }
  return base::ok();
}

base::Status RookCephController::csiResources(Pass& pass, std::size_t nodes) {
  if (nodes < 3) {
    pass.lines.push_back(fmt::format("ceph csi resources: {} nodes, set at 3", nodes));
    return base::ok();
  }
  const std::string name(kOperatorConfig);
  auto cm = client_.get(kube::resources::kConfigMaps, options_.ns, name);
  if (!cm) {
    if (cm.error().code() == ErrorCode::kNotFound) return base::ok();
    return std::move(cm).error().wrap("read ConfigMap " + name);
  }
  auto patch = rook::cephCsiResourcesPatch(*cm);
  if (!patch) return base::ok();
  const std::string line = fmt::format(
      "set the CSI_*_RESOURCE keys of ConfigMap {}/{} to the recommended requests/limits ({} "
      "nodes)",
      options_.ns, name, nodes);
  return patchObject(pass, kube::resources::kConfigMaps, name, kube::PatchType::kMerge, *patch,
                     {{.involved_resource = kube::resources::kConfigMaps,
                       .involved_namespace = options_.ns,
                       .involved_name = name,
                       .reason = "CephCsiResourcesSet",
                       .message = "ekco " + line}},
                     line);
}

base::Status RookCephController::mdsPlacement(Pass& pass, std::size_t nodes) {
  if (nodes < 2 || options_.filesystem.empty()) return base::ok();
  auto fs = client_.get(kube::resources::kCephFilesystems, options_.ns, options_.filesystem);
  if (!fs) {
    if (fs.error().code() == ErrorCode::kNotFound) return base::ok();
    return std::move(fs).error().wrap("read CephFilesystem " + options_.filesystem);
  }
  if (!rook::hasSingleNodeMdsPlacement(*fs)) return base::ok();
  const std::string line = fmt::format(
      "set CephFilesystem {}/{} MDS placement to required anti-affinity per host ({} nodes)",
      options_.ns, options_.filesystem, nodes);
  return patchObject(pass, kube::resources::kCephFilesystems, options_.filesystem,
                     kube::PatchType::kMerge, rook::multiNodeMdsPlacementPatch(),
                     {{.involved_resource = kube::resources::kCephFilesystems,
                       .involved_namespace = options_.ns,
                       .involved_name = options_.filesystem,
                       .reason = "MdsPlacementUpdated",
                       .message = "ekco " + line}},
                     line);
}

base::Status RookCephController::storageNodes(Pass& pass, const json& cluster,
                                              const std::vector<kube::NodeRecord>& nodes) {
  if (options_.user_managed_nodes) {
    pass.lines.push_back("storage nodes: managed by the user (rook_storage_nodes)");
    return base::ok();
  }
  std::set<std::string> labelled;
  if (!options_.storage_nodes_label.empty()) {
    auto list =
        client_.list(kube::resources::kNodes, "", {.label_selector = options_.storage_nodes_label});
    if (!list) return std::move(list).error().wrap("list nodes " + options_.storage_nodes_label);
    for (const json& n : list->value("items", json::array())) {
      const json* name = kube::jsonFind(n, {"metadata", "name"});
      if (name != nullptr && name->is_string()) labelled.insert(name->get<std::string>());
    }
  }
  std::vector<std::string> candidates;
  for (const auto& n : nodes) {
    if (!isReady(n)) continue;
    if (!options_.storage_nodes_label.empty() && !labelled.count(std::string(n.name.view()))) {
      continue;
    }
    candidates.emplace_back(n.name.view());
  }
  auto patch = rook::storageNodesAppendPatch(cluster, candidates);
  if (!patch) return base::ok();
  const auto have = rook::storageNodeNames(cluster);
  std::string added;
  for (const auto& c : candidates) {
    if (std::find(have.begin(), have.end(), c) == have.end())
      added += (added.empty() ? "" : ", ") + c;
  }
  const std::string line = fmt::format("append {} to CephCluster {}/{} spec.storage.nodes", added,
                                       options_.ns, options_.cluster);
  return patchObject(
      pass, kube::resources::kCephClusters, options_.cluster, kube::PatchType::kJson, *patch,
      {{.involved_resource = kube::resources::kCephClusters,
        .involved_namespace = options_.ns,
        .involved_name = options_.cluster,
        .reason = "StorageNodesAdded",
        .message = "ekco appended " + added + " to spec.storage.nodes (Ready nodes)"}},
      line);
}

base::Status RookCephController::monMgrCounts(Pass& pass, const json& /*first_read*/,
                                              std::int64_t up_hosts) {
  // Read again: step 3a may have patched it.
  auto cluster = client_.get(kube::resources::kCephClusters, options_.ns, options_.cluster);
  if (!cluster) return std::move(cluster).error().wrap("read CephCluster");
  // Rook's defaults when unset: 3 mons, 1 mgr.
  const std::int64_t mons = intAt(*cluster, {"spec", "mon", "count"}, 3);
  const std::int64_t mgrs = intAt(*cluster, {"spec", "mgr", "count"}, 1);
  json patch = json::array({kube::resourceVersionTest(kube::jsonResourceVersion(*cluster))});
  std::vector<kube::EventSpec> events;
  std::vector<std::string> lines;
  auto raise = [&](const char* what, const char* field, std::int64_t from, std::int64_t to) {
    const json* parent = kube::jsonFind(*cluster, {"spec", field});
    if (parent != nullptr && parent->is_object()) {
      patch.push_back(
          {{"op", "add"}, {"path", fmt::format("/spec/{}/count", field)}, {"value", to}});
    } else {
      patch.push_back(
          {{"op", "add"}, {"path", fmt::format("/spec/{}", field)}, {"value", {{"count", to}}}});
    }
    lines.push_back(fmt::format("raise the {} count {} -> {} ({} hosts with an up OSD)", what, from,
                                to, up_hosts));
    events.push_back({.involved_resource = kube::resources::kCephClusters,
                      .involved_namespace = options_.ns,
                      .involved_name = options_.cluster,
                      .reason = std::string(what) == "mon" ? "MonCountRaised" : "MgrCountRaised",
                      .message = fmt::format("ekco raised the {} count {} -> {} ({} hosts with "
                                             "an up OSD); it is never lowered",
                                             what, from, to, up_hosts)});
  };
  if (auto m = rook::desiredMonCount(mons, up_hosts)) raise("mon", "mon", mons, *m);
  if (auto m = rook::desiredMgrCount(mgrs, up_hosts)) raise("mgr", "mgr", mgrs, *m);
  pass.pools["mon_count"] = mons;
  pass.pools["mgr_count"] = mgrs;
  if (events.empty()) return base::ok();
  std::string line;
  for (const auto& l : lines) line += (line.empty() ? "" : "; ") + l;
  return patchObject(pass, kube::resources::kCephClusters, options_.cluster, kube::PatchType::kJson,
                     patch, events, line);
}

Result<bool> RookCephController::decreaseAllowed(Pass& pass, const rook::OsdTree& tree,
                                                 const kube::EventSpec& involved,
                                                 const std::string& what) {
  const std::vector<std::int64_t> down = tree.down();
  if (down.empty()) return true;
  std::vector<std::string> args = {"osd", "safe-to-destroy"};
  for (auto id : down) args.push_back(std::to_string(id));
  args.insert(args.end(), {"-f", "json"});
  auto ran = cephRun(args);
  if (!ran) return std::move(ran).error();
  std::string why;
  if (ran->exit_code != 0) {
    // EAGAIN while PGs are still peering: Ceph cannot answer yet, which is a no.
    std::string err = ran->stderr_data;
    std::replace(err.begin(), err.end(), '\n', ' ');
    why = fmt::format("`ceph osd safe-to-destroy {}` could not answer (exit {}: {})", idList(down),
                      ran->exit_code, base::utf8Prefix(err, 200));
  } else {
    auto safe = rook::safeToDestroy(ran->stdout_data, down);
    if (!safe) return std::move(safe).error();
    if (*safe) return true;
    why = fmt::format("`ceph osd safe-to-destroy {}` says their data has no other copy yet",
                      idList(down));
  }
  const std::string line = "not lowering " + what + ": " + why;
  pass.lines.push_back(line);
  if (!options_.effects.dry_run && refused_.insert(what + "|" + idList(down)).second) {
    base::logWarn("rook: decrease refused", {{"pool", what}, {"reason", why}});
    kube::EventSpec event = involved;
    event.reason = "ReplicationDecreaseRefused";
    event.type = "Warning";
    event.message = "ekco did " + line + " (see docs/features/rook.md#safety-rules)";
    options_.effects.event(event);
  }
  return false;
}

Result<ReconcileResult> RookCephController::reconcile() {
  const ObservedNodes observed = observe_();
  if (!observed.synced) return ReconcileResult{.summary = "waiting for the node cache"};
  const std::string where = options_.ns + "/" + options_.cluster;
  auto cluster = client_.get(kube::resources::kCephClusters, options_.ns, options_.cluster);
  if (!cluster) {
    const ErrorCode code = cluster.error().code();
    if (code == ErrorCode::kNotFound || code == ErrorCode::kPermissionDenied) {
      const std::string why = code == ErrorCode::kNotFound
                                  ? "no CephCluster " + where + ": nothing to do"
                                  : "not permitted to read CephCluster " + where +
                                        " (kubectl apply -f deploy-rook-ceph/ grants it)";
      std::lock_guard lock(mu_);
      status_ = {{"cluster", where},
                 {"present", code == ErrorCode::kNotFound ? json(false) : json(nullptr)},
                 {"summary", why}};
      return ReconcileResult{.summary = why, .requeue_after = options_.interval};
    }
    return std::move(cluster).error().wrap("read CephCluster " + where);
  }
  Pass pass;
  std::vector<std::string> errors;
  auto step = [&](const char* what, base::Status s) {
    if (!s) errors.push_back(std::string(what) + ": " + s.error().message());
  };
  json ceph_status = json::object();
  if (options_.csi_resources) step("ceph csi resources", csiResources(pass, observed.nodes.size()));
  if (options_.mds_placement) step("mds placement", mdsPlacement(pass, observed.nodes.size()));
  if (options_.maintain_storage) {
    step("storage nodes", storageNodes(pass, *cluster, observed.nodes));
    auto text = ceph({"osd", "tree", "-f", "json"});
    auto tree = text ? rook::parseOsdTree(*text) : Result<rook::OsdTree>(text.error());
    if (!tree) {
      errors.push_back("ceph osd tree: " + tree.error().message());
    } else {
      const auto up_hosts = static_cast<std::int64_t>(tree->up_hosts.size());
      const std::int64_t factor =
          rook::replicationFactor(up_hosts, options_.min_replication, options_.max_replication);
      const base::MonoTime now = clock_.monoNow();
      hold_down_.observe(factor, now);
      const auto floor = hold_down_.decreaseFloor(now);
      ceph_status = {{"up_hosts", tree->up_hosts},
                     {"osds", tree->osds.size()},
                     {"down_in", tree->down_in()},
                     {"factor", factor},
                     {"decrease_floor", floor ? json(*floor) : json(nullptr)}};
      step("mon/mgr counts", monMgrCounts(pass, *cluster, up_hosts));
      step("CephBlockPool", blockPool(pass, *tree, factor));
      step("CephFilesystem",
           raiseOnlyPools(pass, kube::resources::kCephFilesystems, options_.filesystem, factor));
      step("CephObjectStore",
           raiseOnlyPools(pass, kube::resources::kCephObjectStores, options_.object_store, factor));
      step("built-in pool", builtinPool(pass, *tree, factor));
    }
  }
  ReconcileResult result;
  for (const auto& l : pass.lines) result.plan += (result.plan.empty() ? "" : "\n") + l;
  result.summary = pass.conflict ? "a Rook object changed meanwhile; looking again"
                   : pass.changed
                       ? (options_.effects.dry_run ? "would change Rook (dry run)" : "changed Rook")
                       : "Rook as wanted";
  result.requeue_after =
      pass.conflict ? std::chrono::milliseconds(std::chrono::seconds(1)) : options_.interval;
  {
    std::lock_guard lock(mu_);
    status_ = {{"cluster", where},
               {"present", true},
               {"nodes", observed.nodes.size()},
               {"ceph", ceph_status},
               {"objects", pass.pools},
               {"plan", pass.lines},
               {"errors", errors},
               {"summary", result.summary},
               {"hold_down", base::formatDuration(options_.hold_down)},
               {"dry_run", options_.effects.dry_run}};
  }
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "; ") + e;
    return Error(all, ErrorCode::kUnknown);
  }
  return result;
}

json RookCephController::status() const {
  std::lock_guard lock(mu_);
  json s = status_;
  s["history"] = history_;
  return s;
}

ControllerSpec rookCephSpec() {
  return {
      .name = "rook-ceph",
      .scope = Scope::kLeader,
      .status_key = "rook_ceph",
      .enabled =
          [](const Config& c) {
            return c.maintain_rook_storage_nodes || c.reconcile_rook_mds_placement ||
                   c.reconcile_ceph_csi_resources;
          },
      .watches = {clusterNodesWatch()},
      .pauses_in_maintenance = true,  // patches Rook CRs, sets Ceph pool sizes
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        const Config& c = d.config;
        return std::make_shared<RookCephController>(
            std::move(*nodes), d.client, d.exec, d.clock,
            RookCephOptions{.maintain_storage = c.maintain_rook_storage_nodes,
                            .user_managed_nodes = !c.rook_storage_nodes.empty(),
                            .storage_nodes_label = c.rook_storage_nodes_label,
                            .mds_placement = c.reconcile_rook_mds_placement,
                            .csi_resources = c.reconcile_ceph_csi_resources,
                            .block_pool = c.ceph_block_pool,
                            .filesystem = c.ceph_filesystem,
                            .object_store = c.ceph_object_store,
                            .min_replication = c.min_ceph_pool_replication,
                            .max_replication = c.max_ceph_pool_replication,
                            .hold_down = c.ceph_pool_replication_hold_down,
                            .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                                c.reconcile_interval),
                            .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
