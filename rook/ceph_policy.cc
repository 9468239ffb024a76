#include "rook/ceph_policy.h"
#include "kube/decode/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace ekco::rook {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

Error parseError(std::string_view what, std::string_view why) {
  return Error(fmt::format("{}: {}", what, why), ErrorCode::kParse);
}

std::string joinIds(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "" : ", ") + fmt::format("osd.{}", id);
  return out;
}

// "- name : C\n  resource:\n    requests:\n      memory: M\n      cpu: C\n    limits:..." for
// each container, as EKCO writes the operator's CSI_*_RESOURCE values.
struct Sizing {
  const char* req_mem;
  const char* req_cpu;
  const char* lim_mem;
  const char* lim_cpu;
};
constexpr Sizing kSidecar{"128Mi", "100m", "256Mi", "200m"};  // provisioner, resizer, ...
constexpr Sizing kPlugin{"512Mi", "250m", "1Gi", "500m"};     // the CSI drivers, omap generator
constexpr Sizing kSmall{"128Mi", "50m", "256Mi", "100m"};     // registrar, liveness

std::string containers(std::initializer_list<std::pair<const char*, Sizing>> list) {
  std::string out;
  for (const auto& [name, s] : list) {
    out += fmt::format(
        "- name : {}\n  resource:\n    requests:\n      memory: {}\n      cpu: {}\n"
        "    limits:\n      memory: {}\n      cpu: {}\n",
        name, s.req_mem, s.req_cpu, s.lim_mem, s.lim_cpu);
  }
  return out;
}

}  // namespace

std::vector<std::int64_t> OsdTree::down_in() const {
  std::vector<std::int64_t> out;
  for (const auto& o : osds) {
    if (!o.up && o.in) out.push_back(o.id);
  }
  return out;
}

std::vector<std::int64_t> OsdTree::down() const {
  std::vector<std::int64_t> out;
  for (const auto& o : osds) {
    if (!o.up) out.push_back(o.id);
  }
  return out;
}

base::Result<OsdTree> parseOsdTree(std::string_view text) {
  constexpr std::string_view kWhat = "ceph osd tree -f json";
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return parseError(kWhat, "not JSON");
  const json* nodes = kube::jsonFind(doc, {"nodes"});
  if (nodes == nullptr || !nodes->is_array()) return parseError(kWhat, "no \"nodes\" list");
  std::map<std::int64_t, OsdState> osds;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> hosts;
  for (const json& n : *nodes) {
    if (!n.is_object()) return parseError(kWhat, "a node is not an object");
    const json* id = kube::jsonFind(n, {"id"});
    const json* type = kube::jsonFind(n, {"type"});
    if (id == nullptr || !id->is_number_integer() || type == nullptr || !type->is_string()) {
      return parseError(kWhat, "a node without an integer \"id\" and a \"type\"");
    }
    const std::string t = type->get<std::string>();
    if (t == "osd") {
      const json* status = kube::jsonFind(n, {"status"});
      const json* reweight = kube::jsonFind(n, {"reweight"});
      OsdState s{.id = id->get<std::int64_t>()};
      s.up = status != nullptr && status->is_string() && status->get<std::string>() == "up";
      s.in = reweight != nullptr && reweight->is_number() && reweight->get<double>() > 0;
      osds[s.id] = s;
    } else if (t == "host") {
      const json* name = kube::jsonFind(n, {"name"});
      const json* children = kube::jsonFind(n, {"children"});
      if (name == nullptr || !name->is_string()) return parseError(kWhat, "a host without a name");
      std::vector<std::int64_t> ids;
      if (children != nullptr) {
        if (!children->is_array()) return parseError(kWhat, "a host's children is not a list");
        for (const json& c : *children) {
          if (!c.is_number_integer()) return parseError(kWhat, "a child id is not an integer");
          ids.push_back(c.get<std::int64_t>());
        }
      }
      hosts.emplace_back(name->get<std::string>(), std::move(ids));
    }
  }
  OsdTree tree;
  for (const auto& [host, ids] : hosts) {
    for (std::int64_t id : ids) {
      auto it = osds.find(id);
      if (it == osds.end()) continue;  // a bucket below the host, not an OSD
      it->second.host = host;
      tree.hosts.insert(host);
      if (it->second.up) tree.up_hosts.insert(host);
      tree.osds.push_back(it->second);
    }
  }
  std::sort(tree.osds.begin(), tree.osds.end(),
            [](const OsdState& a, const OsdState& b) { return a.id < b.id; });
  return tree;
}

std::int64_t replicationFactor(std::int64_t up_hosts, std::int64_t min, std::int64_t max) {
  return std::clamp(up_hosts, min, std::max(min, max));
}

void HoldDown::observe(std::int64_t factor, base::MonoTime now) {
  if (!first_) first_ = now;
  if (changes_.empty() || changes_.back().second != factor) changes_.emplace_back(now, factor);
  // Keep the newest change at or before the window's start: its value lasted into the window.
  while (changes_.size() > 1 && changes_[1].first <= now - hold_) changes_.pop_front();
}

std::optional<std::int64_t> HoldDown::decreaseFloor(base::MonoTime now) const {
  if (!first_ || now - *first_ <= hold_ || changes_.empty()) return std::nullopt;
  // Every value in effect at some moment of the window (now - hold, now].
  std::int64_t floor = 0;
  for (std::size_t i = 0; i < changes_.size(); ++i) {
    const bool last = i + 1 == changes_.size();
    if (last || changes_[i + 1].first > now - hold_) floor = std::max(floor, changes_[i].second);
  }
  return floor;
}

std::optional<base::MonoTime> HoldDown::since() const {
  if (changes_.empty()) return std::nullopt;
  return changes_.back().first;
}

SizeDecision decidePoolSize(std::int64_t current, std::int64_t factor, PoolPolicy policy,
                            std::optional<std::int64_t> floor,
                            const std::vector<std::int64_t>& down_in) {
  if (current < factor) {
    return {.set = factor,
            .reason = fmt::format("raise size {} -> {}: the factor from the hosts with an up OSD",
                                  current, factor)};
  }
  if (current == factor) return {.reason = fmt::format("size {} as wanted", current)};
  if (policy == PoolPolicy::kRaiseOnly) {
    return {.reason = fmt::format("size {} above the factor {}: this pool is only raised", current,
                                  factor)};
  }
  if (!down_in.empty()) {
    return {.reason = fmt::format("size {} above the factor {}: not lowered while OSDs are down "
                                  "but in ({})",
                                  current, factor, joinIds(down_in))};
  }
  if (!floor) {
    return {.reason = fmt::format("size {} above the factor {}: held until the lower count has "
                                  "lasted the hold-down",
                                  current, factor)};
  }
  const std::int64_t target = std::max(factor, *floor);
  if (target >= current) {
    return {.reason = fmt::format("size {} above the factor {}: held (the count was {} within "
                                  "the hold-down)",
                                  current, factor, *floor)};
  }
  return {.set = target,
          .decrease = true,
          .reason = fmt::format("lower size {} -> {}: fewer hosts with an up OSD for longer than "
                                "the hold-down",
                                current, target)};
}

std::optional<std::int64_t> desiredMonCount(std::int64_t current, std::int64_t up_hosts) {
  if (up_hosts >= 3 && current < 3) return 3;
  return std::nullopt;
}

std::optional<std::int64_t> desiredMgrCount(std::int64_t current, std::int64_t up_hosts) {
  if (up_hosts >= 2 && current < 2) return 2;
  return std::nullopt;
}

std::vector<std::string> storageNodeNames(const json& ceph_cluster) {
  std::vector<std::string> out;
  const json* nodes = kube::jsonFind(ceph_cluster, {"spec", "storage", "nodes"});
  if (nodes == nullptr || !nodes->is_array()) return out;
  for (const json& n : *nodes) {
    if (n.is_object() && n.contains("name") && n["name"].is_string()) {
      out.push_back(n["name"].get<std::string>());
    }
  }
  return out;
}

std::optional<json> storageNodesAppendPatch(const json& ceph_cluster,
                                            const std::vector<std::string>& candidates) {
  const json* use_all = kube::jsonFind(ceph_cluster, {"spec", "storage", "useAllNodes"});
  if (use_all != nullptr && use_all->is_boolean() && use_all->get<bool>()) return std::nullopt;
  const std::vector<std::string> names = storageNodeNames(ceph_cluster);
  const std::set<std::string> have(names.begin(), names.end());
  std::set<std::string> missing;
  for (const auto& c : candidates) {
    if (!have.count(c)) missing.insert(c);
  }
  if (missing.empty()) return std::nullopt;
  const json* rv = kube::jsonFind(ceph_cluster, {"metadata", "resourceVersion"});
  json patch = json::array();
  if (rv != nullptr && rv->is_string()) {
    patch.push_back(kube::resourceVersionTest(rv->get<std::string>()));
  }
  const json* storage = kube::jsonFind(ceph_cluster, {"spec", "storage"});
  const json* nodes = kube::jsonFind(ceph_cluster, {"spec", "storage", "nodes"});
  json added = json::array();
  for (const auto& m : missing) added.push_back({{"name", m}});
  if (storage == nullptr || !storage->is_object()) {
    patch.push_back({{"op", "add"}, {"path", "/spec/storage"}, {"value", {{"nodes", added}}}});
  } else if (nodes == nullptr || !nodes->is_array()) {
    patch.push_back({{"op", "add"}, {"path", "/spec/storage/nodes"}, {"value", added}});
  } else {
    for (const json& a : added) {
      patch.push_back({{"op", "add"}, {"path", "/spec/storage/nodes/-"}, {"value", a}});
    }
  }
  return patch;
}

bool hasSingleNodeMdsPlacement(const json& filesystem) {
  const json* preferred =
      kube::jsonFind(filesystem, {"spec", "metadataServer", "placement", "podAntiAffinity",
                                  "preferredDuringSchedulingIgnoredDuringExecution"});
  return preferred != nullptr && preferred->is_array() && preferred->size() == 2;
}

json multiNodeMdsPlacementPatch() {
  const json selector = {
      {"matchExpressions", {{{"key", "app"}, {"operator", "In"}, {"values", {"rook-ceph-mds"}}}}}};
  return {{"spec",
           {{"metadataServer",
             {{"placement",
               {{"podAntiAffinity",
                 {{"requiredDuringSchedulingIgnoredDuringExecution",
                   {{{"labelSelector", selector}, {"topologyKey", "kubernetes.io/hostname"}}}},
                  {"preferredDuringSchedulingIgnoredDuringExecution",
                   {{{"weight", 100},
                     {"podAffinityTerm",
                      {{"labelSelector", selector},
                       {"topologyKey", "topology.kubernetes.io/zone"}}}}}}}}}}}}}}};
}

const std::vector<std::pair<std::string, std::string>>& cephCsiResources() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"CSI_RBD_PROVISIONER_RESOURCE", containers({{"csi-provisioner", kSidecar},
                                                   {"csi-resizer", kSidecar},
                                                   {"csi-attacher", kSidecar},
                                                   {"csi-snapshotter", kSidecar},
                                                   {"csi-rbdplugin", kPlugin},
                                                   {"csi-omap-generator", kPlugin},
                                                   {"liveness-prometheus", kSmall}})},
      {"CSI_RBD_PLUGIN_RESOURCE", containers({{"driver-registrar", kSmall},
                                              {"csi-rbdplugin", kPlugin},
                                              {"liveness-prometheus", kSmall}})},
      {"CSI_CEPHFS_PROVISIONER_RESOURCE", containers({{"csi-provisioner", kSidecar},
                                                      {"csi-resizer", kSidecar},
                                                      {"csi-attacher", kSidecar},
                                                      {"csi-snapshotter", kSidecar},
                                                      {"csi-cephfsplugin", kPlugin},
                                                      {"liveness-prometheus", kSmall}})},
      {"CSI_CEPHFS_PLUGIN_RESOURCE", containers({{"driver-registrar", kSmall},
                                                 {"csi-cephfsplugin", kPlugin},
                                                 {"liveness-prometheus", kSmall}})},
      {"CSI_NFS_PROVISIONER_RESOURCE",
       containers({{"csi-provisioner", kSidecar}, {"csi-nfsplugin", kPlugin}})},
      {"CSI_NFS_PLUGIN_RESOURCE",
       containers({{"driver-registrar", kSmall}, {"csi-nfsplugin", kPlugin}})},
  };
  return table;
}

std::optional<json> cephCsiResourcesPatch(const json& config_map) {
  const json* data = kube::jsonFind(config_map, {"data"});
  bool differs = false;
  json values = json::object();
  for (const auto& [key, value] : cephCsiResources()) {
    values[key] = value;
    const json* have = data != nullptr ? kube::jsonFind(*data, {key.c_str()}) : nullptr;
    if (have == nullptr || !have->is_string() || have->get<std::string>() != value) differs = true;
  }
  if (!differs) return std::nullopt;
  return json{{"data", values}};
}

base::Result<bool> safeToDestroy(std::string_view text, const std::vector<std::int64_t>& ids) {
  constexpr std::string_view kWhat = "ceph osd safe-to-destroy -f json";
  json doc = json::parse(text, nullptr, false);
  const json* safe = doc.is_discarded() ? nullptr : kube::jsonFind(doc, {"safe_to_destroy"});
  if (safe == nullptr || !safe->is_array()) return parseError(kWhat, "no \"safe_to_destroy\" list");
  std::set<std::int64_t> ok;
  for (const json& id : *safe) {
    if (id.is_number_integer()) ok.insert(id.get<std::int64_t>());
  }
  return std::all_of(ids.begin(), ids.end(), [&](std::int64_t id) { return ok.count(id) != 0; });
}

}  // namespace ekco::rook
