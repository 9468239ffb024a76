#include "agent/features/reboot/shutdown_drain.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "agent/features/reboot/shutdown_beacon.h"
#include "base/log/log.h"

namespace ekco::agent {

RebootStepReport drainNodeForShutdown(kube::KubeClient& client, const hostfs::HostFs& host_fs,
                                      const base::Clock& clock, const Config& config,
                                      const std::string& node_name, bool dry_run) {
  ShutdownOptions options;
  options.node_name = node_name;
  options.excluded_namespaces = config.shutdown_excluded_namespaces;
  options.unmount_timeout = config.shutdown_unmount_timeout;
  options.dry_run = dry_run;
  RebootStepReport report = shutdownNode(client, host_fs, clock, options);
  // The beacon says the node goes down with nothing left to lose: only once its pods were
  // deleted and its pod volumes unmounted. Otherwise the leader takes the unplanned path.
  const bool drained = std::none_of(
      report.failures.begin(), report.failures.end(),
      [](const std::string& f) { return f.starts_with("pods:") || f.starts_with("unmount:"); });
  if (!drained) {
    base::logWarn(
        "shutdown: no shutdown beacon recorded: pods or volumes may remain, so the "
        "node takes the unplanned-loss path",
        {{"node", node_name}});
  } else if (auto beacon = recordShutdownBeacon(client, host_fs, clock, node_name, dry_run);
             !beacon) {
    base::logError("shutdown: step failed", {{"step", "beacon"}, {"error", beacon.error()}});
    report.failures.push_back("beacon: " + beacon.error().message());
  }
  return report;
}

std::string formatShutdownMarker(const ShutdownMarker& marker) {
  switch (marker.state) {
    case DrainState::kDraining:
      return "draining pid=" + std::to_string(marker.pid) + " boot_id=" + marker.boot_id + "\n";
    case DrainState::kDrained:
      return "drained boot_id=" + marker.boot_id + "\n";
    case DrainState::kFailed:
      return "failed boot_id=" + marker.boot_id + "\n";
  }
  return "";
}

namespace {

// "key=value" with a non-empty value of [0-9a-f-] (a boot id) or digits (a pid).
bool field(std::string_view word, std::string_view key, std::string_view& value) {
  if (!word.starts_with(key) || word.size() <= key.size() || word[key.size()] != '=') return false;
  value = word.substr(key.size() + 1);
  return !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
  });
}

}  // namespace

std::optional<ShutdownMarker> parseShutdownMarker(std::string_view text) {
  if (!text.ends_with('\n')) return std::nullopt;  // torn
  text.remove_suffix(1);
  if (text.find('\n') != std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> words;
  while (!text.empty()) {
    const auto space = text.find(' ');
    words.push_back(text.substr(0, space));
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  ShutdownMarker marker;
  std::string_view value;
  if (words.size() == 3 && words[0] == "draining" && field(words[1], "pid", value)) {
    const auto parsed = std::from_chars(value.data(), value.data() + value.size(), marker.pid);
    if (parsed.ec != std::errc() || parsed.ptr != value.data() + value.size() || marker.pid <= 0) {
      return std::nullopt;
    }
    if (!field(words[2], "boot_id", value)) return std::nullopt;
    marker.state = DrainState::kDraining;
    marker.boot_id = std::string(value);
    return marker;
  }
  if (words.size() == 2 && (words[0] == "drained" || words[0] == "failed") &&
      field(words[1], "boot_id", value)) {
    marker.state = words[0] == "drained" ? DrainState::kDrained : DrainState::kFailed;
    marker.boot_id = std::string(value);
    return marker;
  }
  return std::nullopt;
}

base::Status writeShutdownMarker(hostfs::HostFs& host_fs, const ShutdownMarker& marker) {
  auto written = host_fs.write(kShutdownMarkerPath, formatShutdownMarker(marker),
                               {.mode = 0644, .create_parents = true, .parent_mode = 0755});
  if (!written) return written.error().wrap("write the shutdown marker");
  return base::ok();
}

base::Result<std::optional<ShutdownMarker>> readShutdownMarker(const hostfs::HostFs& host_fs) {
  auto exists = host_fs.exists(kShutdownMarkerPath);
  if (!exists) return exists.error().wrap("read the shutdown marker");
  if (!*exists) return std::optional<ShutdownMarker>();
  auto text = host_fs.read(kShutdownMarkerPath);
  if (!text) {
    if (text.error().code() == base::ErrorCode::kNotFound) return std::optional<ShutdownMarker>();
    return text.error().wrap("read the shutdown marker");
  }
  return parseShutdownMarker(*text);
}

base::Status removeShutdownMarker(hostfs::HostFs& host_fs) {
  if (auto removed = host_fs.remove(kShutdownMarkerPath); !removed) {
    return removed.error().wrap("remove the shutdown marker");
  }
  return base::ok();
}

StopJobAction stopJobAction(const std::optional<ShutdownMarker>& marker, std::string_view boot_id,
                            bool pid_alive) {
  if (!marker || boot_id.empty() || marker->boot_id != boot_id) return StopJobAction::kDrain;
  switch (marker->state) {
    case DrainState::kDrained:
      return StopJobAction::kSkip;
    case DrainState::kDraining:
      return pid_alive ? StopJobAction::kWait : StopJobAction::kDrain;
    case DrainState::kFailed:
      return StopJobAction::kDrain;
  }
  return StopJobAction::kDrain;
}

}  // namespace ekco::agent
