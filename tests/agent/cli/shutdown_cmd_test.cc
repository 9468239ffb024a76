// `ekco shutdown` / `ekco startup` against ekco-kubesim (in-process, HTTPS), with a fake mount
// table under a temporary host root (<root>/proc/mounts).
#include "agent/cli/shutdown_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "hostfs/local_host_fs.h"
#include "kube/curl_transport.h"
#include "kube/kubeconfig.h"
#include "kube/rest_client.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kPodUid = "0f0e0d0c-1111-2222-3333-444455556666";

json node(const std::string& name, bool unschedulable = false) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
            {"spec", json::object()},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (unschedulable) n["spec"]["unschedulable"] = true;
  return n;
}

json pod(const std::string& ns, const std::string& name, const std::string& node_name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"nodeName", node_name}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

std::vector<json> cluster() {
  json app = pod("default", "app-1", "node-a");
  app["metadata"]["uid"] = kPodUid;
  app["spec"]["volumes"] = {{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "d"}}}}};
  json mirror = pod("default", "static-web-node-a", "node-a");
  mirror["metadata"]["annotations"] = {{"kubernetes.io/config.mirror", "abc"}};
  return {node("node-a"),
          node("node-b"),
          app,
          pod("default", "web-2", "node-a"),
          mirror,
          pod("kube-system", "kube-proxy-a", "node-a"),
          pod("openebs", "openebs-ndm-a", "node-a"),
          pod("longhorn-system", "longhorn-manager-a", "node-a"),
          pod("default", "app-b", "node-b"),
          pod("rook-ceph", "rook-ceph-operator-7d9f-abcde", "node-a"),
          pod("rook-ceph", "rook-ceph-mds-rook-shared-fs-a-5f6-xyz", "node-a"),
          pod("rook-ceph", "rook-ceph-osd-0-6c7-xyz", "node-a"),
          pod("rook-ceph", "rook-ceph-mds-rook-shared-fs-b-5f6-zzz", "node-b")};
}

const std::string kOtherMounts =
    "/dev/sda1 / ext4 rw,relatime 0 0\n"
    "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
    "tmpfs /var/lib/kubelet/pods/" +
    std::string(kPodUid) + "/volumes/kubernetes.io~projected/kube-api-access-x tmpfs rw 0 0\n";
const std::string kPvcMount = "/dev/rbd0 /var/lib/kubelet/pods/" + std::string(kPodUid) +
                              "/volumes/kubernetes.io~csi/pvc-1234/mount ext4 rw 0 0\n";
const std::string kCephFsMount =
    "10.0.0.1:6789,10.0.0.2:6789:/volumes/csi/csi-vol-1 "
    "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-5678/globalmount ceph rw 0 0\n";

// Collects log lines for the duration of a test.
class LogCapture {
 public:
  LogCapture() {
    base::LogOptions options;
    options.level = base::LogLevel::kInfo;
    options.sink = [this](std::string_view line) {
      std::lock_guard lock(mu_);
      text_ += line;
    };
    base::configureLogging(options);
  }
  ~LogCapture() { base::configureLogging({}); }
  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }
  std::size_t count(std::string_view needle) const {
    const std::string t = text();
    std::size_t n = 0;
    for (std::size_t at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

class ShutdownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/root";
    fs::create_directories(root_ + "/proc");
    fs::create_directories(root_ + "/etc/kubernetes");
    startServer(cluster());
  }

  void startServer(std::vector<json> objects) {
    client_.reset();
    transport_.reset();
    server_.reset();
    auto server = kubesim::Server::start({.out_dir = dir_.path() + "/sim", .objects = objects});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto process_fs = hostfs::LocalHostFs::open("/", clock_);
    ASSERT_TRUE(process_fs);
    process_fs_ = std::move(*process_fs);
    auto host_fs = hostfs::LocalHostFs::open(root_, clock_);
    ASSERT_TRUE(host_fs);
    host_fs_ = std::move(*host_fs);
    auto conn = kube::loadKubeconfig(*process_fs_, server_->kubeconfigPath());
    ASSERT_TRUE(conn) << conn.error().message();
    auto transport = kube::CurlTransport::create(*conn, process_fs_.get(), clock_,
                                                 {.connect_timeout = seconds(2)});
    ASSERT_TRUE(transport) << transport.error().message();
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(
        *transport_, clock_,
        kube::RestClientOptions{.request_timeout = seconds(2),
                                .retry = {.max_attempts = 2,
                                          .base_delay = milliseconds(1),
                                          .max_delay = milliseconds(5),
                                          .max_retry_after = milliseconds(5)}});
  }

  // Replaces the fake mount table atomically (as the kernel's view changes at once).
  void writeMounts(const std::string& text) {
    const std::string tmp = root_ + "/proc/.mounts.tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, root_ + "/proc/mounts");
  }

  ShutdownOptions shutdownOptions() const {
    ShutdownOptions o;
    o.node_name = "node-a";
    o.excluded_namespaces = Config{}.shutdown_excluded_namespaces;
    o.unmount_timeout = seconds(20);
    o.deadline_margin = seconds(4);
    o.poll_interval = milliseconds(50);
    o.progress_interval = milliseconds(200);
    o.cordon_retry_delay = milliseconds(50);
    return o;
  }
  StartupOptions startupOptions() const {
    StartupOptions o;
    o.node_name = "node-a";
    o.api_timeout = seconds(5);
    o.poll_interval = milliseconds(100);
    o.progress_interval = milliseconds(500);
    return o;
  }

  json getNode(const std::string& name) {
    auto n = server_->get("nodes", "", name);
    EXPECT_TRUE(n.has_value()) << name;
    return n.value_or(json::object());
  }
  bool unschedulable(const std::string& name) {
    return getNode(name)["spec"].value("unschedulable", false);
  }
  std::map<std::string, std::string> ekcoAnnotations(const std::string& name) {
    std::map<std::string, std::string> out;
    json n = getNode(name);
    if (!n["metadata"].contains("annotations")) return out;
    for (const auto& [k, v] : n["metadata"]["annotations"].items()) {
      if (k.rfind("ekco.kurl.sh/", 0) == 0) out[k] = v.get<std::string>();
    }
    return out;
  }
  // Deleted: gone, or terminating (graceful deletion still running).
  bool deleted(const std::string& ns, const std::string& name) {
    auto p = server_->get("pods", ns, name);
    return !p || (*p)["metadata"].contains("deletionTimestamp");
  }

  testing::TempDir dir_{"ekco-shutdown"};
  std::string root_;
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  std::unique_ptr<hostfs::LocalHostFs> host_fs_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
};

TEST(PodVolumeMounts, FindsPvcAndCephFsMountsOnly) {
  const std::string text =
      kOtherMounts + kPvcMount + kCephFsMount +
      "/dev/sdb /var/lib/kubelet/pods/u2/volumes/kubernetes.io~local-volume/pvc\\040with\\040space "
      "xfs rw 0 0\n"
      "/dev/sdc /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-9/globalmount ext4 rw 0 0\n"
      "/dev/sdd /mnt/pvc-data ext4 rw 0 0\n"
      "garbage\n";
  auto mounts = podVolumeMounts(text);
  ASSERT_EQ(mounts.size(), 2U);
  EXPECT_EQ(mounts[0].mount_point, "/var/lib/kubelet/pods/" + std::string(kPodUid) +
                                       "/volumes/kubernetes.io~csi/pvc-1234/mount");
  EXPECT_EQ(mounts[1].source, "10.0.0.1:6789,10.0.0.2:6789:/volumes/csi/csi-vol-1");
  // Octal escapes are decoded (a PVC whose directory has a space).
  auto spaced = podVolumeMounts(
      "/dev/sdb /var/lib/kubelet/pods/u2/volumes/kubernetes.io~csi/pvc-1\\040x/mount xfs rw 0 0\n");
  ASSERT_EQ(spaced.size(), 1U);
  EXPECT_EQ(spaced[0].mount_point,
            "/var/lib/kubelet/pods/u2/volumes/kubernetes.io~csi/pvc-1 x/mount");
  EXPECT_TRUE(podVolumeMounts(kOtherMounts).empty());
}

TEST_F(ShutdownTest, CordonsDeletesPodsWaitsForUnmountsThenDeletesRookPods) {
  LogCapture logs;
  writeMounts(kOtherMounts + kPvcMount + kCephFsMount);
  auto done = std::async(std::launch::async, [&] {
    return shutdownNode(*client_, *host_fs_, clock_, shutdownOptions());
  });
  // The wait is running: node cordoned and marked, pods deleted, rook pods not yet.
  ASSERT_TRUE(
      testing::eventually([&] { return logs.count("waiting for pod volumes") >= 3; }, seconds(10)))
      << logs.text();
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_EQ(ekcoAnnotations("node-a"),
            (std::map<std::string, std::string>{{"ekco.kurl.sh/cordoned-by", "shutdown"},
                                                {"ekco.kurl.sh/was-unschedulable", "false"}}));
  EXPECT_FALSE(unschedulable("node-b"));
  EXPECT_TRUE(deleted("default", "app-1"));
  EXPECT_TRUE(deleted("default", "web-2"));
  EXPECT_FALSE(deleted("default", "static-web-node-a"));  // a mirror pod
  EXPECT_FALSE(deleted("kube-system", "kube-proxy-a"));
  EXPECT_FALSE(deleted("openebs", "openebs-ndm-a"));
  EXPECT_FALSE(deleted("longhorn-system", "longhorn-manager-a"));
  EXPECT_FALSE(deleted("default", "app-b"));
  EXPECT_FALSE(deleted("rook-ceph", "rook-ceph-operator-7d9f-abcde"));
  EXPECT_FALSE(deleted("rook-ceph", "rook-ceph-mds-rook-shared-fs-a-5f6-xyz"));
  EXPECT_THAT(logs.text(), HasSubstr("remaining=2"));
  ASSERT_EQ(done.wait_for(milliseconds(0)), std::future_status::timeout);

  writeMounts(kOtherMounts + kCephFsMount);  // the PVC is unmounted
  ASSERT_TRUE(testing::eventually([&] { return logs.count("remaining=1") >= 1; }, seconds(5)));
  EXPECT_FALSE(deleted("rook-ceph", "rook-ceph-operator-7d9f-abcde"));
  writeMounts(kOtherMounts);  // and CephFS
  ASSERT_EQ(done.wait_for(seconds(5)), std::future_status::ready);
  RebootStepReport report = done.get();
  EXPECT_TRUE(report.ok()) << ::testing::PrintToString(report.failures);
  EXPECT_THAT(logs.text(), HasSubstr("pod volumes unmounted"));
  EXPECT_TRUE(deleted("rook-ceph", "rook-ceph-operator-7d9f-abcde"));
  EXPECT_TRUE(deleted("rook-ceph", "rook-ceph-mds-rook-shared-fs-a-5f6-xyz"));
  EXPECT_FALSE(deleted("rook-ceph", "rook-ceph-osd-0-6c7-xyz"));
  EXPECT_FALSE(deleted("rook-ceph", "rook-ceph-mds-rook-shared-fs-b-5f6-zzz"));  // node-b's
}

TEST_F(ShutdownTest, UnmountWaitIsBoundedAndTheRestStillRuns) {
  LogCapture logs;
  writeMounts(kOtherMounts + kPvcMount);
  ShutdownOptions o = shutdownOptions();
  o.unmount_timeout = seconds(2);
  o.deadline_margin = seconds(2);
  const auto start = SteadyClock::now();
  RebootStepReport report = shutdownNode(*client_, *host_fs_, clock_, o);
  const auto took = SteadyClock::now() - start;
  EXPECT_GE(took, milliseconds(1900));
  EXPECT_LT(took, seconds(4));  // unmount timeout + margin
  ASSERT_EQ(report.failures.size(), 1U) << ::testing::PrintToString(report.failures);
  EXPECT_THAT(report.failures[0], HasSubstr("unmount: 1 pod volume mount(s) still present after"));
  EXPECT_THAT(report.failures[0], HasSubstr("shutdown_unmount_timeout 2s"));
  EXPECT_THAT(report.failures[0], HasSubstr("pvc-1234"));
  // Progress lines every progress_interval, and the rook step ran after the wait gave up.
  EXPECT_GE(logs.count("waiting for pod volumes to unmount"), 5U) << logs.text();
  EXPECT_TRUE(deleted("rook-ceph", "rook-ceph-operator-7d9f-abcde"));
  EXPECT_TRUE(unschedulable("node-a"));
}

TEST_F(ShutdownTest, FailedCordonIsReportedAndTheOtherStepsRun) {
  LogCapture logs;
  writeMounts(kOtherMounts);
  ShutdownOptions o = shutdownOptions();
  o.node_name = "node-x";  // no such Node: NotFound is not retried
  RebootStepReport report = shutdownNode(*client_, *host_fs_, clock_, o);
  ASSERT_EQ(report.failures.size(), 1U) << ::testing::PrintToString(report.failures);
  EXPECT_THAT(report.failures[0], HasSubstr("cordon: node node-x: "));
  EXPECT_THAT(report.failures[0], HasSubstr("not found"));
  EXPECT_THAT(logs.text(), HasSubstr("no pod volume mounts"));
}

TEST_F(ShutdownTest, MissingMountTableIsAFailure) {
  RebootStepReport report = shutdownNode(*client_, *host_fs_, clock_, shutdownOptions());
  ASSERT_EQ(report.failures.size(), 1U) << ::testing::PrintToString(report.failures);
  EXPECT_THAT(report.failures[0], HasSubstr("unmount: read the mount table: "));
  EXPECT_TRUE(deleted("rook-ceph", "rook-ceph-operator-7d9f-abcde"));
}

TEST_F(ShutdownTest, StartupUncordonsWhatShutdownCordonedAndClearsTheMarkers) {
  writeMounts(kOtherMounts);
  ASSERT_TRUE(shutdownNode(*client_, *host_fs_, clock_, shutdownOptions()).ok());
  // A second shutdown (run by hand, then by the unit) keeps the first run's record.
  ASSERT_TRUE(shutdownNode(*client_, *host_fs_, clock_, shutdownOptions()).ok());
  EXPECT_EQ(ekcoAnnotations("node-a").at("ekco.kurl.sh/was-unschedulable"), "false");
  LogCapture logs;
  RebootStepReport report = startupNode(*client_, clock_, startupOptions());
  EXPECT_TRUE(report.ok()) << ::testing::PrintToString(report.failures);
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_TRUE(ekcoAnnotations("node-a").empty());
  EXPECT_THAT(logs.text(), HasSubstr("node uncordoned"));
}

TEST_F(ShutdownTest, AnAdminCordonSurvivesShutdownAndStartup) {
  ASSERT_TRUE(server_->put(node("node-a", /*unschedulable=*/true)));
  writeMounts(kOtherMounts);
  ASSERT_TRUE(shutdownNode(*client_, *host_fs_, clock_, shutdownOptions()).ok());
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_EQ(ekcoAnnotations("node-a").at("ekco.kurl.sh/was-unschedulable"), "true");
  LogCapture logs;
  RebootStepReport report = startupNode(*client_, clock_, startupOptions());
  EXPECT_TRUE(report.ok()) << ::testing::PrintToString(report.failures);
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_TRUE(ekcoAnnotations("node-a").empty());
  EXPECT_THAT(logs.text(), HasSubstr("left cordoned"));
}

TEST_F(ShutdownTest, StartupLeavesACordonWithoutMarkerAlone) {
  ASSERT_TRUE(server_->put(node("node-a", /*unschedulable=*/true)));
  LogCapture logs;
  RebootStepReport report = startupNode(*client_, clock_, startupOptions());
  EXPECT_TRUE(report.ok());
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_THAT(logs.text(), HasSubstr("without ekco's marker"));
}

TEST_F(ShutdownTest, StartupWaitForTheApiIsBounded) {
  server_->stop();
  LogCapture logs;
  StartupOptions o = startupOptions();
  o.api_timeout = milliseconds(1500);
  const auto start = SteadyClock::now();
  RebootStepReport report = startupNode(*client_, clock_, o);
  const auto took = SteadyClock::now() - start;
  EXPECT_GE(took, milliseconds(1400));
  EXPECT_LT(took, seconds(5));
  ASSERT_EQ(report.failures.size(), 1U);
  EXPECT_THAT(report.failures[0],
              HasSubstr("api: the API was not reachable within 1.5s (startup_api_timeout)"));
  EXPECT_THAT(logs.text(), HasSubstr("waiting for the API"));
}

TEST_F(ShutdownTest, DryRunChangesNothing) {
  writeMounts(kOtherMounts + kPvcMount);
  LogCapture logs;
  ShutdownOptions o = shutdownOptions();
  o.dry_run = true;
  const auto start = SteadyClock::now();
  RebootStepReport report = shutdownNode(*client_, *host_fs_, clock_, o);
  EXPECT_LT(SteadyClock::now() - start, seconds(2));  // no waiting
  EXPECT_TRUE(report.ok()) << ::testing::PrintToString(report.failures);
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_TRUE(ekcoAnnotations("node-a").empty());
  EXPECT_FALSE(deleted("default", "app-1"));
  EXPECT_FALSE(deleted("rook-ceph", "rook-ceph-operator-7d9f-abcde"));
  EXPECT_THAT(logs.text(), HasSubstr("dry run: would cordon"));
  EXPECT_THAT(logs.text(), HasSubstr("dry run: would delete pod"));
  EXPECT_THAT(logs.text(), HasSubstr("dry run: would wait for pod volumes"));
  EXPECT_THAT(logs.text(), HasSubstr("dry run: would delete rook pod"));

  // Startup's dry run leaves ekco's cordon and markers.
  writeMounts(kOtherMounts);
  ASSERT_TRUE(shutdownNode(*client_, *host_fs_, clock_, shutdownOptions()).ok());
  StartupOptions so = startupOptions();
  so.dry_run = true;
  EXPECT_TRUE(startupNode(*client_, clock_, so).ok());
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_EQ(ekcoAnnotations("node-a").size(), 2U);
  EXPECT_THAT(logs.text(), HasSubstr("dry run: would do: node uncordoned"));
}

// --- Through the command line ---

TEST_F(ShutdownTest, CliShutdownIsBoundedAndExitsOne) {
  writeMounts(kOtherMounts + kPvcMount);
  const auto start = SteadyClock::now();
  auto r = testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                         "node-a", "--host-root", root_, "--shutdown-unmount-timeout", "2s"});
  const auto took = SteadyClock::now() - start;
  EXPECT_EQ(r.code, kExitFailure) << r.err;
  EXPECT_LT(took, seconds(2) + kShutdownDeadlineMargin);
  EXPECT_THAT(r.err, HasSubstr("error: shutdown: unmount: 1 pod volume mount(s) still present"));
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_TRUE(deleted("default", "app-1"));
  EXPECT_FALSE(deleted("kube-system", "kube-proxy-a"));
}

TEST_F(ShutdownTest, CliShutdownThenStartupSucceed) {
  writeMounts(kOtherMounts);
  // The excluded namespaces come from the config (a flag here): default is excluded too now.
  auto r = testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--host-root",
                         root_, "--shutdown-excluded-namespaces", "kube-system,default"},
                        {"NODE_NAME=node-a"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_FALSE(deleted("default", "app-1"));
  EXPECT_TRUE(deleted("openebs", "openebs-ndm-a"));

  std::ofstream(root_ + "/etc/kubernetes/kubelet.conf") << "# joined\n";
  r = testing::cli({"startup", "--kubeconfig", server_->kubeconfigPath(), "--node-name", "node-a",
                    "--host-root", root_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_TRUE(ekcoAnnotations("node-a").empty());
}

TEST_F(ShutdownTest, CliStartupOnANodeThatNeverJoinedExitsZeroAtOnce) {
  const auto start = SteadyClock::now();
  // No kubelet.conf under the root, and no kubeconfig anywhere: nothing is needed.
  auto r = testing::cli({"startup", "--node-name", "node-a", "--host-root", root_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_LT(SteadyClock::now() - start, seconds(1));
}

TEST_F(ShutdownTest, CliStartupWithTheApiDownGivesUpAfterTheTimeout) {
  std::ofstream(root_ + "/etc/kubernetes/kubelet.conf") << "# joined\n";
  server_->stop();
  const auto start = SteadyClock::now();
  auto r = testing::cli({"startup", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                         "node-a", "--host-root", root_, "--startup-api-timeout", "2s"});
  const auto took = SteadyClock::now() - start;
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_GE(took, milliseconds(1900));
  EXPECT_LT(took, seconds(8));
  EXPECT_THAT(r.err, HasSubstr("error: startup: api: the API was not reachable within 2s"));
}

TEST(ShutdownCli, UsageAndConfigErrors) {
  auto help = testing::cli({"--help"});
  EXPECT_THAT(help.out, HasSubstr("shutdown"));
  EXPECT_THAT(help.out, HasSubstr("startup"));
  for (const char* cmd : {"shutdown", "startup"}) {
    auto r = testing::cli({cmd, "--help"});
    EXPECT_EQ(r.code, kExitOk);
    for (const char* flag : {"--config", "--kubeconfig", "--node-name", "--host-root", "--dry-run",
                             "--shutdown-unmount-timeout", "--startup-api-timeout"}) {
      EXPECT_THAT(r.out, HasSubstr(flag)) << cmd;
    }
    r = testing::cli({cmd, "--bogus"});
    EXPECT_EQ(r.code, kExitUsage) << cmd;
    EXPECT_THAT(r.err, HasSubstr("error: "));
    r = testing::cli({cmd, "--node-name", "Not_A_Node"});
    EXPECT_EQ(r.code, kExitUsage) << cmd;
    EXPECT_THAT(r.err, HasSubstr("not a valid Node name"));
    r = testing::cli({cmd, "--config", "/nonexistent/x.yaml"});
    EXPECT_EQ(r.code, kExitUsage) << cmd;
  }
  auto r = testing::cli({"shutdown", "--shutdown-unmount-timeout", "0s"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("shutdown_unmount_timeout: must be greater than 0"));
  r = testing::cli({"startup", "--startup-api-timeout", "0s"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("startup_api_timeout: must be greater than 0"));
  r = testing::cli({"shutdown", "--shutdown-excluded-namespaces", "kube-system,Bad_NS"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("shutdown_excluded_namespaces"));
}

}  // namespace
}  // namespace ekco::agent
