#include "agent/features/host_jobs/job_cmd.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "agent/features/host_jobs/host_job_spec.h"
#include "base/clock.h"
#include "base/duration.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

std::string trim(std::string_view s) { return std::string(base::trimSpace(s)); }

// Splits on commas outside parentheses.
std::vector<std::string> splitTop(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> setValues(const std::string& inside) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = inside.find(',', start);
    std::string v =
        trim(inside.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!v.empty()) out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

base::Result<json> selectorToTerms(const std::string& selector) {
  json expressions = json::array();
  for (const std::string& raw : splitTop(selector)) {
    const std::string part = trim(raw);
    if (part.empty()) return Error("--selector: an empty requirement", ErrorCode::kInvalidArgument);
    const auto bad = [&](const std::string& why) {
      return Error(fmt::format("--selector {}: {}", base::quoteForMessage(part), why),
                   ErrorCode::kInvalidArgument);
    };
    json r;
    const std::size_t paren = part.find('(');
    if (paren != std::string::npos) {
      if (part.back() != ')') return bad("want KEY in (A,B) or KEY notin (A,B)");
      std::string head = trim(part.substr(0, paren));
      const std::size_t space = head.find_last_of(" \t");
      if (space == std::string::npos) return bad("want KEY in (A,B) or KEY notin (A,B)");
      const std::string op = trim(head.substr(space + 1));
      const std::string key = trim(head.substr(0, space));
      if (key.empty() || (op != "in" && op != "notin")) {
        return bad("want KEY in (A,B) or KEY notin (A,B)");
      }
      auto values = setValues(part.substr(paren + 1, part.size() - paren - 2));
      if (values.empty()) return bad("an empty set of values");
      r = {{"key", key}, {"operator", op == "in" ? "In" : "NotIn"}, {"values", values}};
    } else if (auto ne = part.find("!="); ne != std::string::npos) {
      r = {{"key", trim(part.substr(0, ne))},
           {"operator", "NotIn"},
           {"values", {trim(part.substr(ne + 2))}}};
    } else if (auto eq = part.find('='); eq != std::string::npos) {
      const std::size_t len = part.compare(eq, 2, "==") == 0 ? 2 : 1;
      r = {{"key", trim(part.substr(0, eq))},
           {"operator", "In"},
           {"values", {trim(part.substr(eq + len))}}};
    } else if (part.front() == '!') {
      r = {{"key", trim(part.substr(1))}, {"operator", "DoesNotExist"}};
    } else {
      r = {{"key", part}, {"operator", "Exists"}};
    }
    if (r["key"].get<std::string>().empty() ||
        r["key"].get<std::string>().find(' ') != std::string::npos) {
      return bad("a key must be one word");
    }
    expressions.push_back(std::move(r));
  }
  return json::array({{{"matchExpressions", expressions}}});
}

int runJobCommand(const Config& config, const JobArgs& args, const CliEnv& env) {
  (void)config;
  json spec = json::object();
  if (args.action == "run") {
    if (args.command.empty()) {
      *env.err << "error: ekco job run: give the command after --\n";
      return kExitUsage;
    }
    spec["command"] = args.command;
    if (!args.host_path.empty()) spec["hostPath"] = args.host_path;
    if (!args.timeout.empty()) spec["timeout"] = args.timeout;
    if (!args.selector.empty()) {
      auto terms = selectorToTerms(args.selector);
      if (!terms) {
        *env.err << "error: " << terms.error().message() << "\n";
        return kExitUsage;
      }
      spec["nodeSelectorTerms"] = *terms;
    }
    // The agents would reject it: say so now, before anything is created.
    if (ParsedHostJob parsed = parseHostJobSpec(spec); !parsed.spec) {
      *env.err << "error: " << parsed.rejection << "\n";
      return kExitUsage;
    }
  }
  base::SystemClock clock;
  CommandClient c;
  if (auto built = buildCommandClient(
          c,
          {.host_root = args.host_root.empty() ? "/" : args.host_root,
           .kubeconfig = args.kubeconfig,
           .connect_timeout = std::chrono::seconds(10),
           .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30)}},
          env.environment, clock);
      !built) {
    *env.err << "error: " << built.error().message() << "\n";
    return kExitFailure;
  }
  std::string name = args.name;
  if (args.action == "run") {
    if (name.empty()) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock.wallNow().time_since_epoch())
              .count();
      name = fmt::format("ekco-job-{:x}", static_cast<unsigned long long>(ns) & 0xffffffffffULL);
    }
    json object = {{"apiVersion", kHostJobResource.apiVersion()},
                   {"kind", "HostJob"},
                   {"metadata", {{"name", name}}},
                   {"spec", spec}};
    auto created = c.client->create(kHostJobResource, "", object);
    if (!created) {
      *env.err << "error: create hostjob " << name << ": " << created.error().message() << "\n";
      return kExitFailure;
    }
    *env.out << "hostjob " << name << " created\n";
    if (!args.wait) return kExitOk;
  }
  const ParsedHostJob parsed = parseHostJobSpec(spec);
  const auto limit =
      (parsed.spec ? parsed.spec->timeout : std::chrono::seconds(600)) + std::chrono::minutes(1);
  const auto deadline = clock.monoNow() + limit;
  for (;;) {
    auto job = c.client->get(kHostJobResource, "", name);
    if (!job) {
      *env.err << "error: " << job.error().message() << "\n";
      return kExitFailure;
    }
    const json& status = kube::jsonField(*job, "status");
    const bool done = kube::jsonField(status, "completed") == json(true) ||
                      !kube::jsonField(status, "message").is_null();
    if (args.action == "status" || done || clock.monoNow() >= deadline) {
      if (args.json) {
        *env.out << kube::jsonDump(status, 2) << "\n";
        return noNodeFailed(status) ? kExitOk : kExitFailure;
      }
      const bool ok = printHostJobStatus(*job, *env.out);
      if (args.action == "run" && !done) {
        *env.err << "error: hostjob " << name << " did not complete within "
                 << base::formatDuration(limit) << "\n";
        return kExitFailure;
      }
      return ok ? kExitOk : kExitFailure;
    }
    std::this_thread::sleep_for(args.poll);
  }
}

namespace {

// `ekco job run|status`. CLI11 keeps pointers into the members; each subcommand, once parsed,
// names itself in args_.action.
class JobCommands final : public Command {
 public:
  void add(CLI::App& root) override {
    auto* job = root.add_subcommand(
        "job", "HostJobs: run a command as root on selected nodes (needs enable_host_jobs)");
    job->require_subcommand(1);
    CLI::App* run =
        job->add_subcommand("run", "Create a HostJob: ekco job run [--selector SEL] -- CMD ARGS");
    setExitStatus(run,
                  "0 created (--wait: completed and no node failed); 1 the API failed, a node "
                  "failed, or --wait's time ran out; 2 bad usage or a spec the agents would "
                  "reject");
    run->add_option("--name", args_.name, "The HostJob's name (default: ekco-job-<time>)");
    run->add_option("--selector", args_.selector,
                    "Nodes, in label-selector syntax: key=value, key!=value, key, !key, key in "
                    "(a,b), key notin (a,b), comma-separated (default: every node)");
    run->add_option("--host-path", args_.host_path,
                    "Host directory the command runs in (default /)");
    run->add_option("--timeout", args_.timeout, "Per-node time limit, e.g. 10m (default 10m)");
    run->add_flag("--wait", args_.wait, "Wait until every selected node finished; show status");
    run->add_option("COMMAND", args_.command,
                    "After --: the program (an absolute path) and its arguments; no shell")
        ->required()
        ->expected(-1);
    CLI::App* status = job->add_subcommand("status", "A HostJob node by node");
    setExitStatus(status,
                  "0 no node failed or was rejected so far; 1 one did, or the API failed; 2 "
                  "bad usage");
    status->add_option("NAME", args_.name, "The HostJob")->required();
    status->add_flag("--json", args_.json, "Print the HostJob's status as JSON");
    for (CLI::App* sub : {run, status}) {
      addHostCommandFlags(sub, config_, args_.kubeconfig, args_.host_root,
                          "Config file (default /etc/ekco/config.yaml)");
      sub->callback([this, sub] { args_.action = sub->get_name(); });
    }
  }
  bool parsed() const override { return !args_.action.empty(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    auto config = hostCommandConfig(config_, nullptr, nullptr, log_level, args_.kubeconfig,
                                    args_.host_root, env);
    if (!config) return kExitUsage;
    return runJobCommand(*config, args_, env);
  }

 private:
  std::string config_{};
  JobArgs args_{};
};

}  // namespace

std::unique_ptr<Command> jobCommands() { return std::make_unique<JobCommands>(); }

}  // namespace ekco::agent
