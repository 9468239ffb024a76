// `ekco set-kubeconfig-server` (agent/features/api_address/set_kubeconfig_server.h) end to end:
// a host root whose kubeconfigs point at an old address, kubelet.service on a mock systemd over
// a private D-Bus (tests/fakes/systemd_bus.h), and ekco-kubesim at the new address, where a
// "kubelet" renews the node's heartbeat Lease once it sees the restart. Then a kubelet that
// never comes back: everything restored and kubelet restarted with the old files.
#include "agent/features/api_address/api_address_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/features/api_address/kubeconfig_server.h"
#include "agent/features/api_address/set_kubeconfig_server.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/timestamp.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/fakes/systemd_bus.h"
#include "tests/kubesim/server/server.h"
#include "units/systemd_manager.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kOld = "https://127.0.0.1:1";

class SetKubeconfigServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/host";
    fs::create_directories(root_ + "/etc/kubernetes");
    fs::create_directories(root_ + "/etc/systemd/system");
    std::ofstream(root_ + "/etc/systemd/system/kubelet.service")
        << "[Service]\nExecStart=/bin/true\n";
    auto server = kubesim::Server::start(
        {.out_dir = dir_.path() + "/sim",
         .objects = {{{"apiVersion", "v1"},
                      {"kind", "Node"},
                      {"metadata", {{"name", "cp-1"}}},
                      {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}},
                     {{"apiVersion", "v1"},
                      {"kind", "Namespace"},
                      {"metadata", {{"name", "kube-node-lease"}}}},
                     lease(kube::formatRfc3339(std::chrono::system_clock::now() - 1h))}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    // The kubeconfigs as kubeadm wrote them, pointing at the old address; the component ones at
    // the local apiserver, which does not move.
    const std::string admin = testing::readWholeFile(server_->kubeconfigPath());
    auto at_old = api_address::withServer(admin, server_->url(), kOld, "kubeconfig");
    ASSERT_TRUE(at_old) << at_old.error().message();
    for (const char* f : {"kubelet.conf", "admin.conf"}) write(f, *at_old);
    auto local = api_address::withServer(admin, server_->url(), "https://127.0.0.1:6443", "k");
    ASSERT_TRUE(local);
    for (const char* f : {"controller-manager.conf", "scheduler.conf"}) write(f, *local);
    ASSERT_EQ(bus_.start({.root = root_,
                          .work_dir = dir_.path() + "/bus",
                          .unit_dir = root_ + "/etc/systemd/system"}),
              "");
  }
  void TearDown() override {
    kubelet_.request_stop();
    if (kubelet_.joinable()) kubelet_.join();
  }

  static json lease(const std::string& renew) {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", "cp-1"}, {"namespace", "kube-node-lease"}}},
            {"spec", {{"holderIdentity", "cp-1"}, {"renewTime", renew}}}};
  }
  void write(const std::string& file, const std::string& text) {
    std::ofstream(root_ + "/etc/kubernetes/" + file) << text;
  }
  std::string read(const std::string& file) {
    return testing::readWholeFile(root_ + "/etc/kubernetes/" + file);
  }
  std::string serverOf(const std::string& file) {
    auto servers = api_address::kubeconfigServers(read(file), file);
    return servers ? servers->front() : servers.error().message();
  }
  // kubelet: after each restart, renews its Lease (through the API) unless told not to.
  void startKubelet(bool comes_back) {
    kubelet_ = std::jthread([this, comes_back](std::stop_token stop) {
      std::size_t seen = 0;
      while (!stop.stop_requested()) {
        const std::size_t restarts = bus_.calls("RestartUnit").size();
        if (restarts > seen) {
          seen = restarts;
          if (comes_back) {
            std::this_thread::sleep_for(200ms);
            (void)server_->put(lease(kube::formatRfc3339Micro(std::chrono::system_clock::now())));
          }
        }
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  int run(SetKubeconfigServerArgs args) {
    args.host_root = root_;
    args.node_name = "cp-1";
    args.poll = 100ms;
    out_.str("");
    err_.str("");
    CliEnv env{.environment = {}, .out = &out_, .err = &err_};
    return runSetKubeconfigServerCommand(args, env);
  }

  testing::TempDir dir_{"ekco-set-kubeconfig-server"};
  std::string root_;
  std::unique_ptr<kubesim::Server> server_;
  fakes::SystemdBus bus_;
  std::jthread kubelet_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(SetKubeconfigServerTest, PointsTheKubeconfigsAtTheNewAddressRestartsKubeletAndVerifies) {
  startKubelet(/*comes_back=*/true);
  const std::string controller_manager = read("controller-manager.conf");
  // A dry run says what, and changes nothing.
  ASSERT_EQ(run({.server = server_->url(), .admin = true, .dry_run = true}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("would point /etc/kubernetes/kubelet.conf at " +
                                    server_->url() + " (was " + kOld + ")"));
  EXPECT_THAT(out_.str(), HasSubstr("would point /etc/kubernetes/admin.conf at "));
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("controller-manager.conf")));
  EXPECT_THAT(out_.str(), HasSubstr("would restart kubelet.service"));
  EXPECT_EQ(serverOf("kubelet.conf"), kOld);
  EXPECT_TRUE(bus_.calls("RestartUnit").empty());

  ASSERT_EQ(run({.server = server_->url(), .admin = true}), 0) << err_.str() << out_.str();
  EXPECT_EQ(serverOf("kubelet.conf"), server_->url());
  EXPECT_EQ(serverOf("admin.conf"), server_->url());
  EXPECT_EQ(read("controller-manager.conf"), controller_manager);  // the local apiserver's
  EXPECT_THAT(bus_.calls("RestartUnit"), ElementsAre(R"(RestartUnit "kubelet.service" "replace")"));
  EXPECT_THAT(out_.str(), HasSubstr("verified: kubelet works through " + server_->url()));
  // The backup holds the old files.
  bool backed_up = false;
  for (const auto& e : fs::recursive_directory_iterator(root_ + "/etc/kubernetes/.ekco-backup")) {
    if (e.path().filename() == "kubelet.conf") {
      backed_up = testing::readWholeFile(e.path().string()).find(kOld) != std::string::npos;
      EXPECT_EQ(fs::status(e.path()).permissions() & fs::perms::all,
                fs::perms::owner_read | fs::perms::owner_write);
    }
  }
  EXPECT_TRUE(backed_up);
  // Again: nothing to change, kubelet left alone.
  ASSERT_EQ(run({.server = server_->url(), .admin = true}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("nothing to change"));
  EXPECT_EQ(bus_.calls("RestartUnit").size(), 1U);
}

TEST_F(SetKubeconfigServerTest, AKubeletThatDoesNotComeBackGetsItsOldFilesBack) {
  startKubelet(/*comes_back=*/false);
  const std::string kubelet_before = read("kubelet.conf");
  const std::string admin_before = read("admin.conf");
  EXPECT_EQ(run({.server = server_->url(), .admin = true, .verify_timeout = 1s}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("not verified within 1s: kubelet has not renewed "
                                    "kube-node-lease/cp-1 since its restart"));
  EXPECT_THAT(err_.str(), HasSubstr("the previous kubeconfigs were restored"));
  EXPECT_EQ(read("kubelet.conf"), kubelet_before);
  EXPECT_EQ(read("admin.conf"), admin_before);
  // Restarted with the new files, then again with the old ones.
  EXPECT_EQ(bus_.calls("RestartUnit").size(), 2U);
}

// A switch cut short after its files were written (the agent killed mid-verification): the
// resumed run (the same run id) finds its backup, finishes the files that were not written yet
// and, when kubelet still does not come back, restores every file from that backup.
TEST_F(SetKubeconfigServerTest, AResumedSwitchFinishesFromItsBackupAndRestoresFromIt) {
  base::SystemClock clock;
  auto fs = hostfs::LocalHostFs::open(root_, clock);
  ASSERT_TRUE(fs) << fs.error().message();
  auto systemd = units::connectSystemd(units::systemBusAddress(root_), clock);
  ASSERT_TRUE(systemd) << systemd.error().message();
  const std::string kubelet_old = read("kubelet.conf");
  const std::string admin_old = read("admin.conf");
  // What the cut-short run left: its backup, kubelet.conf written, admin.conf not yet.
  const std::string backup = root_ + "/etc/kubernetes/.ekco-backup/kubeconfig-20261129T070000Z";
  fs::create_directories(backup);
  std::ofstream(backup + "/kubelet.conf") << kubelet_old;
  std::ofstream(backup + "/admin.conf") << admin_old;
  std::ofstream(backup + "/target") << server_->url() << "\nr1\n";
  write("kubelet.conf", *api_address::withServer(kubelet_old, kOld, server_->url(), "k"));
  api_address::KubeconfigSwitchDeps deps{
      .fs = **fs, .clock = clock, .systemd = systemd->get(), .verify = [&](base::WallTime since) {
        return api_address::kubeletWorksThrough(**fs, "/etc/kubernetes/kubelet.conf", "cp-1", since,
                                                clock);
      }};
  const api_address::KubeconfigSwitchOptions resume{.server = server_->url(),
                                                    .admin = true,
                                                    .restart_when_unchanged = true,
                                                    .run_id = "r1",
                                                    .now = clock.wallNow(),
                                                    .verify_timeout = 1s,
                                                    .poll = 100ms};
  // kubelet does not come back: both files back to what the backup holds.
  auto failed = api_address::switchKubeconfigServer(resume, deps);
  ASSERT_FALSE(failed);
  EXPECT_THAT(failed.error().message(),
              HasSubstr("restored from " +
                        std::string("/etc/kubernetes/.ekco-backup/kubeconfig-20261129T070000Z")));
  EXPECT_EQ(read("kubelet.conf"), kubelet_old);
  EXPECT_EQ(read("admin.conf"), admin_old);
  // Another run id does not take this backup: the files are planned from what they are.
  write("kubelet.conf", *api_address::withServer(kubelet_old, kOld, server_->url(), "k"));
  startKubelet(/*comes_back=*/true);
  auto other = resume;
  other.run_id = "r2";
  auto done = api_address::switchKubeconfigServer(other, deps);
  ASSERT_TRUE(done) << done.error().message();
  EXPECT_THAT(done->lines.front(), HasSubstr("already point at"));
  EXPECT_EQ(read("admin.conf"), admin_old);  // its old address is now kubelet.conf's new one
  // The same run id with kubelet back: the switch is finished, admin.conf included.
  auto finished = api_address::switchKubeconfigServer(resume, deps);
  ASSERT_TRUE(finished) << finished.error().message();
  EXPECT_EQ(serverOf("kubelet.conf"), server_->url());
  EXPECT_EQ(serverOf("admin.conf"), server_->url());
}

TEST_F(SetKubeconfigServerTest, BadInputChangesNothing) {
  EXPECT_EQ(run({.server = "http://localhost:6444"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("--server: \"http://localhost:6444\" is not an "
                                    "https://HOST[:PORT] URL (want https://)"));
  write("kubelet.conf", "kind: Config\n");
  EXPECT_EQ(run({.server = server_->url()}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("kubelet.conf: not a kubeconfig (no clusters)"));
  EXPECT_TRUE(bus_.calls("RestartUnit").empty());
}

}  // namespace
}  // namespace ekco::agent
