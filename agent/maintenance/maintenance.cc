#include "agent/maintenance/maintenance.h"

#include <fmt/format.h>

#include "base/duration.h"
#include "base/strings.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

std::string dataString(const json& data, const char* key) {
  if (!data.is_object()) return "";
  auto it = data.find(key);
  return it != data.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string MaintenanceState::reasonText() const {
  if (!problem.empty()) return problem;
  return reason.empty() ? "no reason given" : reason;
}

MaintenanceState parseMaintenance(const json& configmap) {
  MaintenanceState s;
  if (!configmap.is_object()) return s;
  s.present = true;
  const json* data = nullptr;
  if (auto it = configmap.find("data"); it != configmap.end()) data = &*it;
  const json empty = json::object();
  const json& d = data != nullptr ? *data : empty;
  s.reason = dataString(d, "reason");
  s.by = dataString(d, "by");
  if (std::string since = dataString(d, "since"); !since.empty()) {
    if (auto t = kube::parseRfc3339(since)) s.since = *t;
  }
  if (std::string until = dataString(d, "until"); !until.empty()) {
    auto t = kube::parseRfc3339(until);
    if (t) {
      s.until = *t;
    } else {
      s.problem = fmt::format("{} has an unreadable until {} (on until turned off)",
                              kMaintenanceConfigMap, base::quoteForMessage(until));
    }
  }
  return s;
}

json maintenanceJson(const MaintenanceState& state, base::WallTime now) {
  return {{"on", state.activeAt(now)},
          {"reason", state.present ? json(state.reasonText()) : json(nullptr)},
          {"since", kube::rfc3339OrNull(state.since)},
          {"until", kube::rfc3339OrNull(state.until)},
          {"by", state.present ? json(state.by) : json(nullptr)},
          {"expired", state.expiredAt(now)},
          {"problem", state.problem.empty() ? json(nullptr) : json(state.problem)}};
}

std::string describeMaintenance(const MaintenanceState& state, base::WallTime now) {
  if (!state.present) return "off";
  if (state.expiredAt(now)) {
    return fmt::format("off (expired at {}; `ekco maintenance off` removes it)",
                       kube::formatRfc3339(*state.until));
  }
  std::string out = "on (" + state.reasonText() + ")";
  if (state.since) out += ", since " + kube::formatRfc3339(*state.since);
  out += state.until ? ", until " + kube::formatRfc3339(*state.until) : ", until turned off";
  if (!state.by.empty()) out += ", by " + state.by;
  return out;
}

base::Result<MaintenanceState> readMaintenance(kube::KubeClient& client, std::string_view ns) {
  auto got = client.get(kube::resources::kConfigMaps, ns, kMaintenanceConfigMap);
  if (!got) {
    if (got.error().code() == ErrorCode::kNotFound) return MaintenanceState{};
    return std::move(got).error().wrap("read the maintenance ConfigMap");
  }
  return parseMaintenance(*got);
}

base::Status recordMaintenanceEvent(kube::KubeClient& client, std::string_view ns,
                                    const std::string& reason, const std::string& message) {
  return client.recordEvent({.involved_resource = kube::resources::kConfigMaps,
                             .involved_namespace = std::string(ns),
                             .involved_name = std::string(kMaintenanceConfigMap),
                             .reason = reason,
                             .message = message});
}

base::Result<MaintenanceState> enterMaintenance(kube::KubeClient& client, std::string_view ns,
                                                const EnterMaintenance& request,
                                                const base::Clock& clock) {
  if (request.duration && request.duration->count() <= 0) {
    return Error("maintenance: the duration must be positive", ErrorCode::kInvalidArgument);
  }
  if (request.duration && *request.duration > kMaxMaintenanceDuration) {
    return Error(fmt::format("maintenance: the duration {} is longer than {}",
                             base::formatDuration(*request.duration),
                             base::formatDuration(kMaxMaintenanceDuration)),
                 ErrorCode::kInvalidArgument);
  }
  const base::WallTime now = std::chrono::floor<std::chrono::seconds>(clock.wallNow());
  MaintenanceState s{.present = true, .reason = request.reason, .since = now, .by = request.by};
  json data = {{"reason", s.reason}, {"since", kube::formatRfc3339(now)}, {"by", s.by}};
  if (request.duration) {
    s.until = now + *request.duration;
    data["until"] = kube::formatRfc3339(*s.until);
  }
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", std::string(kMaintenanceConfigMap)},
                   {"namespace", std::string(ns)},
                   {"labels", {{"app.kubernetes.io/name", "ekco"}}}}},
                 {"data", data}};
  auto created = client.create(kube::resources::kConfigMaps, ns, object);
  if (!created && created.error().code() == ErrorCode::kAlreadyExists) {
    // Replaced whole (no resourceVersion: the newest request wins).
    created = client.update(kube::resources::kConfigMaps, ns, object);
  }
  if (!created) return std::move(created).error().wrap("turn maintenance mode on");
  std::string message = "maintenance mode on: " + s.reasonText();
  message += s.until ? ", until " + kube::formatRfc3339(*s.until) : ", until turned off";
  if (!s.by.empty()) message += " (" + s.by + ")";
  if (auto recorded = recordMaintenanceEvent(client, ns, "MaintenanceOn", message); !recorded) {
    return std::move(recorded).error().wrap("maintenance is on; record the MaintenanceOn Event");
  }
  return s;
}

base::Result<bool> leaveMaintenance(kube::KubeClient& client, std::string_view ns,
                                    const std::string& by) {
  auto removed = client.remove(kube::resources::kConfigMaps, ns, kMaintenanceConfigMap);
  bool was_present = true;
  if (!removed) {
    if (removed.error().code() != ErrorCode::kNotFound) {
      return std::move(removed).error().wrap("turn maintenance mode off");
    }
    was_present = false;
  }
  if (was_present) {
    auto recorded = recordMaintenanceEvent(
        client, ns, "MaintenanceOff", "maintenance mode off" + (by.empty() ? "" : " (" + by + ")"));
    if (!recorded) {
      return std::move(recorded).error().wrap(
          "maintenance is off; record the MaintenanceOff Event");
    }
  }
  return was_present;
}

}  // namespace ekco::agent
