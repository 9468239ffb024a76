// `ekco shutdown` / `ekco startup` through the command line, against ekco-kubesim (in-process,
// HTTPS) with a fake mount table under a temporary host root (the procedures themselves:
// tests/agent/features/reboot/reboot_test.cc).
#include "agent/features/reboot/shutdown_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/agent/cli_support.h"
#include "tests/agent/features/reboot/reboot_fixture.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;
using testing::kOtherMounts;
using testing::kPvcMount;

class ShutdownCliTest : public testing::RebootFixture {};

// --- Through the command line ---

TEST_F(ShutdownCliTest, CliShutdownIsBoundedAndExitsOne) {
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

// The agent drained at PrepareForShutdown under logind's inhibitor lock
// (agent/features/reboot/shutdown_inhibitor.h): the stop job must not drain a second time.
void writeDrainMarker(const std::string& root, const std::string& line) {
  fs::create_directories(root + "/run/ekco");
  std::ofstream(root + "/run/ekco/shutdown-drain") << line << "\n";
}

TEST_F(ShutdownCliTest, CliShutdownDoesNothingWhenTheAgentDrainedInThisBoot) {
  writeMounts(kOtherMounts);
  writeDrainMarker(root_, std::string("drained boot_id=") + testing::kBootId1);
  auto r = testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                         "node-a", "--host-root", root_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_FALSE(deleted("default", "app-1"));
}

TEST_F(ShutdownCliTest, CliShutdownDrainsAfterAnotherBootsOrAFailedDrain) {
  writeMounts(kOtherMounts);
  for (const std::string& line :
       {std::string("drained boot_id=aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"),
        std::string("failed boot_id=") + testing::kBootId1}) {
    writeDrainMarker(root_, line);
    auto r = testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                           "node-a", "--host-root", root_});
    EXPECT_EQ(r.code, kExitOk) << line << ": " << r.err;
    EXPECT_TRUE(unschedulable("node-a")) << line;
    EXPECT_TRUE(deleted("default", "app-1")) << line;
  }
}

TEST_F(ShutdownCliTest, CliShutdownWaitsForADrainingAgentAndNeverDrainsBesideIt) {
  writeMounts(kOtherMounts);
  // A live agent (its /proc entry under the host root) is draining in this boot.
  fs::create_directories(root_ + "/proc/4242");
  writeDrainMarker(root_, std::string("draining pid=4242 boot_id=") + testing::kBootId1);
  std::thread agent([&] {
    std::this_thread::sleep_for(milliseconds(1500));
    writeDrainMarker(root_, std::string("drained boot_id=") + testing::kBootId1);
  });
  const auto start = SteadyClock::now();
  auto r = testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--node-name",
                         "node-a", "--host-root", root_});
  const auto took = SteadyClock::now() - start;
  agent.join();
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_GE(took, milliseconds(1400));
  EXPECT_FALSE(unschedulable("node-a"));  // the agent's drain, not this one
  // The agent died mid-drain (no /proc entry): the stop job drains.
  fs::remove_all(root_ + "/proc/4242");
  writeDrainMarker(root_, std::string("draining pid=4242 boot_id=") + testing::kBootId1);
  r = testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--node-name", "node-a",
                    "--host-root", root_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(unschedulable("node-a"));
}

TEST_F(ShutdownCliTest, CliShutdownThenStartupSucceed) {
  writeMounts(kOtherMounts);
  // The excluded namespaces come from the config (a flag here): default is excluded too now.
  auto r = testing::cli({"shutdown", "--kubeconfig", server_->kubeconfigPath(), "--host-root",
                         root_, "--shutdown-excluded-namespaces", "kube-system,default"},
                        {"NODE_NAME=node-a"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(unschedulable("node-a"));
  EXPECT_FALSE(deleted("default", "app-1"));
  EXPECT_TRUE(deleted("openebs", "openebs-ndm-a"));
  // The shutdown beacon: when, and the boot that ends.
  EXPECT_EQ(ekcoAnnotations("node-a").at("ekco.kurl.sh/shutdown-boot-id"), testing::kBootId1);
  EXPECT_TRUE(ekcoAnnotations("node-a").contains("ekco.kurl.sh/shutdown-at"));

  std::ofstream(root_ + "/etc/kubernetes/kubelet.conf") << "# joined\n";
  r = testing::cli({"startup", "--kubeconfig", server_->kubeconfigPath(), "--node-name", "node-a",
                    "--host-root", root_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_FALSE(unschedulable("node-a"));
  EXPECT_TRUE(ekcoAnnotations("node-a").empty());
}

TEST_F(ShutdownCliTest, CliStartupOnANodeThatNeverJoinedExitsZeroAtOnce) {
  const auto start = SteadyClock::now();
  // No kubelet.conf under the root, and no kubeconfig anywhere: nothing is needed.
  auto r = testing::cli({"startup", "--node-name", "node-a", "--host-root", root_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_LT(SteadyClock::now() - start, seconds(1));
}

TEST_F(ShutdownCliTest, CliStartupWithTheApiDownGivesUpAfterTheTimeout) {
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
