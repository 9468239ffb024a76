// The shutdown beacon and the proof of reboot (agent/features/reboot/shutdown_beacon.h) through
// `ekco shutdown` / `ekco startup`, against ekco-kubesim with a temporary host root holding
// /proc/mounts and /proc/sys/kernel/random/boot_id (the leader's side:
// tests/agent/features/reboot/node_recovery_test.cc and node_recovery_e2e_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/features/reboot/shutdown_beacon.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/reboot/reboot_fixture.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::kBootId1;
using testing::kBootId2;
using testing::kOtherMounts;
using testing::kPvcMount;

class ShutdownBeaconCliTest : public testing::RebootFixture {
 protected:
  testing::CliRun shutdown() {
    return testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                         "node-a", "--host-root", root_, "--shutdown-unmount-timeout", "2s"});
  }
  testing::CliRun startup() {
    std::ofstream(root_ + "/etc/kubernetes/kubelet.conf") << "# joined\n";
    return testing::cli({"startup", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                         "node-a", "--host-root", root_});
  }
  // The out-of-service taint as the leader applies it (by_ekco) or as a person does.
  void taintOutOfService(bool by_ekco) {
    json n = getNode("node-a");
    n["spec"]["taints"].push_back({{"key", "node.kubernetes.io/out-of-service"},
                                   {"value", "nodeshutdown"},
                                   {"effect", "NoExecute"},
                                   {"timeAdded", "2026-11-26T07:00:00Z"}});
    n["spec"]["taints"].push_back({{"key", "example.com/keep"}, {"effect", "NoSchedule"}});
    if (by_ekco) n["metadata"]["annotations"]["ekco.kurl.sh/out-of-service-by"] = "ekco";
    ASSERT_TRUE(server_->put(n));
  }
  std::vector<std::string> taintKeys() {
    std::vector<std::string> keys;
    for (const json& t : getNode("node-a")["spec"].value("taints", json::array())) {
      keys.push_back(t.value("key", ""));
    }
    return keys;
  }
  int events(const std::string& reason) {
    auto list = server_->store().list(*server_->store().findQualified("events"), "default", {});
    int n = 0;
    for (const json& e : list.body["items"]) n += e.value("reason", "") == reason ? 1 : 0;
    return n;
  }
};

TEST_F(ShutdownBeaconCliTest, ShutdownRecordsTheBeaconOnceItsPodsAreDeletedAndVolumesUnmounted) {
  writeMounts(kOtherMounts);
  auto r = shutdown();
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto a = ekcoAnnotations("node-a");
  EXPECT_EQ(a["ekco.kurl.sh/shutdown-boot-id"], kBootId1);
  EXPECT_FALSE(a["ekco.kurl.sh/shutdown-at"].empty());
  EXPECT_EQ(a["ekco.kurl.sh/cordoned-by"], "shutdown");
}

TEST_F(ShutdownBeaconCliTest, NoBeaconWhenAPodVolumeStaysMounted) {
  writeMounts(kOtherMounts + kPvcMount);
  auto r = shutdown();
  EXPECT_EQ(r.code, kExitFailure);
  // The unplanned path: nothing tells the leader the node went down with nothing to lose.
  EXPECT_FALSE(ekcoAnnotations("node-a").contains("ekco.kurl.sh/shutdown-at"));
  EXPECT_FALSE(ekcoAnnotations("node-a").contains("ekco.kurl.sh/shutdown-boot-id"));
}

TEST_F(ShutdownBeaconCliTest, ShutdownWithAnUnreadableBootIdFailsTheBeaconStepOnly) {
  writeMounts(kOtherMounts);
  writeBootId("not-a-uuid");
  auto r = shutdown();
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("error: shutdown: beacon: /proc/sys/kernel/random/boot_id: not a "
                               "boot id (want a UUID): \"not-a-uuid\""));
  EXPECT_TRUE(unschedulable("node-a"));  // the drain itself was done
  EXPECT_FALSE(ekcoAnnotations("node-a").contains("ekco.kurl.sh/shutdown-at"));
}

TEST_F(ShutdownBeaconCliTest, StartupAfterARebootRemovesEkcosTaintAndTheBeaconThenUncordons) {
  writeMounts(kOtherMounts);
  ASSERT_EQ(shutdown().code, kExitOk);
  taintOutOfService(/*by_ekco=*/true);
  writeBootId(kBootId2);  // the node booted again
  auto r = startup();
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(taintKeys(), ::testing::ElementsAre("example.com/keep"));
  EXPECT_TRUE(ekcoAnnotations("node-a").empty());
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_EQ(events("OutOfServiceTaintRemoved"), 1);
}

TEST_F(ShutdownBeaconCliTest, StartupNeverRemovesAPersonsOutOfServiceTaint) {
  writeMounts(kOtherMounts);
  ASSERT_EQ(shutdown().code, kExitOk);
  taintOutOfService(/*by_ekco=*/false);
  writeBootId(kBootId2);
  auto r = startup();
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(taintKeys(),
              ::testing::ElementsAre("node.kubernetes.io/out-of-service", "example.com/keep"));
  EXPECT_TRUE(ekcoAnnotations("node-a").empty());  // the beacon is gone, the cordon undone
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_EQ(events("OutOfServiceTaintRemoved"), 0);
}

TEST_F(ShutdownBeaconCliTest, StartupWithoutANewBootIdLeavesEkcosTaintToTheLeader) {
  writeMounts(kOtherMounts);
  ASSERT_EQ(shutdown().code, kExitOk);
  taintOutOfService(/*by_ekco=*/true);
  auto r = startup();  // same boot id: no reboot happened
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(taintKeys(),
              ::testing::ElementsAre("node.kubernetes.io/out-of-service", "example.com/keep"));
  auto a = ekcoAnnotations("node-a");
  EXPECT_EQ(a["ekco.kurl.sh/out-of-service-by"], "ekco");
  EXPECT_FALSE(a.contains("ekco.kurl.sh/shutdown-at"));
  EXPECT_FALSE(a.contains("ekco.kurl.sh/shutdown-boot-id"));
}

TEST_F(ShutdownBeaconCliTest, StartupDryRunChangesNothing) {
  writeMounts(kOtherMounts);
  ASSERT_EQ(shutdown().code, kExitOk);
  taintOutOfService(/*by_ekco=*/true);
  writeBootId(kBootId2);
  std::ofstream(root_ + "/etc/kubernetes/kubelet.conf") << "# joined\n";
  auto r = testing::cli({"startup", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                         "node-a", "--host-root", root_, "--dry-run"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(taintKeys().size(), 2U);
  EXPECT_TRUE(ekcoAnnotations("node-a").contains("ekco.kurl.sh/shutdown-boot-id"));
  EXPECT_TRUE(unschedulable("node-a"));
}

TEST_F(ShutdownBeaconCliTest, StartupWithAnUnreadableBootIdStillUncordonsAndExitsOne) {
  writeMounts(kOtherMounts);
  ASSERT_EQ(shutdown().code, kExitOk);
  taintOutOfService(/*by_ekco=*/true);
  writeBootId("");
  auto r = startup();
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("error: startup: beacon: /proc/sys/kernel/random/boot_id"));
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_EQ(taintKeys().size(), 2U);  // no proof, no untaint
}

}  // namespace
}  // namespace ekco::agent
