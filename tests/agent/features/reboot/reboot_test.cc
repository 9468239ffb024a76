// The shutdown/startup procedures (agent/features/reboot/reboot.h) against ekco-kubesim, with a
// fake mount table under a temporary host root; the commands are tested in tests/agent/cli/.
#include "agent/features/reboot/reboot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "tests/agent/features/reboot/reboot_fixture.h"
#include "tests/agent/process_support.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;
using testing::cluster;
using testing::kCephFsMount;
using testing::kOtherMounts;
using testing::kPodUid;
using testing::kPvcMount;
using testing::LogCapture;
using testing::node;
using testing::pod;

class ShutdownTest : public testing::RebootFixture {};

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

}  // namespace
}  // namespace ekco::agent
