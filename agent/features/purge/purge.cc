#include "agent/features/purge/purge.h"

#include <fmt/format.h>

#include <algorithm>

#include "agent/features/purge/purge_kubeadm.h"
#include "agent/policy/node_health.h"
#include "base/duration.h"
#include "base/log/log.h"
#include "etcd/removal.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "rook/purge_node.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

std::optional<std::string> purgeRefusal(const PurgeGuardInput& in) {
  if (!in.self.empty() && in.target == in.self) {
    return "refusing to purge " + in.target + ": it is the node this ekco runs on";
  }
  const kube::NodeRecord* target = nullptr;
  std::int64_t ready_masters = 0;
  std::int64_t ready_workers = 0;
  for (const auto& n : in.nodes) {
    if (n.name.str() == in.target) target = &n;
    if (!isReady(n)) continue;
    (n.control_plane ? ready_masters : ready_workers) += 1;
  }
  if (in.automatic) {
    if (target == nullptr) return "node " + in.target + " not found";
    if (!isDead(*target, in.now, in.node_unreachable_toleration)) {
      return "node " + in.target + " is not dead";
    }
    if (const auto storm = assessStorm(in.nodes, in.storm_guard_percent); storm.active) {
      return "storm guard: " + storm.reason;
    }
    if (target->control_plane && ready_masters < in.min_ready_master_nodes) {
      return fmt::format("only {} ready masters, min_ready_master_nodes is {}", ready_masters,
                         in.min_ready_master_nodes);
    }
    // EKCO's else-if: the worker minimum guards dead masters too.
    if (ready_workers < in.min_ready_worker_nodes) {
      return fmt::format("only {} ready workers, min_ready_worker_nodes is {}", ready_workers,
                         in.min_ready_worker_nodes);
    }
    return std::nullopt;
  }
  if (target == nullptr || !isReady(*target)) return std::nullopt;
  if (target->control_plane && ready_masters <= in.min_ready_master_nodes) {
    return fmt::format("cannot purge master: {} ready masters", ready_masters);
  }
  if (!target->control_plane && ready_workers <= in.min_ready_worker_nodes) {
    return fmt::format("cannot purge worker: {} ready workers", ready_workers);
  }
  return std::nullopt;
}

namespace {

class Purge {
 public:
  Purge(const PurgeDeps& deps, std::string_view name, const PurgeOptions& options)
      : deps_(deps), name_(name), options_(options) {}

  base::Result<PurgeReport> run() {
    started_ = deps_.clock.monoNow();
    auto object = deps_.client.get(kube::resources::kNodes, "", name_);
    if (!object && object.error().code() != ErrorCode::kNotFound) {
      return std::move(object).error();  // "get nodes/<name>: ..." from the client
    }
    std::optional<kube::NodeRecord> node;
    if (object) {
      auto record = kube::projectNode(*object);
      if (!record) return std::move(record).error().wrap("node " + name_);
      node = std::move(*record);
      uid_ = node->uid;
    }

    // Pre-flight: a control-plane node's etcd member must be removable before anything else is
    // touched, or the purge would stop at step 3 with steps 1 and 2 done.
    if (!node || node->control_plane) {
      auto known = removeFromKubeadmConfig(deps_.client, name_, /*dry_run=*/true);
      if (!known) return std::move(known).error();
      std::string address = known->removed_address;
      if (address.empty() && node) address = std::string(node->address("InternalIP"));
      if (!address.empty()) EKCO_TRY(removeEtcdMember(address, known->remaining_addresses, true));
    }
    if (node && !options_.dry_run) EKCO_TRY(mark("started"));

    // 1. Rook. As in EKCO a failure is a warning: the OSD Deployment stays and says what to clean.
    if (options_.maintain_rook_storage_nodes) {
      EKCO_TRY(checkpoint());
      step("rook", "removing the node's Ceph OSDs from Rook");
      const std::string hostname =
          node && !node->hostname.str().empty() ? node->hostname.str() : name_;
      auto rook =
          rook::purgeNode(deps_.client, deps_.exec, name_, hostname, {.dry_run = options_.dry_run});
      if (rook) {
        for (auto& a : rook->actions) report_.actions.push_back(std::move(a));
        done("PurgeRook", "Rook storage of " + name_ + " removed", "rook");
      } else {
        report_.warnings.push_back("rook: " + rook.error().message());
        base::logWarn("purge: rook step failed",
                      {{"node", name_}, {"error", rook.error().message()}});
      }
    }

    // 2 and 3. A control-plane node, or one that is gone (it may have been one).
    if (!node || node->control_plane) {
      EKCO_TRY(checkpoint());
      step("kubeadm", "removing the node from the kubeadm-config ConfigMap");
      auto kubeadm = removeFromKubeadmConfig(deps_.client, name_, options_.dry_run);
      if (!kubeadm) return std::move(kubeadm).error();
      for (auto& a : kubeadm->actions) report_.actions.push_back(std::move(a));
      if (!kubeadm->actions.empty()) done("PurgeKubeadm", "removed from kubeadm-config", "kubeadm");

      std::string address = kubeadm->removed_address;
      if (address.empty() && node) address = std::string(node->address("InternalIP"));
      if (address.empty()) {
        report_.actions.push_back("no address known for " + name_ +
                                  ": no etcd member to remove (already purged?)");
      } else {
        EKCO_TRY(checkpoint());
        step("etcd", "removing the etcd member at " + address);
        EKCO_TRY(removeEtcdMember(address, kubeadm->remaining_addresses));
      }
    }

    // 4. The Node.
    if (node) {
      EKCO_TRY(checkpoint());
      step("node", "deleting the Node object");
      if (options_.dry_run) {
        report_.actions.push_back("would delete node " + name_);
      } else {
        auto removed =
            deps_.client.remove(kube::resources::kNodes, "", name_, {.precondition_uid = uid_});
        if (!removed && removed.error().code() != ErrorCode::kNotFound) {
          return removed.error();
        }
        report_.actions.push_back("deleted node " + name_);
        report_.node_deleted = true;
        base::logInfo("purge: node deleted", {{"node", name_}});
      }
    }
    return std::move(report_);
  }

 private:
  base::Status checkpoint() {
    if (options_.may_continue && !options_.may_continue()) {
      return Error("purge of " + name_ + " stopped: this ekco no longer leads",
                   ErrorCode::kCancelled);
    }
    if (options_.recheck) {
      if (auto why = options_.recheck()) {
        base::logWarn("purge: stopped by the guards on a fresh read",
                      {{"node", name_}, {"reason", *why}});
        return Error("purge of " + name_ + " stopped: " + *why, ErrorCode::kCancelled);
      }
    }
    return base::ok();
  }

  // One line as each step starts, with the time since the purge started, so an operator
  // watching `ekco purge-node` sees where it is.
  void step(std::string_view name, const std::string& what) {
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(deps_.clock.monoNow() - started_);
    base::logInfo("purge: step", {{"node", name_},
                                  {"step", name},
                                  {"what", what},
                                  {"elapsed", base::formatDuration(elapsed)},
                                  {"dry_run", options_.dry_run ? "true" : "false"}});
  }

  // Records progress on the Node (while it exists).
  base::Status mark(const std::string& step) {
    json annotations = {{std::string(kPurgeStepAnnotation), step}};
    if (step == "started") {
      annotations[std::string(kPurgeStartedAnnotation)] =
          kube::formatRfc3339(deps_.clock.wallNow());
    }
    auto patched = deps_.client.patch(kube::resources::kNodes, "", name_, kube::PatchType::kMerge,
                                      {{"metadata", {{"annotations", annotations}}}});
    if (!patched && patched.error().code() != ErrorCode::kNotFound) {
      return patched.error().wrap("record purge progress on node " + name_);
    }
    return base::ok();
  }

  void done(const std::string& reason, const std::string& message, const std::string& step) {
    if (options_.dry_run) return;
    if (options_.event) options_.event(reason, message);
    if (auto marked = mark(step); !marked) {
      base::logWarn("purge: progress not recorded",
                    {{"node", name_}, {"error", marked.error().message()}});
    }
  }

  base::Result<std::vector<std::string>> otherMemberAddresses(std::vector<std::string> known) {
    if (known.empty()) {
      auto from_pods = apiserverAddresses(deps_.client, name_);
      if (!from_pods) return std::move(from_pods).error();
      known = std::move(*from_pods);
    }
    if (known.empty()) {
      auto nodes = deps_.client.list(kube::resources::kNodes, "", {});
      if (!nodes) return std::move(nodes).error();
      const json& items = kube::jsonArray(*nodes, "items");
      for (const json& n : items) {
        auto record = kube::projectNode(n);
        if (!record || !record->control_plane || record->name.str() == name_) continue;
        if (auto ip = record->address("InternalIP"); !ip.empty()) known.emplace_back(ip);
      }
    }
    return known;
  }

  // `check_only`: decide, act on nothing (the pre-flight before step 1, so a purge whose etcd
  // step would be refused does not start with the Rook and kubeadm steps).
  base::Status removeEtcdMember(const std::string& address, std::vector<std::string> remaining,
                                bool check_only = false) {
    auto others = otherMemberAddresses(std::move(remaining));
    if (!others) return std::move(others).error();
    if (others->empty()) {
      return Error("no other control-plane address to reach etcd through: the etcd member of " +
                       name_ + " (" + address + ") was not removed",
                   ErrorCode::kNotFound);
    }
    auto certs = etcd::loadClientCertificates(deps_.fs, options_.certificates_dir);
    if (!certs) return std::move(certs).error();
    for (const auto& a : *others) certs->endpoints.push_back(etcd::urlFor(a, etcd::kClientPort));
    auto client = deps_.etcd_factory ? deps_.etcd_factory(*certs) : etcd::makeEtcdClient(*certs);
    auto members = client->listMembers();
    if (!members) return std::move(members).error().wrap("etcd member list");
    std::map<std::uint64_t, bool> healthy;
    for (const auto& m : *members) {
      auto h = client->memberHealthy(m);
      healthy[m.id] = h && *h;
    }
    etcd::RemovalPlan plan = etcd::planMemberRemoval(*members, address, healthy);
    if (!plan.member) {
      if (!check_only) report_.actions.push_back("etcd: " + plan.reason);
      return base::ok();
    }
    const bool quorum_holds = plan.voting_members > 0 && plan.healthy_remaining >= plan.quorum;
    const bool healthy_target = healthy[plan.member->id];
    if (!plan.safe && !(options_.allow_healthy_etcd_member && healthy_target && quorum_holds)) {
      return Error("etcd member of " + name_ + " not removed: " + plan.reason,
                   ErrorCode::kUnavailable);
    }
    if (check_only) return base::ok();
    const std::string what = "etcd member " + etcd::describeMember(*plan.member);
    if (options_.dry_run) {
      std::string through;
      for (const auto& e : certs->endpoints) through += (through.empty() ? "" : ", ") + e;
      report_.actions.push_back("would remove " + what + " through " + through + " (" +
                                plan.reason + ")");
      return base::ok();
    }
    auto removed = client->removeMember(plan.member->id);
    if (!removed && removed.error().code() != ErrorCode::kNotFound) return removed;
    report_.actions.push_back("removed " + what);
    base::logInfo("purge: etcd member removed", {{"node", name_}, {"member", what}});
    done("PurgeEtcdMember", "removed " + what, "etcd");
    return base::ok();
  }

  const PurgeDeps& deps_;
  std::string name_;
  const PurgeOptions& options_;
  std::string uid_;
  base::MonoTime started_{};
  PurgeReport report_;
};

}  // namespace

base::Result<PurgeReport> purgeNode(const PurgeDeps& deps, std::string_view name,
                                    const PurgeOptions& options) {
  return Purge(deps, name, options).run();
}

}  // namespace ekco::agent
