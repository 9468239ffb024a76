#include "agent/policy/disruption_lease.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

DisruptionLease::DisruptionLease(kube::KubeClient& client, const base::Clock& clock,
                                 DisruptionLeaseOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

base::Status DisruptionLease::acquire() {
  const base::WallTime now = clock_.wallNow();
  const std::string stamp = kube::formatRfc3339Micro(now);
  json spec = {{"holderIdentity", options_.holder},
               {"leaseDurationSeconds", options_.ttl.count()},
               {"acquireTime", stamp},
               {"renewTime", stamp}};
  auto current = client_.get(kube::resources::kLeases, options_.ns, kDisruptionLeaseName);
  if (!current) {
    if (current.error().code() != ErrorCode::kNotFound) return std::move(current).error();
    json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", kDisruptionLeaseName}, {"namespace", options_.ns}}},
                  {"spec", spec}};
    auto created = client_.create(kube::resources::kLeases, options_.ns, lease);
    if (!created && created.error().code() == ErrorCode::kAlreadyExists) {
      return Error("the disruption lease was taken at the same moment; try again",
                   ErrorCode::kConflict);
    }
    if (!created) return std::move(created).error();
    return base::ok();
  }
  const json& old = kube::jsonField(*current, "spec");
  const std::string holder = kube::jsonText(old, "holderIdentity");
  if (!holder.empty() && holder != options_.holder) {
    // Someone else's: free only once its renewTime + leaseDurationSeconds has passed. A lease we
    // cannot read is treated as held for its duration from now (never taken early).
    base::WallTime until = now + options_.ttl;
    if (old.contains("renewTime") && old["renewTime"].is_string() &&
        old.contains("leaseDurationSeconds") && old["leaseDurationSeconds"].is_number_integer()) {
      if (auto renewed = kube::parseRfc3339(old["renewTime"].get<std::string>())) {
        const auto seconds = old["leaseDurationSeconds"].get<std::int64_t>();
        until = base::saturatingAdd(
            *renewed, std::chrono::seconds(std::clamp<std::int64_t>(seconds, 0, 315'360'000)));
      }
    }
    if (until > now) {
      return Error(
          fmt::format("another control-plane disruption is in progress: {} holds lease "
                      "{}/{} until {}",
                      holder, options_.ns, kDisruptionLeaseName, kube::formatRfc3339(until)),
          ErrorCode::kConflict);
    }
    base::logWarn("taking over an expired disruption lease", {{"holder", holder}});
  } else if (holder == options_.holder && old.contains("acquireTime")) {
    spec["acquireTime"] = old["acquireTime"];  // renewing: keep when we took it
  }
  json updated = *current;
  updated["spec"] = spec;
  auto written = client_.update(kube::resources::kLeases, options_.ns, updated);
  if (!written) return std::move(written).error();
  return base::ok();
}

base::Status DisruptionLease::release() {
  auto current = client_.get(kube::resources::kLeases, options_.ns, kDisruptionLeaseName);
  if (!current) {
    if (current.error().code() == ErrorCode::kNotFound) return base::ok();
    return std::move(current).error();
  }
  const json& holder = kube::jsonField(kube::jsonField(*current, "spec"), "holderIdentity");
  if (holder != json(options_.holder)) return base::ok();
  json updated = *current;
  updated["spec"]["holderIdentity"] = "";
  updated["spec"].erase("renewTime");
  auto written = client_.update(kube::resources::kLeases, options_.ns, updated);
  if (!written && written.error().code() != ErrorCode::kConflict) {
    return std::move(written).error();
  }
  return base::ok();
}

base::Status DisruptionLease::acquireWithin(
    std::chrono::milliseconds timeout, std::chrono::milliseconds poll,
    const std::function<bool(std::chrono::milliseconds)>& wait) {
  const base::MonoTime deadline = clock_.monoNow() + timeout;
  while (true) {
    base::Status taken = acquire();
    if (taken) return taken;
    if (taken.error().code() != ErrorCode::kConflict || clock_.monoNow() + poll > deadline) {
      return taken;
    }
    base::logInfo("waiting for the disruption lease", {{"reason", taken.error().message()}});
    if (!wait) {
      std::this_thread::sleep_for(poll);
    } else if (!wait(poll)) {
      return Error(
          "stopped while waiting for the disruption lease (" + taken.error().message() + ")",
          ErrorCode::kCancelled);
    }
  }
}

}  // namespace ekco::agent
