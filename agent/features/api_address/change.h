// Moving a running cluster to another API server address (`ekco change-load-balancer`, issue 37
// part 1): the operation's records and the leader's decision, pure.
//
// Records:
//   ConfigMap <ns>/ekco-api-address   the request, written by the command: id, server,
//                                     old-server (the requesting primary's kubelet.conf
//                                     server), internal, drop-old-sans, exclude; and, written by
//                                     the leader only, progress (JSON, each node's steps: the
//                                     leader's journal, written before each next task, so a
//                                     step recorded done is never done again) and result
//                                     ("success", or why it stopped) once it ends.
//   Node annotation                   the leader's task for that node: {id, step, server, add,
//   ekco.kurl.sh/api-address-task     drop, admin, at}.
//   Node annotation                   the node agent's answer: {id, step, state running|done|
//   ekco.kurl.sh/api-address-result   failed, why}, written with the node's own kubelet
//                                     credentials (its own Node), so every node can answer.
// Because the records are in the cluster, a new leader (or an agent restarted mid-step) goes
// on from where the last one was: finished steps are never done again.
//
// The steps, in order, one node at a time (planChange):
//   1. certificate   each primary (by name): its apiserver.crt gains the new address's host
//                    (`ekco regen-cert --add-alt-names`), verified as served;
//   2. check         with --internal, each node, primaries first: the API answers at the new
//                    address from there (its internal load balancer is up), before any node
//                    moves;
//   3. kubeconfigs   each node, primaries first: the new address is checked from the node again,
//                    then kubelet.conf (and the primaries' admin kubeconfigs) point at it,
//                    kubelet restarts and must renew its Lease through it
//                    (set_kubeconfig_server.h); a failure restores that node's files;
//   4. drop-sans     with drop-old-sans, each primary's apiserver.crt loses the old host (a name
//                    the cluster itself reaches the apiserver by is kept, not an error).
// A failed step, a node that is not Ready at its turn, or no answer within step_timeout ends
// the operation with that reason: the nodes after it are left as they are.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::agent::api_address {

inline constexpr std::string_view kChangeConfigMap = "ekco-api-address";
inline constexpr std::string_view kTaskAnnotation = "ekco.kurl.sh/api-address-task";
inline constexpr std::string_view kResultAnnotation = "ekco.kurl.sh/api-address-result";
inline constexpr std::string_view kSuccess = "success";

struct ChangeRequest {
  std::string id{};
  std::string server{};
  std::string old_server{};
  bool internal = false;
  bool drop_old_sans = false;
  std::vector<std::string> exclude{};
  bool operator==(const ChangeRequest&) const = default;
};

// The ConfigMap the command creates for `request`.
nlohmann::json requestConfigMap(std::string_view ns, const ChangeRequest& request);
// The request in a ConfigMap; kParse naming the ConfigMap and the key when it is not one.
base::Result<ChangeRequest> parseRequest(const nlohmann::json& config_map);

enum class Step { kCertificate, kCheck, kKubeconfigs, kDropSans };
std::string_view stepName(Step step);

struct NodeTask {
  std::string id{};
  Step step = Step::kCertificate;
  std::string server{};             // kCheck, kKubeconfigs: the new address
  std::vector<std::string> add{};   // kCertificate: names to add
  std::vector<std::string> drop{};  // kDropSans: names to drop
  bool admin = false;               // kKubeconfigs on a primary
  base::WallTime at{};              // when the leader assigned it
  bool operator==(const NodeTask&) const = default;
};
std::string renderTask(const NodeTask& task);
base::Result<NodeTask> parseTask(std::string_view text);

enum class StepState { kRunning, kDone, kFailed };
struct NodeResult {
  std::string id{};
  Step step = Step::kCertificate;
  StepState state = StepState::kRunning;
  std::string why{};  // kFailed: why; kDone: what was done, one line
  bool operator==(const NodeResult&) const = default;
};
std::string renderResult(const NodeResult& result);
base::Result<NodeResult> parseResult(std::string_view text);

// A node as the leader sees it.
struct ChangeNode {
  std::string name{};
  bool control_plane = false;
  bool ready = false;
  std::optional<NodeTask> task{};  // unreadable annotations count as absent
  std::optional<NodeResult> result{};
};

struct ChangeView {
  std::optional<ChangeRequest> request{};
  std::string result{};  // the ConfigMap's result: "" while under way
  // The steps the ConfigMap's progress records done (a node's annotation holds only its last
  // answer).
  std::vector<std::pair<Step, std::string>> recorded_done{};
  std::vector<ChangeNode> nodes{};
  base::WallTime now{};
};

// How long a task may take, from its assignment to its final answer (the longest step, a
// kubeconfigs switch whose verification fails and is undone, takes about 6 minutes). The leader
// ends the operation past it; a node does not start a task older than it.
inline constexpr std::chrono::seconds kStepTimeout{std::chrono::minutes(15)};

struct ChangeOptions {
  std::chrono::seconds step_timeout = kStepTimeout;
};

struct ChangeDecision {
  enum class Kind {
    kIdle,    // no request, or it has ended
    kAssign,  // write `task` on `node`
    kWait,    // `node` is at it
    kFinish,  // write `result` (kSuccess or why) into the ConfigMap
  };
  Kind kind = Kind::kIdle;
  std::string node{};
  NodeTask task{};
  std::string result{};
  // kFinish: the nodes whose task of this request has no final answer: their task annotation
  // is removed, so an agent that comes back later does not start it.
  std::vector<std::string> withdraw{};
  // {"steps": [{"node", "step", "state": pending|running|done|failed, "why"}...]}: for the
  // ConfigMap's progress, the leader's /status and the command's output.
  nlohmann::json progress = nlohmann::json::object();
  std::string summary{};
};

// The steps of `request` over `nodes`, in order (excluded nodes have none).
std::vector<std::pair<Step, std::string>> changeSteps(const ChangeRequest& request,
                                                      const std::vector<ChangeNode>& nodes);

ChangeDecision planChange(const ChangeView& view, const ChangeOptions& options = {});

// The steps a progress (ChangeDecision::progress, as stored) records done for request `id`.
std::vector<std::pair<Step, std::string>> doneSteps(const nlohmann::json& progress,
                                                    std::string_view id);

}  // namespace ekco::agent::api_address
