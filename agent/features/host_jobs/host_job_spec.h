// HostJobs (hostjobs.ekco.kurl.sh, deploy/12-crd-hostjobs.yaml), the pure part: what a HostJob
// asks for, whether it is acceptable, which nodes it selects, and the per-node status entries
// the agents write. The controller is agent/features/host_jobs/host_jobs.h; `ekco job` is
// agent/features/host_jobs/job_cmd.h.
//
//   apiVersion: ekco.kurl.sh/v1alpha1
//   kind: HostJob                       # cluster-scoped
//   metadata: {name: clean-ecs}
//   spec:
//     command: ["/bin/rm", "-rf", "ecs"]  # argv: no shell; [0] an absolute program path
//     hostPath: /var/lib                # the working directory, a host path (default /)
//     timeout: 10m                      # Go duration, 1s to 24h (default 10m)
//     nodeSelectorTerms:                # as a Pod's node affinity; none: every node
//       - matchExpressions:
//           - {key: node-role.kubernetes.io/worker, operator: In, values: ["true"]}
//   status:
//     nodes:
//       node-a: {phase: Succeeded, exitCode: 0, startTime, endTime, output, message}
//     summary: "2/2 nodes finished, 0 failed"
//     completed: true
//     message: ""                       # why the spec was rejected
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/result.h"
#include "kube/resource.h"

namespace ekco::agent {

inline const kube::Resource kHostJobResource{.group = "ekco.kurl.sh",
                                      .version = "v1alpha1",
                                      .plural = "hostjobs",
                                      .namespaced = false,
                                      .kind = "HostJob"};

// A HostJob as the agents' cache keeps it.
struct HostJobRecord {
  std::string name{};
  std::string uid{};
  bool deleting = false;  // metadata.deletionTimestamp is set
  nlohmann::json spec{};
  nlohmann::json status{};
  bool operator==(const HostJobRecord&) const = default;
};
base::Result<HostJobRecord> projectHostJob(const nlohmann::json& object);

inline constexpr std::chrono::minutes kHostJobDefaultTimeout{10};
inline constexpr std::size_t kHostJobOutputBytes = 4096;  // the tail kept in status

struct SelectorRequirement {
  std::string key{};
  std::string op{};  // In, NotIn, Exists, DoesNotExist, Gt, Lt
  std::vector<std::string> values{};
};
struct SelectorTerm {
  std::vector<SelectorRequirement> expressions{};  // on labels
  std::vector<SelectorRequirement> fields{};       // on metadata.name
};

struct HostJobSpec {
  std::vector<std::string> command{};
  std::string host_path = "/";
  std::chrono::seconds timeout{kHostJobDefaultTimeout};
  std::vector<SelectorTerm> terms{};  // empty: every node
};

// The spec, or a one-line reason to reject it (nothing runs): a command that is a string (a
// shell line), empty, not strings, or whose program is not an absolute path; a hostPath that is
// not absolute or leaves the host root (".."); a bad timeout; an unknown selector operator or a
// malformed term.
struct ParsedHostJob {
  std::optional<HostJobSpec> spec = std::nullopt;
  std::string rejection{};
};
ParsedHostJob parseHostJobSpec(const nlohmann::json& spec);

// Whether a node (its labels and name) matches: no terms match every node; otherwise any term
// whose requirements all hold (a term without requirements matches nothing, as in Kubernetes).
bool selectsNode(const HostJobSpec& spec, const std::string& node_name,
                 const std::map<std::string, std::string>& labels);

// The phases of a node's entry in status.nodes.
inline constexpr std::string_view kPhaseRunning = "Running";
inline constexpr std::string_view kPhaseSucceeded = "Succeeded";
inline constexpr std::string_view kPhaseFailed = "Failed";
inline constexpr std::string_view kPhaseRejected = "Rejected";
bool isFinalPhase(std::string_view phase);

// The last `max_bytes` of `text`, starting at a line when one starts within the tail.
std::string outputTail(const std::string& text, std::size_t max_bytes = kHostJobOutputBytes);

// "2/3 nodes finished, 1 failed" from status.nodes and the selected node names.
struct JobProgress {
  std::size_t selected = 0;
  std::size_t finished = 0;
  std::size_t failed = 0;
  bool complete() const { return selected > 0 && finished == selected; }
  std::string summary() const;
};
JobProgress jobProgress(const nlohmann::json& status_nodes,
                        const std::vector<std::string>& selected);

// Whether no node's entry in status.nodes failed or was rejected; a wrongly typed entry
// ("phase": 5) reads as absent.
bool noNodeFailed(const nlohmann::json& status);

// `ekco job status`: a HostJob (as the API returns it) node by node, then each node's output.
// Every field is read without exceptions: status is written by agents and by anyone with access
// to the status subresource. Returns whether no node failed or was rejected.
bool printHostJobStatus(const nlohmann::json& job, std::ostream& out);

}  // namespace ekco::agent
