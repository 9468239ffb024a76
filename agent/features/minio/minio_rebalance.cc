#include "agent/features/minio/minio_rebalance.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/features/minio/minio_ha.h"
#include "agent/policy/storage_migration.h"
#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

namespace r = kube::resources;

constexpr const char* kMaintenanceHealth = "/minio/health/cluster?maintenance=true";

// The StatefulSet ordinal of "ha-minio-12" (12), or -1: pods are ordered by it, not by name.
long ordinal(const std::string& name) {
  const auto dash = name.rfind('-');
  if (dash == std::string::npos) return -1;
  long n = -1;
  auto [end, ec] = std::from_chars(name.data() + dash + 1, name.data() + name.size(), n);
  return ec == std::errc() && end == name.data() + name.size() ? n : -1;
}

bool byOrdinal(const MinioRebalancePod* a, const MinioRebalancePod* b) {
  const long oa = ordinal(a->name);
  const long ob = ordinal(b->name);
  return oa != ob ? oa < ob : a->name < b->name;
}

std::string duration(std::chrono::nanoseconds d) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}s", s);
}

std::string answered(const MinioRebalancePod& p) {
  return p.maintenance_status ? fmt::format("{} answered {}", p.name, *p.maintenance_status)
                              : fmt::format("{} did not answer", p.name);
}

// The decision reads API objects field by field and never throws on a field of another type.
using kube::jsonField;
using kube::jsonText;

}  // namespace

std::vector<std::string> claimTemplateNames(const json& sts) {
  std::vector<std::string> names;
  const json& templates = jsonField(jsonField(sts, "spec"), "volumeClaimTemplates");
  if (!templates.is_array()) return names;
  for (const json& t : templates) {
    const std::string name = jsonText(jsonField(t, "metadata"), "name");
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

MinioRebalancePod minioRebalancePod(const json& pod, const std::vector<std::string>& templates) {
  MinioRebalancePod p;
  const json& meta = jsonField(pod, "metadata");
  const json& status = jsonField(pod, "status");
  p.name = jsonText(meta, "name");
  p.uid = jsonText(meta, "uid");
  p.terminating = !jsonField(meta, "deletionTimestamp").is_null();
  p.host_ip = jsonText(status, "hostIP");
  p.phase = jsonText(status, "phase");
  const json& conditions = jsonField(status, "conditions");
  if (conditions.is_array()) {
    for (const json& c : conditions) {
      const std::string type = jsonText(c, "type");
      const std::string value = jsonText(c, "status");
      if (type == "Ready") p.ready = value == "True";
      if (type == "PodScheduled" && value == "False") {
        auto since = kube::parseRfc3339(jsonText(c, "lastTransitionTime"));
        if (since) p.unschedulable_since = *since;
      }
    }
  }
  // The claim its StatefulSet gave it: <template>-<pod>, and the pod mounts exactly that one.
  const json& volumes = jsonField(jsonField(pod, "spec"), "volumes");
  if (volumes.is_array()) {
    for (const json& v : volumes) {
      const std::string volume = jsonText(v, "name");
      const std::string claim = jsonText(jsonField(v, "persistentVolumeClaim"), "claimName");
      if (claim.empty()) continue;
      for (const std::string& t : templates) {
        if (volume == t && claim == t + "-" + p.name) p.claim = claim;
      }
    }
  }
  p.s3_host = podS3Host(pod);
  return p;
}

namespace {

bool nodeExists(const std::vector<kube::NodeRecord>& nodes, const std::string& name) {
  // A PV's affinity names the kubernetes.io/hostname label, which may differ from the node name.
  return std::any_of(nodes.begin(), nodes.end(), [&](const kube::NodeRecord& n) {
    return n.name.view() == name || n.hostname.view() == name;
  });
}

}  // namespace

std::int64_t countMinioNodes(const std::vector<kube::NodeRecord>& nodes) {
  return std::count_if(nodes.begin(), nodes.end(), [](const kube::NodeRecord& n) {
    const kube::ConditionRecord* ready = n.condition("Ready");
    return ready != nullptr && ready->status == "True" && !n.unschedulable;
  });
}

MinioRebalanceDecision decideMinioRebalance(const MinioRebalanceInput& in) {
  std::vector<const MinioRebalancePod*> pods;
  for (const MinioRebalancePod& p : in.pods) pods.push_back(&p);
  std::sort(pods.begin(), pods.end(), byOrdinal);
  auto waiting = [](std::string why) {
    return MinioRebalanceDecision{.reason = "waiting: " + std::move(why)};
  };

  // (1) unschedulable for more than the grace, its volume on a node that is gone.
  std::map<std::string, std::string> kept;  // pod -> why its replica is kept
  bool wants_volumes = false;
  for (const MinioRebalancePod* p : pods) {
    if (p->phase != "Pending" || p->terminating || !p->unschedulable_since) continue;
    const auto pending = in.now - *p->unschedulable_since;
    if (pending <= kMinioUnschedulableGrace) continue;
    if (p->claim.empty()) {
      kept[p->name] = "it has no PVC from ha-minio's volumeClaimTemplates to delete";
      continue;
    }
    if (!p->volume_node) {
      wants_volumes = true;
      continue;
    }
    if (p->volume_node->empty()) {
      kept[p->name] = "its volume is not tied to a node, so a new PVC would not help";
      continue;
    }
    if (nodeExists(in.nodes, *p->volume_node)) {
      kept[p->name] =
          fmt::format("its volume's node {} still exists (rebooting or drained?): its data is kept",
                      *p->volume_node);
      continue;
    }
    return {.reschedule = *p,
            .rule = "unschedulable",
            .reason = fmt::format(
                "{} has been Pending with PodScheduled=False for {} (more than {}m) and its "
                "volume's node {} is gone: its PVC {} and the pod are deleted so that it is "
                "scheduled on a node that exists",
                p->name, duration(pending), kMinioUnschedulableGrace.count(), *p->volume_node,
                p->claim)};
  }
  if (wants_volumes) {
    return {.reason = "waiting: the volumes of unschedulable pods are looked up",
            .wants_volumes = true};
  }

  // Spreading moves only a pod of a complete, running set.
  const std::int64_t ready_nodes = countMinioNodes(in.nodes);
  if (ready_nodes == 0) return waiting("no Ready, schedulable node");
  if (static_cast<std::int64_t>(pods.size()) != in.replicas) {
    return waiting(fmt::format("{} ha-minio pods for {} replicas", pods.size(), in.replicas));
  }
  for (const MinioRebalancePod* p : pods) {
    if (p->terminating) return waiting(p->name + " is terminating");
    if (p->host_ip.empty()) {
      std::string why = fmt::format("{} is not on a node yet ({}", p->name,
                                    p->phase.empty() ? "no phase" : p->phase);
      if (p->unschedulable_since) {
        why += fmt::format(", unschedulable for {}", duration(in.now - *p->unschedulable_since));
        const auto reason = kept.find(p->name);
        why += reason != kept.end()
                   ? "; " + reason->second
                   : fmt::format("; rescheduled after {}m if its volume's node is gone",
                                 kMinioUnschedulableGrace.count());
      }
      return waiting(why + ")");
    }
    if (p->phase != "Running" || !p->ready) {
      return waiting(fmt::format("{} is not Running and Ready ({})", p->name, p->phase));
    }
  }

  // Group by node; the node holding the most first, then by hostIP.
  std::map<std::string, std::vector<const MinioRebalancePod*>> by_host;
  for (const MinioRebalancePod* p : pods) by_host[p->host_ip].push_back(p);
  std::vector<std::pair<std::string, std::vector<const MinioRebalancePod*>>> hosts(by_host.begin(),
                                                                                   by_host.end());
  std::stable_sort(hosts.begin(), hosts.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  const std::int64_t n = static_cast<std::int64_t>(pods.size());
  const std::int64_t max = (n + ready_nodes - 1) / ready_nodes;
  const std::int64_t min = n / ready_nodes;
  auto count = [](const auto& host) { return static_cast<std::int64_t>(host.second.size()); };

  struct Candidate {
    const MinioRebalancePod* pod;
    std::string rule;
    std::string why;
  };
  std::vector<Candidate> candidates;
  std::set<std::string> seen;
  auto add = [&](const auto& host, const std::string& rule, const std::string& why) {
    for (const MinioRebalancePod* p : host.second) {
      if (seen.insert(p->name).second) candidates.push_back({p, rule, why});
    }
  };
  // (2)
  for (const auto& host : hosts) {
    if (count(host) > max) {
      add(host, "over-max",
          fmt::format("node {} holds {} ha-minio pods, more than ceil({} pods / {} nodes) = {}",
                      host.first, count(host), n, ready_nodes, max));
    }
  }
  // (3)
  const auto low =
      std::find_if(hosts.begin(), hosts.end(), [&](const auto& host) { return count(host) < min; });
  if (low != hosts.end()) {
    for (const auto& host : hosts) {
      if (count(host) == max) {
        add(host, "under-min",
            fmt::format("node {} holds {} ha-minio pods, fewer than floor({} pods / {} nodes) = "
                        "{}; node {} holds {}",
                        low->first, count(*low), n, ready_nodes, min, host.first, max));
      }
    }
  }
  // (4)
  if (static_cast<std::int64_t>(hosts.size()) < ready_nodes) {
    for (const auto& host : hosts) {
      if (count(host) > 1) {
        add(host, "empty-node",
            fmt::format("{} ha-minio pods on {} of {} Ready nodes; node {} holds {}", n,
                        hosts.size(), ready_nodes, host.first, count(host)));
      }
    }
  }
  if (candidates.empty()) {
    return {.reason = fmt::format("balanced: {} ha-minio pods on {} nodes, {} Ready (at most {} "
                                  "per node)",
                                  n, hosts.size(), ready_nodes, max)};
  }
  std::vector<std::string> unsafe;
  bool unasked = false;
  for (const Candidate& c : candidates) {
    if (c.pod->claim.empty()) {
      unsafe.push_back(c.pod->name + " has no PVC from ha-minio's volumeClaimTemplates");
      continue;
    }
    if (c.pod->maintenance_status != 200) {
      unasked = unasked || !c.pod->maintenance_status;
      unsafe.push_back(answered(*c.pod));
      continue;
    }
    return {.reschedule = *c.pod,
            .rule = c.rule,
            .reason = fmt::format("{}: {}; {}'s MinIO reports the cluster healthy without it "
                                  "({} 200): its PVC {} and the pod are deleted",
                                  c.rule, c.why, c.pod->name, kMaintenanceHealth, c.pod->claim)};
  }
  MinioRebalanceDecision none =
      waiting(fmt::format("{}: {}; no pod there is safe to move ({} on {})", candidates[0].rule,
                          candidates[0].why, fmt::join(unsafe, ", "), kMaintenanceHealth));
  none.wants_health = unasked;
  return none;
}

MinioRebalancer::MinioRebalancer(kube::KubeClient& client, const base::Clock& clock,
                                 MinioRebalanceOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

std::optional<int> MinioRebalancer::maintenanceStatus(const std::string& host) {
  if (host.empty() || !options_.health) return std::nullopt;
  auto status = options_.health(host, kMaintenanceHealth);
  if (!status) return std::nullopt;
  return *status;
}

Result<MinioRebalanceOutcome> MinioRebalancer::pass(const json& sts,
                                                    const std::vector<kube::NodeRecord>& nodes) {
  const std::vector<std::string> templates = claimTemplateNames(sts);
  MinioRebalanceInput in{
      .nodes = nodes,
      .replicas = kube::jsonInteger(jsonField(sts, "spec"), "replicas").value_or(1),
      .now = clock_.wallNow()};
  auto list = client_.list(r::kPods, options_.ns, {.label_selector = "app=ha-minio"});
  if (!list) return std::move(list).error().wrap("MinIO rebalance: list pods app=ha-minio");
  for (const json& pod : kube::jsonArray(*list, "items")) {
    in.pods.push_back(minioRebalancePod(pod, templates));
  }
  MinioRebalanceDecision decision = decideMinioRebalance(in);
  // Look up the volumes of pods rule 1 would reschedule.
  if (decision.wants_volumes) {
    for (MinioRebalancePod& p : in.pods) {
      if (p.phase != "Pending" || !p.unschedulable_since || p.claim.empty()) continue;
      auto node = volumeNode(p.claim);
      if (!node) return std::move(node).error().wrap("MinIO rebalance: " + p.name + "'s volume");
      p.volume_node = std::move(*node);
    }
    decision = decideMinioRebalance(in);
  }
  // Ask the pods' MinIO only when a move is wanted (rules 2-4 found candidates).
  if (decision.wants_health) {
    for (MinioRebalancePod& p : in.pods) p.maintenance_status = maintenanceStatus(p.s3_host);
    decision = decideMinioRebalance(in);
  }

  MinioRebalanceOutcome out;
  out.status = {{"decision", decision.reason},
                {"rule", decision.rule.empty() ? json(nullptr) : json(decision.rule)},
                {"pod", decision.reschedule ? json(decision.reschedule->name) : json(nullptr)},
                {"claim", decision.reschedule ? json(decision.reschedule->claim) : json(nullptr)},
                {"dry_run", options_.effects.dry_run}};
  if (!decision.reschedule) {
    out.summary = decision.reason;
    return out;
  }
  const std::string& pod = decision.reschedule->name;
  if (options_.effects.dry_run) {
    out.summary = fmt::format("would reschedule {} (delete PVC {}, then the pod): {} (dry run)",
                              pod, decision.reschedule->claim, decision.reason);
    out.status["decision"] = out.summary;
    if (planned_ != out.summary) {
      planned_ = out.summary;
      base::logInfo("dry run: would reschedule a MinIO pod",
                    {{"pod", pod}, {"rule", decision.rule}, {"reason", decision.reason}});
    }
    return out;
  }
  if (auto ok = reschedule(decision, templates); !ok) {
    if (ok.error().code() != ErrorCode::kConflict) return std::move(ok).error();
    // The world moved between the decision and the act: nothing was deleted.
    out.summary = "waiting: " + ok.error().message();
    out.status["decision"] = out.summary;
    return out;
  }
  out.acted = true;
  out.summary = fmt::format("rescheduled {} (PVC {} and the pod deleted): {}", pod,
                            decision.reschedule->claim, decision.reason);
  out.status["decision"] = out.summary;
  return out;
}

Result<std::string> MinioRebalancer::volumeNode(const std::string& claim) {
  auto pvc = client_.get(r::kPersistentVolumeClaims, options_.ns, claim);
  if (!pvc) {
    if (pvc.error().code() == ErrorCode::kNotFound) return std::string();
    return std::move(pvc).error().wrap("read PVC " + claim);
  }
  // The PV's node affinity binds a local volume; the scheduler's pick is the fallback.
  const std::string selected = jsonText(jsonField(jsonField(*pvc, "metadata"), "annotations"),
                                        "volume.kubernetes.io/selected-node");
  const std::string volume = jsonText(jsonField(*pvc, "spec"), "volumeName");
  if (volume.empty()) return selected;
  auto pv = client_.get(r::kPersistentVolumes, "", volume);
  if (!pv) {
    if (pv.error().code() == ErrorCode::kNotFound) return selected;
    return std::move(pv).error().wrap("read PV " + volume);
  }
  const json* terms =
      kube::jsonFind(*pv, {"spec", "nodeAffinity", "required", "nodeSelectorTerms"});
  if (terms != nullptr && terms->is_array()) {
    for (const json& term : *terms) {
      for (const json& e : kube::jsonArray(term, "matchExpressions")) {
        const json& values = jsonField(e, "values");
        if (jsonText(e, "key") == "kubernetes.io/hostname" && jsonText(e, "operator") == "In" &&
            values.is_array() && values.size() == 1 && values[0].is_string()) {
          return values[0].get<std::string>();
        }
      }
    }
  }
  return selected;
}

base::Status MinioRebalancer::reschedule(const MinioRebalanceDecision& d,
                                         const std::vector<std::string>& templates) {
  const MinioRebalancePod& planned = *d.reschedule;
  const std::string what = fmt::format("reschedule MinIO pod {}", planned.name);
  auto changed = [&](const std::string& how) {
    return Error(fmt::format("{} {} since the decision; nothing deleted", planned.name, how),
                 ErrorCode::kConflict);
  };
  // (1) The guards again, on a fresh read of the pod and a fresh answer from its MinIO.
  auto fresh = client_.get(r::kPods, options_.ns, planned.name);
  if (!fresh) {
    if (fresh.error().code() == ErrorCode::kNotFound) return changed("was deleted");
    return std::move(fresh).error().wrap(what + ": re-read the pod");
  }
  const MinioRebalancePod now = minioRebalancePod(*fresh, templates);
  if (now.uid != planned.uid) return changed("was re-created");
  if (now.terminating) return changed("is terminating");
  if (now.host_ip != planned.host_ip || now.phase != planned.phase) {
    return changed(fmt::format("moved ({} {} -> {} {})", planned.phase, planned.host_ip, now.phase,
                               now.host_ip));
  }
  if (now.claim != planned.claim) return changed("no longer mounts PVC " + planned.claim);
  if (d.rule == "unschedulable") {
    if (!now.unschedulable_since ||
        clock_.wallNow() - *now.unschedulable_since <= kMinioUnschedulableGrace) {
      return changed("is no longer unschedulable");
    }
    // Its volume's node, read again from the API (not the cache): it must still be gone.
    auto volume = volumeNode(now.claim);
    if (!volume) return std::move(volume).error().wrap(what + ": its volume");
    if (*volume != planned.volume_node.value_or("")) {
      return changed(fmt::format("has its volume on node \"{}\" now", *volume));
    }
    auto nodes = client_.listAll(r::kNodes, "");
    if (!nodes) return std::move(nodes).error().wrap(what + ": list nodes");
    for (const json& n : kube::jsonArray(*nodes, "items")) {
      const json& meta = jsonField(n, "metadata");
      if (jsonText(meta, "name") == *volume ||
          jsonText(jsonField(meta, "labels"), "kubernetes.io/hostname") == *volume) {
        return changed("has its volume's node " + *volume + " back");
      }
    }
  } else {
    const std::optional<int> health = maintenanceStatus(now.s3_host);
    if (health != 200) {
      return changed(fmt::format("is no longer safe to move ({})",
                                 health ? fmt::format("{} answered {}", kMaintenanceHealth, *health)
                                        : std::string("its MinIO did not answer")));
    }
  }
  if (!options_.migration_namespace.empty()) {
    auto migration = readStorageMigration(client_, options_.migration_namespace);
    if (!migration) return std::move(migration).error().wrap(what);
    if (migration->present) {
      return Error(fmt::format("a storage migration state appeared ({}) since the decision; "
                               "nothing deleted",
                               migration->describe()),
                   ErrorCode::kConflict);
    }
  }
  // (2)
  EKCO_TRY(options_.effects.fenced(what));
  base::logInfo(
      "minio-ha: rescheduling a MinIO pod",
      {{"pod", planned.name}, {"claim", planned.claim}, {"rule", d.rule}, {"reason", d.reason}});
  // (3) The PVC first (EKCO's order): with the pod gone first, the StatefulSet controller could
  // re-create it on the old claim.
  auto pvc = client_.remove(r::kPersistentVolumeClaims, options_.ns, planned.claim);
  if (!pvc && pvc.error().code() != ErrorCode::kNotFound) {
    return std::move(pvc).error().wrap(what + ": delete PVC " + planned.claim);
  }
  // (4)
  auto removed =
      client_.remove(r::kPods, options_.ns, planned.name, {.precondition_uid = planned.uid});
  if (!removed && removed.error().code() != ErrorCode::kNotFound) {
    return std::move(removed).error().wrap(what + ": delete the pod (its PVC " + planned.claim +
                                           " is already deleted)");
  }
  // (5)
  options_.effects.event({.involved_resource = r::kPods,
                          .involved_namespace = options_.ns,
                          .involved_name = planned.name,
                          .involved_uid = planned.uid,
                          .reason = "MinioPodRescheduled",
                          .message = fmt::format("ekco deleted PVC {} and pod {} ({})",
                                                 planned.claim, planned.name, d.reason),
                          .type = "Normal"});
  options_.effects.count("minio_MinioPodRescheduled");
  return {};
}

}  // namespace ekco::agent
