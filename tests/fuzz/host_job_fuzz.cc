// HostJobs as the agents and `ekco job status` read them
// (agent/features/host_jobs/host_job_spec.h): a HostJob object as the API returns it, whose status
// anyone with access to the status subresource may have written. The input is the object's JSON
// text.
//
// Checks: nothing throws; a refused object or spec gets one non-empty line; progress never
// counts more finished nodes than selected or more failed than finished, and its summary is
// one line; the status printer's verdict agrees with noNodeFailed; an output tail is at most
// kHostJobOutputBytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/features/host_jobs/host_job_spec.h"
#include "kube/decode/json_fields.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ekco::fuzz::check;
  using nlohmann::json;
  namespace agent = ekco::agent;
  const json object = json::parse(ekco::fuzz::asText(data, size), nullptr, false);
  if (object.is_discarded()) return 0;

  auto record = agent::projectHostJob(object);
  if (!record) {
    ekco::fuzz::checkOneLine(record.error().message(), "projectHostJob error");
    check(!record.error().message().empty(), "projectHostJob: an empty error");
    return 0;
  }
  const agent::ParsedHostJob parsed = agent::parseHostJobSpec(record->spec);
  const std::vector<std::string> nodes = {"node-a", "node-b", "node-c"};
  std::vector<std::string> selected;
  if (parsed.spec) {
    check(parsed.rejection.empty(), "a spec both accepted and rejected", parsed.rejection);
    check(!parsed.spec->command.empty() && parsed.spec->command[0].starts_with("/"),
          "an accepted command whose program is not an absolute path");
    const std::map<std::string, std::string> labels = {{"node-role.kubernetes.io/worker", "true"},
                                                       {"zone", "a"}};
    for (const std::string& node : nodes) {
      if (agent::selectsNode(*parsed.spec, node, labels)) selected.push_back(node);
    }
  } else {
    check(!parsed.rejection.empty(), "a spec rejected without a reason");
    ekco::fuzz::checkOneLine(parsed.rejection, "parseHostJobSpec rejection");
  }

  const json& status_nodes = ekco::kube::jsonField(record->status, "nodes");
  const agent::JobProgress progress =
      agent::jobProgress(status_nodes, selected.empty() ? nodes : selected);
  check(progress.finished <= progress.selected, "more nodes finished than selected");
  check(progress.failed <= progress.finished, "more nodes failed than finished");
  ekco::fuzz::checkOneLine(progress.summary(), "progress summary");

  std::ostringstream printed;
  const bool ok = agent::printHostJobStatus(object, printed);
  check(ok == agent::noNodeFailed(record->status), "the printer and noNodeFailed disagree");
  if (status_nodes.is_object()) {
    for (const auto& [node, entry] : status_nodes.items()) {
      const std::string tail = agent::outputTail(ekco::kube::jsonText(entry, "output"));
      check(tail.size() <= agent::kHostJobOutputBytes, "an output tail over its bound");
    }
  }
  return 0;
}
