#include "agent/features/reboot/reboot.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <ostream>
#include <thread>

#include <fmt/format.h>

#include "base/duration.h"
#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::agent {

using base::ErrorCode;
using base::MonoTime;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr std::string_view kProcMounts = "/proc/mounts";
constexpr std::string_view kPodsDir = "/var/lib/kubelet/pods/";
constexpr std::string_view kCephFsSource = ":6789:/";
constexpr std::string_view kRookNamespace = "rook-ceph";
constexpr std::string_view kMirrorAnnotation = "kubernetes.io/config.mirror";

// /proc/mounts escapes space, tab, newline and backslash as \ooo.
std::string unescapeMountField(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const char a = s[i + 1];
      const char b = s[i + 2];
      const char c = s[i + 3];
      if (a >= '0' && a <= '3' && b >= '0' && b <= '7' && c >= '0' && c <= '7') {
        out.push_back(static_cast<char>((a - '0') * 64 + (b - '0') * 8 + (c - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string annotation(const json& object, std::string_view key) {
  const json* meta = object.contains("metadata") ? &object["metadata"] : nullptr;
  if (meta == nullptr || !meta->contains("annotations") || !(*meta)["annotations"].is_object()) {
    return {};
  }
  const json& annotations = (*meta)["annotations"];
  auto it = annotations.find(std::string(key));
  return it != annotations.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool hasAnnotation(const json& object, std::string_view key) {
  const json& annotations = kube::jsonField(kube::jsonField(object, "metadata"), "annotations");
  return annotations.is_object() && annotations.contains(key);
}

bool unschedulable(const json& node) {
  const json& value = kube::jsonField(kube::jsonField(node, "spec"), "unschedulable");
  return value.is_boolean() && value.get<bool>();
}

std::string metaString(const json& object, const char* field) {
  return kube::jsonText(kube::jsonField(object, "metadata"), field);
}

bool terminating(const json& object) {
  return object.contains("metadata") && object["metadata"].contains("deletionTimestamp") &&
         !object["metadata"]["deletionTimestamp"].is_null();
}

// A resourceVersion in a patch is a precondition: the patch fails with Conflict when the object
// changed since it was read.
void guardWithResourceVersion(json& patch, const json& object) {
  const std::string rv = metaString(object, "resourceVersion");
  if (!rv.empty()) patch["metadata"]["resourceVersion"] = rv;
}

// Credentials that fail now fail on every retry.
bool permanent(ErrorCode code) {
  return code == ErrorCode::kNotFound || code == ErrorCode::kPermissionDenied ||
         code == ErrorCode::kUnauthenticated || code == ErrorCode::kInvalidArgument ||
         code == ErrorCode::kParse;
}

// A 403 names what to do about it.
std::string explain(const base::Error& e) {
  if (e.code() == ErrorCode::kPermissionDenied) {
    return e.message() +
           " (the kubeconfig's user is not allowed to; use admin.conf with --kubeconfig)";
  }
  return e.message();
}

// Rounded to milliseconds: "waited 2.001s", not nanoseconds.
std::string durationText(base::Duration d) {
  return base::formatDuration(std::chrono::duration_cast<milliseconds>(d));
}

class Shutdown {
 public:
  Shutdown(kube::KubeClient& client, const hostfs::HostFs& host_fs, const base::Clock& clock,
           const ShutdownOptions& options)
      : client_(client), host_fs_(host_fs), clock_(clock), options_(options) {
    if (!options_.sleep) {
      options_.sleep = [](milliseconds d) { std::this_thread::sleep_for(d); };
    }
  }

  RebootStepReport run() {
    const MonoTime start = clock_.monoNow();
    deadline_ = start + options_.unmount_timeout + options_.deadline_margin;
    base::logInfo(
        "shutdown: starting",
        {{"node", options_.node_name},
         {"dry_run", options_.dry_run},
         {"unmount_timeout", durationText(options_.unmount_timeout)},
         {"deadline", durationText(options_.unmount_timeout + options_.deadline_margin)}});
    cordon();
    deletePods();
    waitForUnmounts();
    deleteRookPods();
    const auto took = clock_.monoNow() - start;
    if (report_.ok()) {
      base::logInfo("shutdown: done", {{"node", options_.node_name}, {"took", took}});
    } else {
      base::logError("shutdown: done with failures", {{"node", options_.node_name},
                                                      {"failed_steps", report_.failures.size()},
                                                      {"took", took}});
    }
    return report_;
  }

 private:
  void fail(std::string_view step, const std::string& message) {
    base::logError("shutdown: step failed", {{"step", step}, {"error", message}});
    report_.failures.push_back(std::string(step) + ": " + message);
  }
  bool pastDeadline() const { return clock_.monoNow() >= deadline_; }
  void sleepUntilAtMost(milliseconds d, MonoTime until) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - clock_.monoNow());
    const milliseconds step = std::min(d, left);
    if (step.count() > 0) options_.sleep(step);
  }

  void cordon() {
    const std::string& name = options_.node_name;
    std::optional<base::Error> last;
    for (int attempt = 1; attempt <= std::max(1, options_.cordon_attempts); ++attempt) {
      if (attempt > 1 && pastDeadline()) break;
      auto node = client_.get(kube::resources::kNodes, "", name);
      if (!node) {
        last = node.error();
        if (permanent(last->code())) break;
        sleepUntilAtMost(options_.cordon_retry_delay, deadline_);
        continue;
      }
      const bool was = unschedulable(*node);
      const std::string was_text = was ? "true" : "false";
      if (was && annotation(*node, kCordonedByAnnotation) == kCordonedByShutdown) {
        base::logInfo("shutdown: node already cordoned by ekco shutdown; record kept",
                      {{"node", name},
                       {"was_unschedulable", annotation(*node, kWasUnschedulableAnnotation)}});
        return;
      }
      if (options_.dry_run) {
        base::logInfo(was ? "shutdown: dry run: node is already cordoned (not by ekco); would "
                            "record it without claiming it"
                          : "shutdown: dry run: would cordon the node",
                      {{"node", name}, {"was_unschedulable", was_text}});
        return;
      }
      json patch = {{"metadata",
                     {{"annotations",
                       {{std::string(kCordonedByAnnotation), std::string(kCordonedByShutdown)},
                        {std::string(kWasUnschedulableAnnotation), was_text}}}}},
                    {"spec", {{"unschedulable", true}}}};
      guardWithResourceVersion(patch, *node);
      auto patched =
          client_.patch(kube::resources::kNodes, "", name, kube::PatchType::kMerge, patch);
      if (patched) {
        if (was) {
          base::logInfo(
              "shutdown: node was already cordoned (not by ekco); recorded "
              "was-unschedulable=true, startup will leave it cordoned",
              {{"node", name}});
        } else {
          base::logInfo("shutdown: node cordoned", {{"node", name}, {"attempt", attempt}});
        }
        return;
      }
      last = patched.error();
      if (last->code() == ErrorCode::kConflict) continue;  // changed meanwhile: read again
      if (permanent(last->code())) break;
      sleepUntilAtMost(options_.cordon_retry_delay, deadline_);
    }
    fail("cordon",
         last ? "node " + name + ": " + explain(*last) : "node " + name + ": the deadline passed");
  }

  void deletePods() {
    if (pastDeadline()) {
      fail("pods", "skipped: the deadline passed");
      return;
    }
    const std::string& name = options_.node_name;
    auto list =
        client_.listAll(kube::resources::kPods, "", {.field_selector = "spec.nodeName=" + name});
    if (!list) {
      fail("pods", "list the pods on node " + name + ": " + explain(list.error()));
      return;
    }
    int deleted = 0;
    int kept = 0;
    int failed = 0;
    std::string first_error;
    for (const json& pod : (*list)["items"]) {
      const std::string ns = metaString(pod, "namespace");
      const std::string pod_name = metaString(pod, "name");
      const auto& excluded = options_.excluded_namespaces;
      if (std::find(excluded.begin(), excluded.end(), ns) != excluded.end() ||
          hasAnnotation(pod, kMirrorAnnotation) || terminating(pod)) {
        ++kept;
        continue;
      }
      if (options_.dry_run) {
        base::logInfo("shutdown: dry run: would delete pod", {{"pod", ns + "/" + pod_name}});
        ++deleted;
        continue;
      }
      if (pastDeadline()) {
        ++failed;
        if (first_error.empty()) first_error = "the deadline passed";
        continue;
      }
      auto removed = client_.remove(kube::resources::kPods, ns, pod_name,
                                    {.precondition_uid = metaString(pod, "uid")});
      // Gone already, or a new pod of that name (the uid precondition): nothing to delete.
      if (removed || removed.error().code() == ErrorCode::kNotFound ||
          removed.error().code() == ErrorCode::kConflict) {
        base::logInfo("shutdown: pod deleted", {{"pod", ns + "/" + pod_name}});
        ++deleted;
        continue;
      }
      ++failed;
      base::logWarn("shutdown: delete pod failed",
                    {{"pod", ns + "/" + pod_name}, {"error", removed.error()}});
      if (first_error.empty()) first_error = explain(removed.error());
    }
    base::logInfo(options_.dry_run ? "shutdown: dry run: pods that would be deleted"
                                   : "shutdown: pods deleted",
                  {{"node", name}, {"deleted", deleted}, {"kept", kept}, {"failed", failed}});
    if (failed > 0) {
      fail("pods", fmt::format("could not delete {} of {} pods: {}", failed, failed + deleted,
                               first_error));
    }
  }

  base::Result<std::vector<PodVolumeMount>> readMounts() const {
    auto text = host_fs_.read(kProcMounts);
    if (!text) return std::move(text).error();
    return podVolumeMounts(*text);
  }

  void waitForUnmounts() {
    const MonoTime wait_start = clock_.monoNow();
    // Leave half the margin for the rook step and the overshoot of one API call.
    const MonoTime wait_end =
        std::min(wait_start + options_.unmount_timeout, deadline_ - options_.deadline_margin / 2);
    auto mounts = readMounts();
    if (!mounts) {
      fail("unmount", "read the mount table: " + mounts.error().message());
      return;
    }
    if (mounts->empty()) {
      base::logInfo("shutdown: no pod volume mounts (PVC or CephFS) on the host");
      return;
    }
    if (options_.dry_run) {
      base::logInfo("shutdown: dry run: would wait for pod volumes to unmount",
                    {{"remaining", mounts->size()}, {"first", mounts->front().mount_point}});
      return;
    }
    base::logInfo("shutdown: waiting for pod volumes to unmount",
                  {{"remaining", mounts->size()},
                   {"first", mounts->front().mount_point},
                   {"timeout", durationText(options_.unmount_timeout)}});
    MonoTime last_progress = wait_start;
    std::size_t remaining = mounts->size();
    std::string first = mounts->front().mount_point;
    while (true) {
      if (clock_.monoNow() >= wait_end) {
        fail("unmount",
             fmt::format("{} pod volume mount(s) still present after {} (shutdown_unmount_timeout "
                         "{}), e.g. {}",
                         remaining, durationText(clock_.monoNow() - wait_start),
                         durationText(options_.unmount_timeout), first));
        return;
      }
      sleepUntilAtMost(options_.poll_interval, wait_end);
      auto now_mounts = readMounts();
      if (!now_mounts) {
        base::logWarn("shutdown: read the mount table failed", {{"error", now_mounts.error()}});
      } else {
        if (now_mounts->empty()) {
          base::logInfo("shutdown: pod volumes unmounted",
                        {{"waited", clock_.monoNow() - wait_start}});
          return;
        }
        remaining = now_mounts->size();
        first = now_mounts->front().mount_point;
      }
      if (clock_.monoNow() - last_progress >= options_.progress_interval) {
        last_progress = clock_.monoNow();
        base::logInfo("shutdown: waiting for pod volumes to unmount",
                      {{"remaining", remaining},
                       {"first", first},
                       {"waited", clock_.monoNow() - wait_start}});
      }
    }
  }

  void deleteRookPods() {
    if (pastDeadline()) {
      fail("rook", "skipped: the deadline passed");
      return;
    }
    const std::string& name = options_.node_name;
    auto list = client_.listAll(kube::resources::kPods, kRookNamespace,
                                {.field_selector = "spec.nodeName=" + name});
    if (!list) {
      if (list.error().code() == ErrorCode::kNotFound) return;
      fail("rook", "list the rook-ceph pods on node " + name + ": " + explain(list.error()));
      return;
    }
    int failed = 0;
    std::string first_error;
    int deleted = 0;
    for (const json& pod : (*list)["items"]) {
      const std::string pod_name = metaString(pod, "name");
      if (pod_name.rfind("rook-ceph-operator", 0) != 0 &&
          pod_name.rfind("rook-ceph-mds-", 0) != 0) {
        continue;
      }
      if (terminating(pod)) continue;
      if (options_.dry_run) {
        base::logInfo("shutdown: dry run: would delete rook pod",
                      {{"pod", std::string(kRookNamespace) + "/" + pod_name}});
        continue;
      }
      if (pastDeadline()) {
        ++failed;
        if (first_error.empty()) first_error = "the deadline passed";
        continue;
      }
      auto removed = client_.remove(kube::resources::kPods, kRookNamespace, pod_name,
                                    {.precondition_uid = metaString(pod, "uid")});
      if (removed || removed.error().code() == ErrorCode::kNotFound ||
          removed.error().code() == ErrorCode::kConflict) {
        ++deleted;
        base::logInfo("shutdown: rook pod deleted so it reschedules",
                      {{"pod", std::string(kRookNamespace) + "/" + pod_name}});
        continue;
      }
      ++failed;
      if (first_error.empty()) first_error = explain(removed.error());
    }
    if (failed > 0) {
      fail("rook", fmt::format("could not delete {} rook-ceph pod(s): {}", failed, first_error));
    } else if (deleted == 0 && !options_.dry_run) {
      base::logInfo("shutdown: no rook-ceph operator or mds pod on this node");
    }
  }

  kube::KubeClient& client_;
  const hostfs::HostFs& host_fs_;
  const base::Clock& clock_;
  ShutdownOptions options_;
  MonoTime deadline_{};
  RebootStepReport report_{};
};

class Startup {
 public:
  Startup(kube::KubeClient& client, const base::Clock& clock, const StartupOptions& options)
      : client_(client), clock_(clock), options_(options) {
    if (!options_.sleep) {
      options_.sleep = [](milliseconds d) { std::this_thread::sleep_for(d); };
    }
  }

  RebootStepReport run() {
    const MonoTime start = clock_.monoNow();
    const MonoTime deadline = start + options_.api_timeout;
    const std::string& name = options_.node_name;
    base::logInfo("startup: waiting for the API",
                  {{"node", name},
                   {"dry_run", options_.dry_run},
                   {"timeout", durationText(options_.api_timeout)}});
    std::optional<json> node = waitForNode(start, deadline);
    if (!node) return report_;
    for (int attempt = 1; attempt <= std::max(1, options_.uncordon_attempts); ++attempt) {
      if (attempt > 1) {
        auto again = client_.get(kube::resources::kNodes, "", name);
        if (!again) {
          fail("uncordon", "node " + name + ": " + explain(again.error()));
          return report_;
        }
        node = std::move(*again);
      }
      if (options_.before_uncordon && !beacon_done_) {
        auto settled = options_.before_uncordon(*node);
        if (!settled && settled.error().code() == ErrorCode::kConflict) continue;
        beacon_done_ = true;
        if (settled) {
          node = std::move(*settled);
        } else {
          fail("beacon", "node " + name + ": " + explain(settled.error()));
        }
      }
      auto done = settle(*node);
      if (done) return report_;
      if (done.error().code() != ErrorCode::kConflict) {
        fail("uncordon", "node " + name + ": " + explain(done.error()));
        return report_;
      }
    }
    fail("uncordon", "node " + name + ": it kept changing (conflicts); try again");
    return report_;
  }

 private:
  void fail(std::string_view step, const std::string& message) {
    base::logError("startup: step failed", {{"step", step}, {"error", message}});
    report_.failures.push_back(std::string(step) + ": " + message);
  }

  std::optional<json> waitForNode(MonoTime start, MonoTime deadline) {
    const std::string& name = options_.node_name;
    std::string last_error;
    MonoTime last_progress = start;
    while (true) {
      auto node = client_.get(kube::resources::kNodes, "", name);
      if (node) {
        base::logInfo("startup: the API is up", {{"waited", clock_.monoNow() - start}});
        return std::move(*node);
      }
      const base::Error& e = node.error();
      if (e.code() == ErrorCode::kPermissionDenied || e.code() == ErrorCode::kUnauthenticated) {
        fail("api", "node " + name + ": " + explain(e));
        return std::nullopt;
      }
      const MonoTime now = clock_.monoNow();
      if (now >= deadline) {
        fail("api", fmt::format("the API was not reachable within {} (startup_api_timeout); the "
                                "node stays as it is: {}",
                                durationText(options_.api_timeout), e.message()));
        return std::nullopt;
      }
      if (e.message() != last_error || now - last_progress >= options_.progress_interval) {
        base::logInfo("startup: waiting for the API",
                      {{"error", e.message()}, {"waited", now - start}});
        last_error = e.message();
        last_progress = now;
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
      const milliseconds step = std::min(options_.poll_interval, left);
      if (step.count() > 0) options_.sleep(step);
    }
  }

  // Uncordons and/or clears the markers. kConflict: the node changed, read it again.
  base::Status settle(const json& node) {
    const std::string& name = options_.node_name;
    const bool cordoned = unschedulable(node);
    if (annotation(node, kCordonedByAnnotation) != kCordonedByShutdown) {
      if (cordoned) {
        base::logInfo(
            "startup: node is cordoned without ekco's marker (an admin's cordon); "
            "left cordoned",
            {{"node", name}});
      } else {
        base::logInfo("startup: node is schedulable and has no ekco marker; nothing to do",
                      {{"node", name}});
      }
      return base::ok();
    }
    const std::string was = annotation(node, kWasUnschedulableAnnotation);
    const bool uncordon = cordoned && was == "false";
    json patch = {{"metadata",
                   {{"annotations",
                     {{std::string(kCordonedByAnnotation), nullptr},
                      {std::string(kWasUnschedulableAnnotation), nullptr}}}}}};
    guardWithResourceVersion(patch, node);
    if (uncordon) patch["spec"] = {{"unschedulable", nullptr}};
    const char* what = uncordon ? "node uncordoned (ekco shutdown had cordoned it); markers removed"
                       : cordoned
                           ? "node was cordoned before shutdown (not by ekco); left cordoned, "
                             "markers removed"
                           : "node already schedulable; markers removed";
    if (options_.dry_run) {
      base::logInfo(std::string("startup: dry run: would do: ") + what,
                    {{"node", name}, {"was_unschedulable", was}});
      return base::ok();
    }
    auto patched = client_.patch(kube::resources::kNodes, "", name, kube::PatchType::kMerge, patch);
    if (!patched) return std::move(patched).error();
    base::logInfo(std::string("startup: ") + what, {{"node", name}, {"was_unschedulable", was}});
    return base::ok();
  }

  kube::KubeClient& client_;
  const base::Clock& clock_;
  StartupOptions options_;
  RebootStepReport report_{};
  bool beacon_done_ = false;
};

}  // namespace

std::vector<PodVolumeMount> podVolumeMounts(std::string_view proc_mounts) {
  std::vector<PodVolumeMount> out;
  while (!proc_mounts.empty()) {
    const std::size_t nl = proc_mounts.find('\n');
    std::string_view line = proc_mounts.substr(0, nl);
    proc_mounts.remove_prefix(nl == std::string_view::npos ? proc_mounts.size() : nl + 1);
    // "source mount_point fstype options freq passno", separated by single spaces.
    const std::size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos) continue;
    const std::size_t sp2 = line.find(' ', sp1 + 1);
    std::string source = unescapeMountField(line.substr(0, sp1));
    std::string mount_point = unescapeMountField(line.substr(
        sp1 + 1, sp2 == std::string_view::npos ? std::string_view::npos : sp2 - sp1 - 1));
    bool pvc = false;
    if (mount_point.rfind(kPodsDir, 0) == 0) {
      const std::size_t volumes = mount_point.find("/volumes/", kPodsDir.size());
      pvc = volumes != std::string::npos && mount_point.find("/pvc-", volumes) != std::string::npos;
    }
    const bool cephfs = source.find(kCephFsSource) != std::string::npos;
    if (pvc || cephfs) out.push_back({std::move(source), std::move(mount_point)});
  }
  return out;
}

RebootStepReport shutdownNode(kube::KubeClient& client, const hostfs::HostFs& host_fs,
                              const base::Clock& clock, const ShutdownOptions& options) {
  return Shutdown(client, host_fs, clock, options).run();
}

base::Result<bool> nodeJoined(const hostfs::HostFs& host_fs) {
  return host_fs.exists(kube::kKubeletConf);
}

RebootStepReport startupNode(kube::KubeClient& client, const base::Clock& clock,
                             const StartupOptions& options) {
  return Startup(client, clock, options).run();
}

}  // namespace ekco::agent
