// rook-ceph step 3d: pool sizes (agent/features/rook/rook_ceph.h).
#include <fmt/format.h>

#include "agent/features/rook/rook_ceph.h"
#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

// spec...replicated.size of one pool section, or nullopt (erasure-coded, or unset).
std::optional<std::int64_t> replicatedSize(const json& pool) {
  const json* size = kube::jsonFind(pool, {"replicated", "size"});
  if (size == nullptr || !size->is_number_integer()) return std::nullopt;
  return size->get<std::int64_t>();
}

}  // namespace

base::Status RookCephController::blockPool(Pass& pass, const rook::OsdTree& tree,
                                           std::int64_t factor) {
  if (options_.block_pool.empty()) return base::ok();
  const std::string key = "CephBlockPool/" + options_.block_pool;
  auto pool = client_.get(kube::resources::kCephBlockPools, options_.ns, options_.block_pool);
  if (!pool) {
    if (pool.error().code() == ErrorCode::kNotFound) {
      pass.pools[key] = {{"present", false}};
      return base::ok();
    }
    return std::move(pool).error().wrap("read CephBlockPool " + options_.block_pool);
  }
  const json* spec = kube::jsonFind(*pool, {"spec"});
  auto current = spec != nullptr ? replicatedSize(*spec) : std::nullopt;
  if (!current) {
    pass.pools[key] = {{"present", true}, {"decision", "not replicated: left alone"}};
    return base::ok();
  }
  const auto decision =
      rook::decidePoolSize(*current, factor, rook::PoolPolicy::kFollow,
                           hold_down_.decreaseFloor(clock_.monoNow()), tree.down_in());
  pass.pools[key] = {{"present", true}, {"size", *current}, {"decision", decision.reason}};
  if (!decision.set && *current != factor) pass.lines.push_back(key + ": " + decision.reason);
  if (!decision.set) return base::ok();
  const kube::EventSpec event{
      .involved_resource = kube::resources::kCephBlockPools,
      .involved_namespace = options_.ns,
      .involved_name = options_.block_pool,
      .reason = "PoolReplicationChanged",
      .message = fmt::format("ekco set spec.replicated.size: {}", decision.reason)};
  if (decision.decrease) {
    auto allowed = decreaseAllowed(pass, tree, event, key);
    if (!allowed) return std::move(allowed).error();
    if (!*allowed) return base::ok();
  }
  const json patch =
      json::array({kube::resourceVersionTest(kube::jsonResourceVersion(*pool)),
                   {{"op", "add"}, {"path", "/spec/replicated/size"}, {"value", *decision.set}}});
  return patchObject(pass, kube::resources::kCephBlockPools, options_.block_pool,
                     kube::PatchType::kJson, patch, {event},
                     fmt::format("{}: {}", key, decision.reason));
}

base::Status RookCephController::raiseOnlyPools(Pass& pass, const kube::Resource& resource,
                                                const std::string& name, std::int64_t factor) {
  if (name.empty()) return base::ok();
  const std::string key = resource.kind + "/" + name;
  auto object = client_.get(resource, options_.ns, name);
  if (!object) {
    if (object.error().code() == ErrorCode::kNotFound) {
      pass.pools[key] = {{"present", false}};
      return base::ok();
    }
    return std::move(object).error().wrap("read " + key);
  }
  // The pool sections: CephFilesystem metadataPool + dataPools[i]; CephObjectStore metadataPool
  // + dataPool.
  std::vector<std::pair<std::string, const json*>> sections;
  if (const json* m = kube::jsonFind(*object, {"spec", "metadataPool"}))
    sections.emplace_back("/spec/metadataPool", m);
  if (const json* d = kube::jsonFind(*object, {"spec", "dataPool"}))
    sections.emplace_back("/spec/dataPool", d);
  if (const json* ds = kube::jsonFind(*object, {"spec", "dataPools"});
      ds != nullptr && ds->is_array()) {
    for (std::size_t i = 0; i < ds->size(); ++i) {
      sections.emplace_back(fmt::format("/spec/dataPools/{}", i), &(*ds)[i]);
    }
  }
  json patch = json::array({kube::resourceVersionTest(kube::jsonResourceVersion(*object))});
  json sizes = json::object();
  std::string raised;
  for (const auto& [path, section] : sections) {
    auto current = replicatedSize(*section);
    if (!current) continue;
    sizes[path] = *current;
    const auto d =
        rook::decidePoolSize(*current, factor, rook::PoolPolicy::kRaiseOnly, std::nullopt, {});
    if (!d.set) continue;
    patch.push_back({{"op", "add"}, {"path", path + "/replicated/size"}, {"value", *d.set}});
    raised +=
        fmt::format("{}{} {} -> {}", raised.empty() ? "" : ", ", path.substr(6), *current, *d.set);
  }
  pass.pools[key] = {{"present", true}, {"sizes", sizes}, {"policy", "only raised"}};
  if (raised.empty()) return base::ok();
  const std::string line =
      fmt::format("{}: raise replicated.size of {} (factor {})", key, raised, factor);
  return patchObject(pass, resource, name, kube::PatchType::kJson, patch,
                     {{.involved_resource = resource,
                       .involved_namespace = options_.ns,
                       .involved_name = name,
                       .reason = "PoolReplicationChanged",
                       .message = "ekco raised replicated.size of " + raised}},
                     line);
}

base::Status RookCephController::builtinPool(Pass& pass, const rook::OsdTree& tree,
                                             std::int64_t factor) {
  auto listed = ceph({"osd", "pool", "ls", "-f", "json"});
  if (!listed) return std::move(listed).error();
  json names = json::parse(*listed, nullptr, false);
  if (!names.is_array())
    return base::Error("`ceph osd pool ls -f json`: not a JSON list", ErrorCode::kParse);
  std::string pool;
  for (const char* candidate : {".mgr", "device_health_metrics"}) {
    if (std::find(names.begin(), names.end(), json(candidate)) != names.end()) {
      pool = candidate;
      break;
    }
  }
  if (pool.empty()) return base::ok();
  auto got = ceph({"osd", "pool", "get", pool, "size", "-f", "json"});
  if (!got) return std::move(got).error();
  json size_doc = json::parse(*got, nullptr, false);
  const json* size = size_doc.is_discarded() ? nullptr : kube::jsonFind(size_doc, {"size"});
  if (size == nullptr || !size->is_number_integer()) {
    return base::Error("`ceph osd pool get " + pool + " size -f json`: no integer \"size\"",
                       ErrorCode::kParse);
  }
  const std::int64_t current = size->get<std::int64_t>();
  const auto decision =
      rook::decidePoolSize(current, factor, rook::PoolPolicy::kFollow,
                           hold_down_.decreaseFloor(clock_.monoNow()), tree.down_in());
  pass.pools["pool/" + pool] = {{"size", current}, {"decision", decision.reason}};
  if (!decision.set && current != factor) {
    pass.lines.push_back("pool " + pool + ": " + decision.reason);
  }
  if (!decision.set) return base::ok();
  const kube::EventSpec event{
      .involved_resource = kube::resources::kCephClusters,
      .involved_namespace = options_.ns,
      .involved_name = options_.cluster,
      .reason = "PoolReplicationChanged",
      .message = fmt::format("ekco set the size of Ceph pool {}: {}", pool, decision.reason)};
  if (decision.decrease) {
    auto allowed = decreaseAllowed(pass, tree, event, "pool " + pool);
    if (!allowed) return std::move(allowed).error();
    if (!*allowed) return base::ok();
  }
  const std::int64_t n = *decision.set;
  const std::string line = fmt::format("pool {}: {}", pool, decision.reason);
  auto write = mayWrite(pass, line);
  if (!write) return std::move(write).error();
  if (!*write) return base::ok();
  std::vector<std::string> set_size = {"osd", "pool", "set", pool, "size", std::to_string(n)};
  if (n == 1) set_size.push_back("--yes-i-really-mean-it");  // Ceph 16+ refuses size 1 without
  auto sized = ceph(set_size);
  if (!sized) return std::move(sized).error();
  auto min_sized = ceph({"osd", "pool", "set", pool, "min_size", n == 1 ? "1" : "2"});
  if (!min_sized) return std::move(min_sized).error();
  changed(pass, event, line);
  return base::ok();
}

}  // namespace ekco::agent
