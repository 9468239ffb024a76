// The Ceph fixture itself: a real cluster with OSD ids above 9 on several CRUSH hosts, reached
// through ekco-kubesim's pods/exec of the rook-ceph-tools pod (run mode), and cleaned up.
#include "tests/ceph/ceph_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kube/exec.h"
#include "tests/agent/cli_support.h"
#include "tests/rook/kurl_rook_objects.h"

namespace ekco::testing {
namespace {

using nlohmann::json;

std::vector<int> daemonPids(const std::string& dir) {
  std::vector<int> pids;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/pids")) {
    std::ifstream in(e.path());
    int pid = 0;
    if (in >> pid) pids.push_back(pid);
  }
  return pids;
}

// Alive and not a zombie waiting for its (new) parent to reap it.
bool running(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

TEST(CephFixture, ServesOsdTreeWithHighIdsThroughTheToolsPodExecAndCleansUp) {
  if (!CephFixture::available()) GTEST_SKIP() << "Ceph is not installed (scripts/setup)";
  agent::testing::TempDir dir{"ekco-ceph"};
  std::vector<int> pids;
  {
    auto ceph = CephFixture::start(dir.path() + "/ceph");
    ASSERT_TRUE(ceph) << ceph.error().message();
    ASSERT_TRUE((*ceph)->addOsd(0, "node-1"));
    ASSERT_TRUE((*ceph)->addOsd(11, "node-2"));
    ASSERT_TRUE((*ceph)->waitForUpOsds(2, std::chrono::seconds(60)));

    auto server = kubesim::Server::start({.out_dir = dir.path(),
                                          .objects = {rook_testing::rookToolsPod()},
                                          .exec_script = {(*ceph)->toolsPodExec()}});
    ASSERT_TRUE(server) << server.error().message();
    kube::WebSocketExecutor exec(kube::Connection{.server = (*server)->url(),
                                                  .ca_pem = (*server)->caPem(),
                                                  .client_cert_pem = (*server)->clientCertPem(),
                                                  .client_key_pem = (*server)->clientKeyPem()});
    auto tree = exec.exec({.ns = "rook-ceph",
                           .pod = "rook-ceph-tools-5f8d",
                           .command = {"ceph", "osd", "tree", "-f", "json"}});
    ASSERT_TRUE(tree) << tree.error().message();
    ASSERT_EQ(tree->exit_code, 0) << tree->stderr_data;
    json parsed = json::parse(tree->stdout_data);
    std::map<std::string, std::string> status;  // osd name -> status; host name -> children
    for (const json& n : parsed["nodes"]) {
      if (n["type"] == "osd") status[n["name"]] = n["status"];
      if (n["type"] == "host") status[n["name"]] = n["children"].dump();
    }
    EXPECT_EQ(status["osd.11"], "up");
    EXPECT_EQ(status["node-2"], "[11]");
    EXPECT_EQ(status["node-1"], "[0]");

    // A real failure comes back as the real exit status and stderr.
    auto bad = exec.exec({.ns = "rook-ceph",
                          .pod = "rook-ceph-tools-5f8d",
                          .command = {"ceph", "osd", "pool", "get", "no-such-pool", "size"}});
    ASSERT_TRUE(bad) << bad.error().message();
    EXPECT_EQ(bad->exit_code, 2);
    EXPECT_THAT(bad->stderr_data, ::testing::HasSubstr("unrecognized pool 'no-such-pool'"));

    // A stopped OSD is down but still in.
    ASSERT_TRUE((*ceph)->stopOsd(11));
    ASSERT_TRUE((*ceph)->waitForUpOsds(1, std::chrono::seconds(30)));
    pids = daemonPids(dir.path() + "/ceph");
    EXPECT_EQ(pids.size(), 3u);  // mon, mgr, osd.0
  }
  for (int pid : pids) EXPECT_FALSE(running(pid)) << "daemon " << pid << " still running";
}

}  // namespace
}  // namespace ekco::testing
