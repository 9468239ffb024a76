#include "agent/features/csr_approval/kubelet_csr_approval.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "agent/features/csr_approval/kubelet_csr_apiserver.h"
#include "base/log/log.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;
using Kind = KubeletCsrVerdict::Kind;

namespace {

constexpr std::size_t kHistory = 20;
const kube::Resource& kCsrs = kube::resources::kCertificateSigningRequests;

// The config's kubelet_csr_allowed_ip_prefixes (validated by agent/config/validate.cc already).
Result<std::vector<base::IpPrefix>> kubeletCsrAllowedIpPrefixes(const Config& config) {
  std::vector<base::IpPrefix> out;
  for (const auto& text : config.kubelet_csr_allowed_ip_prefixes) {
    auto prefix = base::parseIpPrefix(text);
    if (!prefix) return std::move(prefix).error().wrap("kubelet_csr_allowed_ip_prefixes");
    out.push_back(*prefix);
  }
  return out;
}

}  // namespace

KubeletCsrApprovalController::KubeletCsrApprovalController(
    std::function<ObservedNodes()> observe_nodes, std::function<ObservedCsrs()> observe_csrs,
    kube::KubeClient& client, const base::Clock& clock, KubeletCsrApprovalOptions options)
    : observe_nodes_(std::move(observe_nodes)),
      observe_csrs_(std::move(observe_csrs)),
      client_(client),
      clock_(clock),
      options_(std::move(options)) {}

void KubeletCsrApprovalController::remember(const std::string& csr, const std::string& decision,
                                            const std::string& reason) {
  std::lock_guard lock(mu_);
  history_.push_back({{"csr", csr},
                      {"decision", decision},
                      {"reason", reason},
                      {"time", kube::formatRfc3339(clock_.wallNow())}});
  if (history_.size() > kHistory) history_.erase(history_.begin());
}

void KubeletCsrApprovalController::refused(const kube::CertificateSigningRequest& csr,
                                           const KubeletCsrVerdict& verdict) {
  const std::string why = verdict.rule + ": " + verdict.reason;
  bool first = false;
  {
    std::lock_guard lock(mu_);
    pending_[csr.name] = why;
    first = noted_.emplace(csr.uid, verdict.rule).second;
  }
  if (!first) return;  // its Event was recorded on an earlier pass
  base::logWarn("kubelet serving CSR not approved", {{"csr", csr.name},
                                                     {"requester", csr.username},
                                                     {"rule", verdict.rule},
                                                     {"reason", verdict.reason}});
  remember(csr.name, "not approved", why);
  options_.effects.event({.involved_resource = kCsrs,
                          .involved_name = csr.name,
                          .involved_uid = csr.uid,
                          .reason = "KubeletCSRNotApproved",
                          .message = "ekco left this CSR pending: rule " + why +
                                     " (see docs/features/csr-approval.md#safety-rules)",
                          .type = "Warning"});
}

Result<KubeletCsrApprovalController::Outcome> KubeletCsrApprovalController::recordSans(
    const ApprovedSans& current, const kube::NodeRecord& node, const std::vector<std::string>& sans,
    const std::vector<kube::NodeRecord>& nodes, const std::string& csr) {
  const std::string name = node.name.str();
  auto it = current.by_node.find(name);
  if (it != current.by_node.end() && it->second == sans) return Outcome::kApproved;
  // Entries of Nodes that are gone are dropped (the requester's is kept even before the node
  // cache has seen its Node).
  std::map<std::string, std::vector<std::string>> by_node;
  for (const auto& [n, s] : current.by_node) {
    const bool present = std::any_of(
        nodes.begin(), nodes.end(), [&, &n = n](const kube::NodeRecord& r) { return r.name == n; });
    if (present) by_node[n] = s;
  }
  by_node[name] = sans;
  auto written = writeApprovedSans(client_, options_.ns, current, by_node);
  if (!written) {
    const ErrorCode code = written.error().code();
    if (code == ErrorCode::kConflict || code == ErrorCode::kAlreadyExists) {
      return Outcome::kConflict;
    }
    return std::move(written).error();
  }
  const std::string to = formatSanList(sans);
  const std::string where = options_.ns + "/" + std::string(kKubeletServingAddressesConfigMap);
  kube::EventSpec event{.involved_resource = kube::resources::kNodes,
                        .involved_name = name,
                        .involved_uid = node.uid};
  if (it == current.by_node.end()) {
    base::logInfo("kubelet serving addresses recorded",
                  {{"node", name}, {"sans", to}, {"csr", csr}, {"record", where}});
    event.reason = std::string(kRecordedReason);
    event.message = "ekco approves kubelet serving certificates of this node for " + to + " (CSR " +
                    csr + "; recorded in ConfigMap " + where + ")";
  } else {
    const std::string from = formatSanList(it->second);
    base::logWarn("kubelet serving addresses changed",
                  {{"node", name}, {"from", from}, {"to", to}, {"csr", csr}, {"record", where}});
    event.reason = std::string(kChangedReason);
    event.message =
        "the SANs ekco approves for this node's kubelet serving certificate changed "
        "from " +
        from + " to " + to + " (CSR " + csr + "; recorded in ConfigMap " + where + ")";
    event.type = "Warning";
  }
  options_.effects.event(event);
  return Outcome::kApproved;
}

Result<KubeletCsrApprovalController::Outcome> KubeletCsrApprovalController::approve(
    const std::string& name, const ApiServerNames& apiserver,
    const std::vector<kube::NodeRecord>& nodes, std::string& line) {
  // (1) The CSR, its Node and the record as the API has them now.
  auto object = client_.get(kCsrs, "", name);
  if (!object) {
    if (object.error().code() == ErrorCode::kNotFound) {
      line = name + ": deleted meanwhile";
      return Outcome::kSkipped;
    }
    return std::move(object).error().wrap("re-read CSR " + name);
  }
  auto csr = kube::parseCertificateSigningRequest(*object);
  if (!csr) return std::move(csr).error().wrap("re-read CSR " + name);
  std::optional<kube::NodeRecord> node;
  std::optional<Error> node_error;
  const NodeLookup lookup = [&](std::string_view n) -> const kube::NodeRecord* {
    auto got = client_.get(kube::resources::kNodes, "", n);
    if (!got) {
      if (got.error().code() != ErrorCode::kNotFound) node_error = got.error();
      return nullptr;
    }
    auto record = kube::projectNode(*got);
    if (!record) {
      node_error = record.error();
      return nullptr;
    }
    node = std::move(*record);
    return &*node;
  };
  auto approved = readApprovedSans(client_, options_.ns);
  if (!approved) return std::move(approved).error().wrap("CSR " + name);
  const SanClaims claims = sanClaims(nodes, approved->by_node);
  const KubeletCsrVerdict verdict =
      decideKubeletServingCsr(*csr, {.node = lookup,
                                     .apiserver = &apiserver,
                                     .claims = &claims,
                                     .allowed_ip_prefixes = options_.allowed_ip_prefixes});
  if (node_error) return std::move(*node_error).wrap("re-read Node for CSR " + name);
  if (verdict.kind == Kind::kIgnore) {
    line = name + ": " + verdict.reason + " (on a fresh read)";
    return Outcome::kSkipped;
  }
  if (verdict.kind == Kind::kRefuse) {
    refused(*csr, verdict);
    line = name + ": not approved (on a fresh read): " + verdict.rule + ": " + verdict.reason;
    return Outcome::kRefused;
  }
  // (2) A dry run stops here.
  if (options_.effects.dry_run) {
    if (planned_.insert(csr->uid).second) {
      base::logInfo("dry run: would approve kubelet serving CSR",
                    {{"csr", name}, {"node", verdict.node}, {"reason", verdict.reason}});
    }
    {
      std::lock_guard lock(mu_);
      pending_[name] = "would approve (dry run): " + verdict.reason;
    }
    line = name + ": would approve (dry run): " + verdict.reason;
    return Outcome::kSkipped;
  }
  // (3) Only a leader with a fresh Lease approves.
  if (!options_.effects.leaderFresh()) {
    return Error("CSR " + name + ": not approved: this agent's leadership is not fresh",
                 ErrorCode::kUnavailable);
  }
  // (4) The record of the node's approved SANs, before the approval.
  auto recorded = recordSans(*approved, *node, verdict.sans, nodes, name);
  if (!recorded) return std::move(recorded).error().wrap("CSR " + name);
  if (*recorded == Outcome::kConflict) {
    line = name + ": the approved addresses' record changed since it was read; looking again";
    return Outcome::kConflict;
  }
  // (5) The approval subresource, on the object as read (its resourceVersion guards it).
  json approval = *object;
  json& status = approval["status"];
  if (!status.is_object()) status = json::object();
  if (!status["conditions"].is_array()) status["conditions"] = json::array();
  const std::string message = "ekco approved this kubelet serving certificate: " + verdict.reason;
  status["conditions"].push_back({{"type", "Approved"},
                                  {"status", "True"},
                                  {"reason", std::string(kApprovedReason)},
                                  {"message", message},
                                  {"lastUpdateTime", kube::formatRfc3339(clock_.wallNow())}});
  auto updated = client_.update(kCsrs, "", approval, "approval");
  if (!updated) {
    const ErrorCode code = updated.error().code();
    if (code == ErrorCode::kConflict) {
      line = name + ": changed since it was read; looking again";
      return Outcome::kConflict;
    }
    if (code == ErrorCode::kNotFound) {
      line = name + ": deleted meanwhile";
      return Outcome::kSkipped;
    }
    return std::move(updated).error().wrap("approve CSR " + name);
  }
  // (6) Recorded.
  base::logInfo("approved kubelet serving CSR",
                {{"csr", name}, {"node", verdict.node}, {"reason", verdict.reason}});
  options_.effects.event({.involved_resource = kCsrs,
                          .involved_name = name,
                          .involved_uid = csr->uid,
                          .reason = "KubeletCSRApproved",
                          .message = message});
  options_.effects.count("kubelet_csr_approved");
  remember(name, "approved", verdict.reason);
  {
    std::lock_guard lock(mu_);
    pending_.erase(name);
  }
  line = name + ": approved for node " + verdict.node;
  return Outcome::kApproved;
}

Result<ReconcileResult> KubeletCsrApprovalController::reconcile() {
  const ObservedCsrs observed = observe_csrs_();
  const ObservedNodes nodes = observe_nodes_();
  if (!observed.synced || !nodes.synced) {
    return ReconcileResult{.summary = "waiting for the CSR and node caches"};
  }
  std::map<std::string, const kube::NodeRecord*, std::less<>> by_name;
  for (const auto& n : nodes.nodes) by_name.emplace(n.name.str(), &n);
  const NodeLookup lookup = [&](std::string_view n) -> const kube::NodeRecord* {
    auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : it->second;
  };
  const auto undecided = [](const kube::CertificateSigningRequest& c) {
    return c.signer_name == kKubeletServingSigner &&
           !(c.approved || c.denied || c.failed || c.issued);
  };

  std::vector<const kube::CertificateSigningRequest*> csrs;
  for (const auto& c : observed.csrs) csrs.push_back(&c);
  std::sort(csrs.begin(), csrs.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  {
    // Forget CSRs that are gone or decided.
    std::set<std::string> uids;
    std::set<std::string> names;
    for (const auto* c : csrs) {
      if (c->approved || c->denied || c->failed || c->issued) continue;
      uids.insert(c->uid);
      names.insert(c->name);
    }
    std::lock_guard lock(mu_);
    std::erase_if(noted_, [&](const auto& e) { return uids.count(e.first) == 0; });
    std::erase_if(pending_, [&](const auto& e) { return names.count(e.first) == 0; });
  }

  ReconcileResult result;
  if (std::none_of(csrs.begin(), csrs.end(), [&](const auto* c) { return undecided(*c); })) {
    result.summary = fmt::format("{} kubelet serving CSRs: none pending", observed.csrs.size());
    result.requeue_after = options_.interval;
    return result;
  }
  // What the rules compare SANs with; without it nothing is approved (fail closed).
  auto apiserver = readApiServerNames(client_);
  if (!apiserver) {
    return std::move(apiserver).error().wrap(
        "no kubelet serving CSR approved: the API server's names are not known");
  }
  auto record = readApprovedSans(client_, options_.ns);
  if (!record) {
    return std::move(record).error().wrap(
        "no kubelet serving CSR approved: the record of approved addresses is not known");
  }
  const SanClaims claims = sanClaims(nodes.nodes, record->by_node);
  const KubeletCsrPolicy policy{.node = lookup,
                                .apiserver = &*apiserver,
                                .claims = &claims,
                                .allowed_ip_prefixes = options_.allowed_ip_prefixes};
  int approved = 0;
  int refused_count = 0;
  int attempts = 0;
  bool conflict = false;
  bool more = false;
  for (const auto* csr : csrs) {
    const KubeletCsrVerdict verdict = decideKubeletServingCsr(*csr, policy);
    if (verdict.kind == Kind::kIgnore) continue;
    std::string line;
    if (verdict.kind == Kind::kRefuse) {
      refused(*csr, verdict);
      ++refused_count;
      line = csr->name + ": not approved: " + verdict.rule + ": " + verdict.reason;
    } else {
      if (attempts == kMaxApprovalsPerPass) {
        more = true;
        continue;
      }
      ++attempts;
      auto outcome = approve(csr->name, *apiserver, nodes.nodes, line);
      if (!outcome) return std::move(outcome).error();
      approved += *outcome == Outcome::kApproved ? 1 : 0;
      refused_count += *outcome == Outcome::kRefused ? 1 : 0;
      conflict = conflict || *outcome == Outcome::kConflict;
    }
    if (!result.plan.empty()) result.plan += "\n";
    result.plan += line;
  }
  result.summary = fmt::format("{} kubelet serving CSRs: {} approved, {} left pending",
                               observed.csrs.size(), approved, refused_count);
  if (options_.effects.dry_run) result.summary += " (dry run)";
  result.requeue_after = more       ? std::chrono::milliseconds(0)
                         : conflict ? std::chrono::milliseconds(kAfterConflict)
                                    : options_.interval;
  return result;
}

void KubeletCsrApprovalController::leadershipChanged(bool leading) {
  if (leading) return;
  std::lock_guard lock(mu_);
  noted_.clear();
  pending_.clear();
}

json KubeletCsrApprovalController::status() const {
  std::lock_guard lock(mu_);
  json pending = json::object();
  for (const auto& [name, why] : pending_) pending[name] = why;
  return {{"pending", pending}, {"history", history_}};
}

WatchSpec kubeletServingCsrsWatch() {
  return {.key = "kubelet-serving-csrs",
          .scope = Scope::kLeader,
          .build = informerWatch<kube::CertificateSigningRequest>([](const WatchContext&) {
            return InformerSource<kube::CertificateSigningRequest>{
                .resource = kube::resources::kCertificateSigningRequests,
                .field_selector = "spec.signerName=kubernetes.io/kubelet-serving",
                .project = kube::parseCertificateSigningRequest,
                .label = "kubelet-serving-csrs",
                .what = "kubelet-serving CSR cache",
                .absent_is_empty = true};
          })};
}

ControllerSpec kubeletCsrApprovalSpec() {
  return {
      .name = "kubelet-csr-approval",
      .scope = Scope::kLeader,
      .status_key = "kubelet_csr_approval",
      .enabled = [](const Config& c) { return c.auto_approve_kubelet_csrs; },
      .watches = {kubeletServingCsrsWatch(), clusterNodesWatch()},
      // Approvals are irreversible; a kubelet keeps its current certificate and asks again.
      .pauses_in_maintenance = true,
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto prefixes = kubeletCsrAllowedIpPrefixes(d.config);
        if (!prefixes) return std::move(prefixes).error();
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        auto csrs =
            observeWatch<kube::CertificateSigningRequest>(d.watches, kubeletServingCsrsWatch());
        if (!csrs) return std::move(csrs).error();
        return std::make_shared<KubeletCsrApprovalController>(
            std::move(*nodes),
            [observe = std::move(*csrs)] {
              auto seen = observe();
              return ObservedCsrs{.synced = seen.synced, .csrs = std::move(seen.items)};
            },
            d.client, d.clock,
            KubeletCsrApprovalOptions{
                .ns = d.config.leader_election_namespace,
                .allowed_ip_prefixes = std::move(*prefixes),
                .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                    d.config.reconcile_interval),
                .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
