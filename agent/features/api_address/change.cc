#include "agent/features/api_address/change.h"

#include <algorithm>

#include <fmt/format.h>

#include "agent/features/api_address/kubeconfig_server.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"

namespace ekco::agent::api_address {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

base::Result<Step> stepFrom(std::string_view name, std::string_view where) {
  for (Step s : {Step::kCertificate, Step::kCheck, Step::kKubeconfigs, Step::kDropSans}) {
    if (stepName(s) == name) return s;
  }
  return Error(fmt::format("{}: unknown step {}", where, base::quoteForMessage(name)),
               ErrorCode::kParse);
}

std::vector<std::string> strings(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const json& v : j) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

base::Result<json> parseObject(std::string_view text, std::string_view what) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) {
    return Error(fmt::format("{}: not a JSON object", what), ErrorCode::kParse);
  }
  return j;
}

}  // namespace

std::string_view stepName(Step step) {
  switch (step) {
    case Step::kCertificate:
      return "certificate";
    case Step::kKubeconfigs:
      return "kubeconfigs";
    case Step::kCheck:
      return "check";
    case Step::kDropSans:
      return "drop-sans";
  }
  return "?";
}

json requestConfigMap(std::string_view ns, const ChangeRequest& r) {
  std::string exclude;
  for (const std::string& n : r.exclude) exclude += (exclude.empty() ? "" : ",") + n;
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", std::string(kChangeConfigMap)},
            {"namespace", std::string(ns)},
            {"labels", {{"app.kubernetes.io/managed-by", "ekco"}}}}},
          {"data",
           {{"id", r.id},
            {"server", r.server},
            {"old-server", r.old_server},
            {"internal", r.internal ? "true" : "false"},
            {"drop-old-sans", r.drop_old_sans ? "true" : "false"},
            {"exclude", exclude}}}};
}

base::Result<ChangeRequest> parseRequest(const json& config_map) {
  const std::string where = fmt::format("ConfigMap {}", kChangeConfigMap);
  const json& data = kube::jsonField(config_map, "data");
  auto text = [&](const char* key) { return kube::jsonText(data, key); };
  ChangeRequest r{.id = text("id"), .server = text("server"), .old_server = text("old-server")};
  if (r.id.empty()) return Error(where + ": no data.id", ErrorCode::kParse);
  EKCO_TRY(checkServerUrl(r.server, where + " data.server"));
  if (!r.old_server.empty()) EKCO_TRY(checkServerUrl(r.old_server, where + " data.old-server"));
  for (auto [key, flag] :
       {std::pair{"internal", &r.internal}, std::pair{"drop-old-sans", &r.drop_old_sans}}) {
    const std::string v = text(key);
    if (v != "true" && v != "false" && !v.empty()) {
      return Error(fmt::format("{} data.{}: want true or false, got {}", where, key,
                               base::quoteForMessage(v)),
                   ErrorCode::kParse);
    }
    *flag = v == "true";
  }
  const std::string exclude = text("exclude");
  for (std::string_view rest = exclude; !rest.empty();) {
    const auto comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    if (!name.empty()) r.exclude.emplace_back(name);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return r;
}

std::string renderTask(const NodeTask& t) {
  return kube::jsonDump(json{{"id", t.id},
                             {"step", stepName(t.step)},
                             {"server", t.server},
                             {"add", t.add},
                             {"drop", t.drop},
                             {"admin", t.admin},
                             {"at", kube::formatRfc3339(t.at)}});
}

base::Result<NodeTask> parseTask(std::string_view text) {
  const std::string where(kTaskAnnotation);
  auto j = parseObject(text, where);
  if (!j) return std::move(j).error();
  NodeTask t{.id = kube::jsonText(*j, "id"), .server = kube::jsonText(*j, "server")};
  if (t.id.empty()) return Error(where + ": no id", ErrorCode::kParse);
  auto step = stepFrom(kube::jsonText(*j, "step"), where);
  if (!step) return std::move(step).error();
  t.step = *step;
  t.add = strings(kube::jsonField(*j, "add"));
  t.drop = strings(kube::jsonField(*j, "drop"));
  t.admin = kube::jsonField(*j, "admin").is_boolean() && (*j)["admin"].get<bool>();
  auto at = kube::parseRfc3339(kube::jsonText(*j, "at"));
  if (!at) return Error(where + ": no valid at", ErrorCode::kParse);
  t.at = *at;
  if (t.step == Step::kKubeconfigs || t.step == Step::kCheck) {
    EKCO_TRY(checkServerUrl(t.server, where + " server"));
  }
  return t;
}

std::string renderResult(const NodeResult& r) {
  return kube::jsonDump(json{{"id", r.id},
                             {"step", stepName(r.step)},
                             {"state", r.state == StepState::kRunning ? "running"
                                       : r.state == StepState::kDone  ? "done"
                                                                      : "failed"},
                             {"why", r.why}});
}

base::Result<NodeResult> parseResult(std::string_view text) {
  const std::string where(kResultAnnotation);
  auto j = parseObject(text, where);
  if (!j) return std::move(j).error();
  NodeResult r{.id = kube::jsonText(*j, "id"), .why = kube::jsonText(*j, "why")};
  if (r.id.empty()) return Error(where + ": no id", ErrorCode::kParse);
  auto step = stepFrom(kube::jsonText(*j, "step"), where);
  if (!step) return std::move(step).error();
  r.step = *step;
  const std::string state = kube::jsonText(*j, "state");
  if (state == "running") {
    r.state = StepState::kRunning;
  } else if (state == "done") {
    r.state = StepState::kDone;
  } else if (state == "failed") {
    r.state = StepState::kFailed;
  } else {
    return Error(where + ": unknown state " + base::quoteForMessage(state), ErrorCode::kParse);
  }
  return r;
}

std::vector<std::pair<Step, std::string>> changeSteps(const ChangeRequest& request,
                                                      const std::vector<ChangeNode>& nodes) {
  std::vector<const ChangeNode*> primaries;
  std::vector<const ChangeNode*> workers;
  for (const ChangeNode& n : nodes) {
    if (std::find(request.exclude.begin(), request.exclude.end(), n.name) !=
        request.exclude.end()) {
      continue;
    }
    (n.control_plane ? primaries : workers).push_back(&n);
  }
  auto by_name = [](const ChangeNode* a, const ChangeNode* b) { return a->name < b->name; };
  std::sort(primaries.begin(), primaries.end(), by_name);
  std::sort(workers.begin(), workers.end(), by_name);
  std::vector<std::pair<Step, std::string>> out;
  for (const ChangeNode* p : primaries) out.emplace_back(Step::kCertificate, p->name);
  if (request.internal) {  // the load balancer up on every node before any node moves
    for (const ChangeNode* p : primaries) out.emplace_back(Step::kCheck, p->name);
    for (const ChangeNode* w : workers) out.emplace_back(Step::kCheck, w->name);
  }
  for (const ChangeNode* p : primaries) out.emplace_back(Step::kKubeconfigs, p->name);
  for (const ChangeNode* w : workers) out.emplace_back(Step::kKubeconfigs, w->name);
  const bool drop = request.drop_old_sans && !request.old_server.empty() &&
                    serverHost(request.old_server) != serverHost(request.server);
  if (drop) {
    for (const ChangeNode* p : primaries) out.emplace_back(Step::kDropSans, p->name);
  }
  return out;
}

ChangeDecision planChange(const ChangeView& view, const ChangeOptions& options) {
  ChangeDecision d;
  if (!view.request) {
    d.summary = "no change of the API address requested";
    return d;
  }
  const ChangeRequest& req = *view.request;
  json steps = json::array();
  bool decided = !view.result.empty();
  if (decided) {
    d.summary = view.result == kSuccess
                    ? "the API address is " + req.server
                    : "the change to " + req.server + " stopped: " + view.result;
  }
  for (const auto& [step, name] : changeSteps(req, view.nodes)) {
    const ChangeNode& node = *std::find_if(view.nodes.begin(), view.nodes.end(),
                                           [&](const ChangeNode& n) { return n.name == name; });
    const bool mine_result = node.result && node.result->id == req.id && node.result->step == step;
    const bool mine_task = node.task && node.task->id == req.id && node.task->step == step;
    json entry = {{"node", name}, {"step", stepName(step)}, {"state", "pending"}};
    const bool recorded = std::find(view.recorded_done.begin(), view.recorded_done.end(),
                                    std::pair{step, name}) != view.recorded_done.end();
    if (recorded && !(mine_result && node.result->state == StepState::kDone)) {
      entry["state"] = "done";
      steps.push_back(std::move(entry));
      continue;
    }
    if (mine_result && node.result->state == StepState::kDone) {
      entry["state"] = "done";
      if (!node.result->why.empty()) entry["why"] = node.result->why;
      steps.push_back(std::move(entry));
      continue;
    }
    if (mine_result && node.result->state == StepState::kFailed) {
      entry["state"] = "failed";
      entry["why"] = node.result->why;
      if (!decided) {
        decided = true;
        d.kind = ChangeDecision::Kind::kFinish;
        d.node = name;
        d.result = fmt::format("{}: {}: {}", name, stepName(step), node.result->why);
        d.summary = "the change to " + req.server + " stopped: " + d.result;
      }
      steps.push_back(std::move(entry));
      continue;
    }
    if (decided) {  // after the step the operation stopped at (or after its end)
      steps.push_back(std::move(entry));
      continue;
    }
    decided = true;
    if (mine_task) {
      entry["state"] = "running";
      if (view.now - node.task->at > options.step_timeout) {
        d.kind = ChangeDecision::Kind::kFinish;
        d.node = name;
        d.result = fmt::format(
            "{}: {}: no final answer within {}m of the task (is its agent running?)", name,
            stepName(step),
            std::chrono::duration_cast<std::chrono::minutes>(options.step_timeout).count());
        d.summary = "the change to " + req.server + " stopped: " + d.result;
        entry["state"] = "failed";
        entry["why"] = d.result;
      } else {
        d.kind = ChangeDecision::Kind::kWait;
        d.node = name;
        d.summary = fmt::format("{} on {}", stepName(step), name);
      }
    } else if (!node.ready) {
      d.kind = ChangeDecision::Kind::kFinish;
      d.node = name;
      d.result = fmt::format("{}: {}: the node is not Ready (bring it back, or --exclude it)", name,
                             stepName(step));
      d.summary = "the change to " + req.server + " stopped: " + d.result;
      entry["state"] = "failed";
      entry["why"] = d.result;
    } else {
      d.kind = ChangeDecision::Kind::kAssign;
      d.node = name;
      d.task = {.id = req.id, .step = step, .at = view.now};
      if (step == Step::kCertificate) d.task.add = {serverHost(req.server)};
      if (step == Step::kDropSans) d.task.drop = {serverHost(req.old_server)};
      if (step == Step::kCheck) d.task.server = req.server;
      if (step == Step::kKubeconfigs) {
        d.task.server = req.server;
        d.task.admin = node.control_plane;
      }
      d.summary = fmt::format("{} on {}", stepName(step), name);
      entry["state"] = "running";
    }
    steps.push_back(std::move(entry));
  }
  if (!decided) {
    d.kind = ChangeDecision::Kind::kFinish;
    d.result = std::string(kSuccess);
    d.summary = "every node uses " + req.server;
  }
  if (d.kind == ChangeDecision::Kind::kFinish) {
    for (const ChangeNode& n : view.nodes) {
      if (!n.task || n.task->id != req.id) continue;
      const bool final_answer = n.result && n.result->id == req.id &&
                                n.result->step == n.task->step &&
                                n.result->state != StepState::kRunning;
      if (!final_answer) d.withdraw.push_back(n.name);
    }
  }
  d.progress = {{"id", req.id}, {"server", req.server}, {"steps", std::move(steps)}};
  return d;
}

std::vector<std::pair<Step, std::string>> doneSteps(const json& progress, std::string_view id) {
  std::vector<std::pair<Step, std::string>> out;
  if (!progress.is_object() || kube::jsonText(progress, "id") != id) return out;
  for (const json& e : kube::jsonField(progress, "steps")) {
    if (kube::jsonText(e, "state") != "done") continue;
    auto step = stepFrom(kube::jsonText(e, "step"), "progress");
    if (step) out.emplace_back(*step, kube::jsonText(e, "node"));
  }
  return out;
}

}  // namespace ekco::agent::api_address
