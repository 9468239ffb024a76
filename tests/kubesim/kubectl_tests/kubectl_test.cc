// kubesim proven with the real kubectl: every command ekco's docs and tests rely on, against the
// server started in-process on an ephemeral port.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/os/process.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKubectl = "/usr/bin/kubectl";

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << kKubectl << " is not installed";
    std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-kubectl-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto objects = parseObjects(readFile(std::string(KUBESIM_TESTDATA_DIR) + "/cluster.yaml"));
    ASSERT_TRUE(objects) << objects.error().message();
    ServerOptions options;
    options.out_dir = dir_.string();
    options.objects = *objects;
    options.exec_script = {ExecReply{.command_prefix = {"ceph", "status"},
                                     .stdout_data = "HEALTH_OK\n",
                                     .stderr_data = "",
                                     .exit_code = 0}};
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  base::ProcessResult kubectl(std::vector<std::string> args,
                              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::vector<std::string> argv = {kKubectl, "--kubeconfig", server_->kubeconfigPath(),
                                     "--cache-dir", (dir_ / "cache").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    base::ProcessRequest request{.argv = argv,
                                 .inherit_env = true,
                                 .env = {{"HOME", dir_.string()}, {"KUBECONFIG", ""}},
                                 .stdin_data = "",
                                 .working_dir = "",
                                 .timeout = timeout,
                                 .kill_grace = std::chrono::milliseconds(0)};
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }

  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::filesystem::path dir_;
  std::unique_ptr<Server> server_;
};

TEST_F(KubectlTest, GetNodesListsEveryNode) {
  auto r = kubectl({"get", "nodes"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("node-a"));
  EXPECT_THAT(r.stdout_data, HasSubstr("node-b"));
}

TEST_F(KubectlTest, GetMissingNodePrintsTheServersNotFoundStatus) {
  auto r = kubectl({"get", "node", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("Error from server (NotFound): nodes \"nope\" not found"));
}

TEST_F(KubectlTest, GetPodsInAllNamespacesFiltersBySpecNodeName) {
  auto r = kubectl({"get", "pods", "-A", "--field-selector", "spec.nodeName=node-a"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("web-1"));
  EXPECT_THAT(r.stdout_data, HasSubstr("rook-ceph-osd-0"));
  EXPECT_THAT(r.stdout_data, Not(HasSubstr("web-2")));
}

TEST_F(KubectlTest, GetPodsWithLabelSelectorAsJsonReturnsOnlyMatchingPods) {
  auto r = kubectl({"get", "pods", "-A", "-l", "app in (web)", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  json list = json::parse(r.stdout_data);
  ASSERT_EQ(list["items"].size(), 2u);
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "web-1");
}

TEST_F(KubectlTest, CordonAndUncordonToggleSpecUnschedulableInTheStore) {
  auto cordon = kubectl({"cordon", "node-a"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.stderr_data;
  EXPECT_THAT(cordon.stdout_data, HasSubstr("node/node-a cordoned"));
  auto node = server_->get("nodes", "", "node-a");
  ASSERT_TRUE(node);
  EXPECT_EQ((*node)["spec"]["unschedulable"], true);
  // The strategic merge patch keeps the taints that were there.
  EXPECT_EQ((*node)["spec"]["taints"].size(), 1u);

  auto again = kubectl({"cordon", "node-a"});
  EXPECT_THAT(again.stdout_data, HasSubstr("already cordoned"));

  auto uncordon = kubectl({"uncordon", "node-a"});
  ASSERT_EQ(uncordon.exit_code, 0) << uncordon.stderr_data;
  EXPECT_THAT(uncordon.stdout_data, HasSubstr("node/node-a uncordoned"));
  node = server_->get("nodes", "", "node-a");
  EXPECT_FALSE((*node)["spec"].contains("unschedulable")) << node->dump();
}

TEST_F(KubectlTest, LabelNodeAddsTheLabel) {
  auto r = kubectl({"label", "node", "node-a", "x=y"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("node/node-a labeled"));
  auto node = server_->get("nodes", "", "node-a");
  EXPECT_EQ((*node)["metadata"]["labels"]["x"], "y");
  EXPECT_EQ((*node)["metadata"]["labels"]["kubernetes.io/hostname"], "node-a");
}

TEST_F(KubectlTest, ForceDeleteWithGracePeriodZeroRemovesThePodAtOnce) {
  // web-2 is on node-b, whose kubelet is gone: only a force delete removes it.
  auto r = kubectl({"delete", "pod", "web-2", "-n", "default", "--grace-period=0", "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("pod \"web-2\" force deleted"));
  EXPECT_FALSE(server_->get("pods", "default", "web-2"));
}

TEST_F(KubectlTest, GetLeaseInKurlNamespace) {
  auto r = kubectl({"get", "lease", "-n", "kurl"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("ekco-leader"));
}

TEST_F(KubectlTest, GetCephClustersServesTheCustomResourceLoadedFromYaml) {
  auto r = kubectl(
      {"get", "cephclusters", "-n", "rook-ceph", "-o", "jsonpath={.items[0].spec.mon.count}"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "3");
}

TEST_F(KubectlTest, CreateFromFileStoresEveryObjectAndScaleUpdatesReplicas) {
  auto r = kubectl({"create", "-f", std::string(KUBESIM_TESTDATA_DIR) + "/create.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("configmap/ekco-config created"));
  EXPECT_THAT(r.stdout_data, HasSubstr("deployment.apps/ekc-operator created"));
  auto cm = server_->get("configmaps", "kurl", "ekco-config");
  ASSERT_TRUE(cm);
  EXPECT_EQ((*cm)["data"]["config.yaml"], "node_unreachable_toleration: 5m\n");

  auto again = kubectl({"create", "-f", std::string(KUBESIM_TESTDATA_DIR) + "/create.yaml"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.stderr_data, HasSubstr("AlreadyExists"));

  auto scale = kubectl({"scale", "deployment", "ekc-operator", "-n", "kurl", "--replicas=0"});
  ASSERT_EQ(scale.exit_code, 0) << scale.stderr_data;
  auto deploy = server_->get("deployments.apps", "kurl", "ekc-operator");
  EXPECT_EQ((*deploy)["spec"]["replicas"], 0);
}

TEST_F(KubectlTest, ApplyCreatesThenPatchesWithStrategicMerge) {
  const std::string dir = KUBESIM_TESTDATA_DIR;
  auto created = kubectl({"apply", "-f", dir + "/create.yaml"});
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  EXPECT_THAT(created.stdout_data, HasSubstr("configmap/ekco-config created"));
  auto applied = kubectl({"apply", "-f", dir + "/apply.yaml"});
  ASSERT_EQ(applied.exit_code, 0) << applied.stderr_data;
  EXPECT_THAT(applied.stdout_data, HasSubstr("configmap/ekco-config configured"));
  auto cm = server_->get("configmaps", "kurl", "ekco-config");
  ASSERT_TRUE(cm);
  EXPECT_EQ((*cm)["data"]["config.yaml"], "node_unreachable_toleration: 10m\n");
  EXPECT_EQ((*cm)["metadata"]["labels"]["stage"], "applied");
}

TEST_F(KubectlTest, ExecRunsTheScriptedReply) {
  auto r = kubectl({"exec", "-n", "rook-ceph", "rook-ceph-osd-0", "--", "ceph", "status"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "HEALTH_OK\n");
  auto log = server_->execLog();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].container, "osd");
  EXPECT_EQ(log[0].command, (std::vector<std::string>{"ceph", "status"}));
}

TEST_F(KubectlTest, WatchOnlyPrintsChangesMadeAfterItStarted) {
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    auto pod = server_->get("pods", "default", "web-1");
    (*pod)["metadata"]["name"] = "web-3";
    (*pod)["metadata"].erase("uid");
    (void)server_->put(*pod);
  });
  auto r = kubectl({"get", "pods", "-n", "default", "--watch-only", "-o", "name"},
                   std::chrono::milliseconds(2500));
  writer.join();
  EXPECT_TRUE(r.timed_out);
  EXPECT_THAT(r.stdout_data, HasSubstr("pod/web-3"));
  EXPECT_THAT(r.stdout_data, Not(HasSubstr("pod/web-1")));
}

}  // namespace
}  // namespace ekco::kubesim
