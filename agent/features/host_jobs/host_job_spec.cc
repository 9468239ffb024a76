#include "agent/features/host_jobs/host_job_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "base/duration.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"

namespace ekco::agent {

using nlohmann::json;

namespace {

constexpr std::string_view kOperators[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};

// A requirement, or the reason it is malformed ("" when fine).
std::string parseRequirement(const json& r, std::string_view where, SelectorRequirement& out) {
  if (!r.is_object()) return fmt::format("{}: want an object with key, operator, values", where);
  if (!r.contains("key") || !r["key"].is_string() || r["key"].get<std::string>().empty()) {
    return fmt::format("{}: key must be a non-empty string", where);
  }
  out.key = r["key"].get<std::string>();
  if (!r.contains("operator") || !r["operator"].is_string()) {
    return fmt::format("{}: operator must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
                       where);
  }
  out.op = r["operator"].get<std::string>();
  if (std::find(std::begin(kOperators), std::end(kOperators), out.op) == std::end(kOperators)) {
    return fmt::format("{}: unknown operator {} (want In, NotIn, Exists, DoesNotExist, Gt or Lt)",
                       where, base::quoteForMessage(out.op));
  }
  if (r.contains("values") && !r["values"].is_null()) {
    if (!r["values"].is_array()) return fmt::format("{}: values must be a list of strings", where);
    for (const json& v : r["values"]) {
      if (!v.is_string()) return fmt::format("{}: values must be a list of strings", where);
      out.values.push_back(v.get<std::string>());
    }
  }
  const bool wants_none = out.op == "Exists" || out.op == "DoesNotExist";
  const bool wants_one = out.op == "Gt" || out.op == "Lt";
  if (wants_none && !out.values.empty()) {
    return fmt::format("{}: operator {} takes no values", where, out.op);
  }
  if (!wants_none && out.values.empty()) {
    return fmt::format("{}: operator {} needs values", where, out.op);
  }
  if (wants_one) {
    if (out.values.size() != 1)
      return fmt::format("{}: operator {} takes one value", where, out.op);
    const std::string& v = out.values.front();
    const bool integer = !v.empty() && std::all_of(v.begin() + (v[0] == '-' ? 1 : 0), v.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
    if (!integer || v == "-") {
      return fmt::format("{}: operator {} needs an integer value", where, out.op);
    }
  }
  return "";
}

bool holds(const SelectorRequirement& r, const std::optional<std::string>& value) {
  const auto in = [&] {
    return value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
  };
  if (r.op == "In") return in();
  if (r.op == "NotIn") return !in();
  if (r.op == "Exists") return value.has_value();
  if (r.op == "DoesNotExist") return !value.has_value();
  if (!value) return false;
  long long have = 0;
  long long want = 0;
  try {
    have = std::stoll(*value);
    want = std::stoll(r.values.front());
  } catch (...) {
    return false;  // a label that is not an integer never compares
  }
  return r.op == "Gt" ? have > want : have < want;
}

}  // namespace

base::Result<HostJobRecord> projectHostJob(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return base::Error("hostjob: no metadata", base::ErrorCode::kParse);
  }
  const json& meta = object["metadata"];
  HostJobRecord r;
  r.name = kube::jsonText(meta, "name");
  if (r.name.empty()) return base::Error("hostjob: no name", base::ErrorCode::kParse);
  r.uid = kube::jsonText(meta, "uid");
  r.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  r.spec = object.contains("spec") ? object["spec"] : json(nullptr);
  r.status = object.contains("status") ? object["status"] : json(nullptr);
  return r;
}

ParsedHostJob parseHostJobSpec(const json& spec) {
  ParsedHostJob out;
  const auto reject = [&](std::string why) {
    out.rejection = std::move(why);
    return out;
  };
  if (!spec.is_object()) return reject("spec must be an object");
  HostJobSpec s;
  // (1) The command: an argv list, never a shell line.
  const json& command = spec.contains("command") ? spec["command"] : json(nullptr);
  if (command.is_string()) {
    return reject(fmt::format(
        "spec.command is a string ({}); want a list of arguments, e.g. [\"/bin/rm\", \"-rf\", "
        "\"dir\"]: no shell runs it",
        base::quoteForMessage(command.get<std::string>())));
  }
  if (!command.is_array() || command.empty()) {
    return reject("spec.command must be a non-empty list of arguments");
  }
  for (const json& a : command) {
    if (!a.is_string()) return reject("spec.command: every argument must be a string");
    std::string arg = a.get<std::string>();
    if (arg.find('\0') != std::string::npos) {
      return reject("spec.command: an argument contains a NUL byte");
    }
    s.command.push_back(std::move(arg));
  }
  if (s.command.front().empty() || s.command.front().front() != '/') {
    return reject(fmt::format("spec.command[0] {} must be an absolute program path",
                              base::quoteForMessage(s.command.front())));
  }
  // (2) The host directory it runs in.
  if (spec.contains("hostPath") && !spec["hostPath"].is_null()) {
    if (!spec["hostPath"].is_string()) return reject("spec.hostPath must be a string");
    s.host_path = spec["hostPath"].get<std::string>();
    if (s.host_path.empty() || s.host_path.front() != '/') {
      return reject(fmt::format("spec.hostPath {} must be an absolute host path",
                                base::quoteForMessage(s.host_path)));
    }
    const std::string& p = s.host_path;
    for (std::size_t start = 0; start <= p.size();) {
      std::size_t end = p.find('/', start);
      if (end == std::string::npos) end = p.size();
      if (p.compare(start, end - start, "..") == 0) {
        return reject(fmt::format("spec.hostPath {} leaves the host root",
                                  base::quoteForMessage(s.host_path)));
      }
      start = end + 1;
    }
  }
  // (3) The timeout.
  if (spec.contains("timeout") && !spec["timeout"].is_null()) {
    if (!spec["timeout"].is_string()) return reject("spec.timeout must be a duration such as 10m");
    auto d = base::parseDuration(spec["timeout"].get<std::string>());
    if (!d || *d < std::chrono::seconds(1) || *d > std::chrono::hours(24)) {
      return reject(fmt::format("spec.timeout {} must be a duration from 1s to 24h",
                                base::quoteForMessage(spec["timeout"].get<std::string>())));
    }
    s.timeout = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  // (4) The selector.
  if (spec.contains("nodeSelectorTerms") && !spec["nodeSelectorTerms"].is_null()) {
    const json& terms = spec["nodeSelectorTerms"];
    if (!terms.is_array()) return reject("spec.nodeSelectorTerms must be a list of terms");
    for (std::size_t i = 0; i < terms.size(); ++i) {
      const json& t = terms[i];
      if (!t.is_object())
        return reject(fmt::format("spec.nodeSelectorTerms[{}] must be an object", i));
      SelectorTerm term;
      for (auto [field, target] : {std::pair{"matchExpressions", &term.expressions},
                                   std::pair{"matchFields", &term.fields}}) {
        if (!t.contains(field) || t[field].is_null()) continue;
        if (!t[field].is_array()) {
          return reject(fmt::format("spec.nodeSelectorTerms[{}].{} must be a list", i, field));
        }
        for (std::size_t j = 0; j < t[field].size(); ++j) {
          SelectorRequirement r;
          const std::string where = fmt::format("spec.nodeSelectorTerms[{}].{}[{}]", i, field, j);
          if (std::string why = parseRequirement(t[field][j], where, r); !why.empty()) {
            return reject(why);
          }
          if (target == &term.fields && r.key != "metadata.name") {
            return reject(fmt::format("{}: matchFields supports only metadata.name, not {}", where,
                                      base::quoteForMessage(r.key)));
          }
          target->push_back(std::move(r));
        }
      }
      s.terms.push_back(std::move(term));
    }
  }
  out.spec = std::move(s);
  return out;
}

bool selectsNode(const HostJobSpec& spec, const std::string& node_name,
                 const std::map<std::string, std::string>& labels) {
  if (spec.terms.empty()) return true;
  for (const SelectorTerm& term : spec.terms) {
    if (term.expressions.empty() && term.fields.empty()) continue;
    bool all = true;
    for (const SelectorRequirement& r : term.expressions) {
      auto it = labels.find(r.key);
      if (!holds(r, it == labels.end() ? std::nullopt : std::optional<std::string>(it->second))) {
        all = false;
        break;
      }
    }
    for (const SelectorRequirement& r : term.fields) {
      if (!all) break;
      if (!holds(r, node_name)) all = false;
    }
    if (all) return true;
  }
  return false;
}

bool isFinalPhase(std::string_view phase) {
  return phase == kPhaseSucceeded || phase == kPhaseFailed || phase == kPhaseRejected;
}

std::string outputTail(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::string tail = text.substr(text.size() - max_bytes);
  const auto nl = tail.find('\n');
  if (nl != std::string::npos && nl + 1 < tail.size()) tail.erase(0, nl + 1);
  // Never cut a UTF-8 sequence: drop continuation bytes at the start.
  std::size_t skip = 0;
  while (skip < tail.size() && (static_cast<unsigned char>(tail[skip]) & 0xC0) == 0x80) ++skip;
  return tail.substr(skip);
}

std::string JobProgress::summary() const {
  return fmt::format("{}/{} nodes finished, {} failed", finished, selected, failed);
}

JobProgress jobProgress(const json& status_nodes, const std::vector<std::string>& selected) {
  JobProgress p;
  p.selected = selected.size();
  for (const std::string& node : selected) {
    if (!status_nodes.is_object() || !status_nodes.contains(node)) continue;
    const json& entry = status_nodes[node];
    // Read without exceptions: anyone with access to the status subresource can write an entry.
    const std::string phase = kube::jsonText(entry, "phase");
    if (!isFinalPhase(phase)) continue;
    ++p.finished;
    if (phase != kPhaseSucceeded) ++p.failed;
  }
  return p;
}

namespace {

// A status field as a table cell: "-" for nothing, a string as it is, anything else as JSON.
std::string cell(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  return kube::jsonDump(v);
}

}  // namespace

bool noNodeFailed(const json& status) {
  const json& nodes = kube::jsonField(status, "nodes");
  if (!nodes.is_object()) return true;
  for (const auto& [node, e] : nodes.items()) {
    const std::string phase = kube::jsonText(e, "phase");
    if (phase == kPhaseFailed || phase == kPhaseRejected) return false;
  }
  return true;
}

bool printHostJobStatus(const json& job, std::ostream& out) {
  const json& status = kube::jsonField(job, "status");
  const json& command = kube::jsonField(kube::jsonField(job, "spec"), "command");
  out << "name:       " << kube::jsonText(kube::jsonField(job, "metadata"), "name") << "\n"
      << "command:    " << (command.is_null() ? "-" : kube::jsonDump(command)) << "\n"
      << "completed:  " << (kube::jsonField(status, "completed") == json(true) ? "true" : "false")
      << "\n"
      << "progress:   " << cell(kube::jsonField(status, "summary")) << "\n";
  if (!kube::jsonField(status, "message").is_null()) {
    out << "message:    " << cell(kube::jsonField(status, "message")) << "\n";
  }
  const json& nodes = kube::jsonField(status, "nodes");
  out << fmt::format("\n{:<20} {:<10} {:<5} {:<21} {:<21} {}\n", "NODE", "PHASE", "EXIT", "START",
                     "END", "MESSAGE");
  if (!nodes.is_object()) return true;
  for (const auto& [node, e] : nodes.items()) {
    out << fmt::format("{:<20} {:<10} {:<5} {:<21} {:<21} {}\n", node,
                       cell(kube::jsonField(e, "phase")), cell(kube::jsonField(e, "exitCode")),
                       cell(kube::jsonField(e, "startTime")), cell(kube::jsonField(e, "endTime")),
                       cell(kube::jsonField(e, "message")));
  }
  for (const auto& [node, e] : nodes.items()) {
    const std::string output = kube::jsonText(e, "output");
    if (output.empty()) continue;
    out << "\n--- " << node << " output (last " << kHostJobOutputBytes << " bytes) ---\n" << output;
    if (output.back() != '\n') out << "\n";
  }
  return noNodeFailed(status);
}

}  // namespace ekco::agent
