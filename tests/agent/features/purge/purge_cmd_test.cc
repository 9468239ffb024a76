// `ekco purge-node` (and `ekco-purge-node`) through the command line against the in-process
// test API server: plan and dry run, EKCO's refusals, the confirmation, the purge itself.
#include "agent/features/purge/purge_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/agent/cli_support.h"
#include "tests/agent/log_capture.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using testing::cli;
using testing::CliRun;
using ::testing::HasSubstr;
using ::testing::Not;

json node(const std::string& name, bool master, bool ready) {
  json labels = {{"kubernetes.io/hostname", name}};
  if (master) labels["node-role.kubernetes.io/control-plane"] = "";
  json n = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"labels", labels}}},
      {"spec", json::object()},
      {"status", {{"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "Unknown"}}}}}}};
  if (!ready) {
    n["spec"]["taints"] = {{{"key", "node.kubernetes.io/unreachable"},
                            {"effect", "NoExecute"},
                            {"timeAdded", "2026-01-01T00:00:00Z"}}};
  }
  return n;
}

class PurgeCmdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server =
        kubesim::Server::start({.out_dir = dir_.path(),
                                .objects = {node("cp-1", true, true), node("cp-2", true, true),
                                            node("w-1", false, true), node("w-2", false, false)}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }
  CliRun purge(std::vector<std::string> extra) {
    std::vector<std::string> args = {"purge-node", "--kubeconfig", server_->kubeconfigPath(),
                                     "--node-name", "cp-1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli(args);
  }
  testing::TempDir dir_{"ekco-purge-cmd"};
  std::unique_ptr<kubesim::Server> server_;
};

TEST_F(PurgeCmdTest, DryRunPrintsThePlanAndChangesNothing) {
  CliRun r = purge({"w-2", "--dry-run"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Plan to purge node w-2:\n  - would delete node w-2\n"));
  EXPECT_THAT(r.out, HasSubstr("Dry run: nothing was changed."));
  EXPECT_TRUE(server_->get("nodes", "", "w-2"));
}

TEST_F(PurgeCmdTest, PurgesADeadWorkerWithYesAndRecordsEvents) {
  testing::LogCapture logs;
  CliRun r = purge({"w-2", "--yes"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  // Each step says what it does and how long the purge has run.
  EXPECT_THAT(logs.text(), HasSubstr("msg=\"purge: step\" node=w-2 step=node "
                                     "what=\"deleting the Node object\" elapsed="));
  EXPECT_THAT(r.out, HasSubstr("done: deleted node w-2"));
  EXPECT_THAT(r.out, HasSubstr("Node w-2 purged."));
  EXPECT_FALSE(server_->get("nodes", "", "w-2"));
}

TEST_F(PurgeCmdTest, EkcosRefusalsAndTheNodeItRunsOn) {
  CliRun master = purge({"cp-2", "--yes"});
  EXPECT_EQ(master.code, kExitFailure);
  EXPECT_THAT(master.err, HasSubstr("cannot purge master: 2 ready masters"));
  CliRun worker = purge({"w-1", "--yes", "--min-ready-worker-nodes", "1"});
  EXPECT_EQ(worker.code, kExitFailure);
  EXPECT_THAT(worker.err, HasSubstr("cannot purge worker: 1 ready workers"));
  CliRun self = purge({"cp-1", "--yes", "--min_ready_master_nodes", "1"});  // EKCO's spelling
  EXPECT_EQ(self.code, kExitFailure);
  EXPECT_THAT(self.err, HasSubstr("the node this ekco runs on"));
  EXPECT_TRUE(server_->get("nodes", "", "cp-2"));
  EXPECT_TRUE(server_->get("nodes", "", "w-1"));
}

TEST_F(PurgeCmdTest, AsksOnATerminalAndANoKeepsTheNode) {
  std::ostringstream out;
  std::ostringstream err;
  CliEnv env{.environment = {}, .out = &out, .err = &err, .default_config_path = "/nonexistent"};
  PurgeNodeArgs args{.node = "w-2",
                     .kubeconfig = server_->kubeconfigPath(),
                     .self = "cp-1",
                     .stdin_is_terminal = [] { return true; },
                     .read_answer = [] { return std::string("n"); }};
  EXPECT_EQ(runPurgeNodeCommand(Config{}, args, env), kExitFailure);
  EXPECT_THAT(out.str(), HasSubstr("cannot rejoin the cluster as it is"));
  EXPECT_THAT(out.str(), HasSubstr("Purge node w-2? [y/N] "));
  EXPECT_THAT(out.str(), HasSubstr("Not purged."));
  EXPECT_TRUE(server_->get("nodes", "", "w-2"));
  args.read_answer = [] { return std::string("y"); };
  EXPECT_EQ(runPurgeNodeCommand(Config{}, args, env), kExitOk) << err.str();
  EXPECT_FALSE(server_->get("nodes", "", "w-2"));
}

// Issue 24 defect 5: `echo n | ekco purge-node X` purged a Ready node. Without a terminal an
// irreversible purge needs --yes; without it the plan is printed and nothing happens.
TEST_F(PurgeCmdTest, WithoutATerminalItRefusesUnlessYes) {
  std::ostringstream out;
  std::ostringstream err;
  CliEnv env{.environment = {}, .out = &out, .err = &err, .default_config_path = "/nonexistent"};
  bool asked = false;
  PurgeNodeArgs args{.node = "w-2",
                     .kubeconfig = server_->kubeconfigPath(),
                     .self = "cp-1",
                     .stdin_is_terminal = [] { return false; },
                     .read_answer =
                         [&] {
                           asked = true;
                           return std::string("y");
                         }};
  EXPECT_EQ(runPurgeNodeCommand(Config{}, args, env), kExitFailure);
  EXPECT_THAT(out.str(), HasSubstr("Plan to purge node w-2:"));
  EXPECT_EQ(err.str(),
            "error: purge-node: not purged: stdin is not a terminal, so nobody can confirm; pass "
            "--yes to purge without asking\n");
  EXPECT_FALSE(asked);
  EXPECT_TRUE(server_->get("nodes", "", "w-2"));
  args.yes = true;
  EXPECT_EQ(runPurgeNodeCommand(Config{}, args, env), kExitOk) << err.str();
  EXPECT_FALSE(server_->get("nodes", "", "w-2"));
}

TEST_F(PurgeCmdTest, InstalledAsEkcoPurgeNode) {
  std::ostringstream out;
  std::ostringstream err;
  CliEnv env{.environment = {}, .out = &out, .err = &err, .default_config_path = "/nonexistent"};
  const int code = runCli({"/usr/bin/ekco-purge-node", "w-2", "--dry-run", "--kubeconfig",
                           server_->kubeconfigPath(), "--node-name", "cp-1"},
                          env);
  EXPECT_EQ(code, kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("Plan to purge node w-2"));
}

// Issue 25: one context per layer ("purge-node: list nodes: list nodes: request ..." said the
// operation twice).
TEST_F(PurgeCmdTest, AnUnreachableApiIsOneLineWithEachContextOnce) {
  const std::string dead = dir_.path() + "/dead.kubeconfig";
  {
    std::ifstream in(server_->kubeconfigPath());
    std::stringstream text;
    text << in.rdbuf();
    std::string kubeconfig = text.str();
    const std::string url = server_->url();
    kubeconfig.replace(kubeconfig.find(url), url.size(), "https://127.0.0.1:1");
    std::ofstream(dead) << kubeconfig;
  }
  CliRun r = cli({"purge-node", "w-2", "--kubeconfig", dead, "--node-name", "cp-1", "--yes"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("error: purge-node: list nodes: request https://127.0.0.1:1/"));
  EXPECT_THAT(r.err, Not(HasSubstr("list nodes: list nodes")));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Issue 25: in a DaemonSet-only install there is no /etc/ekco/config.yaml; the command takes the
// agents' ConfigMap as its base, so it refuses where the defaults would have purged, and says
// which source set the guard. The local file, environment and flags still override it.
TEST_F(PurgeCmdTest, InheritsTheAgentsConfigMapAndSaysWhichSourceSetIt) {
  {
    testing::LogCapture log;
    CliRun defaults = purge({"w-1", "--dry-run"});
    EXPECT_EQ(defaults.code, kExitOk) << defaults.err;
    EXPECT_THAT(log.text(), HasSubstr("sources=\"defaults (configmap kurl/ekco-config not used: "
                                      "it does not exist)\""));
  }
  ASSERT_TRUE(server_->put(kubesim::configMapObject(
      "kurl", "ekco-config", {{"config.yaml", "min_ready_worker_nodes: 1\n"}})));
  {
    testing::LogCapture log;
    CliRun refused = purge({"w-1", "--yes"});
    EXPECT_EQ(refused.code, kExitFailure);
    EXPECT_THAT(refused.err, HasSubstr("cannot purge worker: 1 ready workers"));
    EXPECT_THAT(refused.err, HasSubstr(" (see docs/features/purge.md#guards)\n"));
    EXPECT_THAT(log.text(),
                HasSubstr("sources=\"configmap kurl/ekco-config (1 key); defaults for the rest\""));
    EXPECT_TRUE(server_->get("nodes", "", "w-1"));
  }
  // `config show --effective` shows the same layering, sources first.
  CliRun shown = cli({"config", "show", "--effective", "--kubeconfig", server_->kubeconfigPath()});
  EXPECT_EQ(shown.code, kExitOk) << shown.err;
  EXPECT_THAT(shown.out, ::testing::StartsWith("# sources: configmap kurl/ekco-config (1 key); "
                                               "defaults for the rest\n"));
  EXPECT_THAT(shown.out, HasSubstr("\nmin_ready_worker_nodes: 1"));
  // A flag overrides the ConfigMap.
  {
    testing::LogCapture log;
    CliRun flag = purge({"w-1", "--dry-run", "--min-ready-worker-nodes", "0"});
    EXPECT_EQ(flag.code, kExitOk) << flag.err;
    EXPECT_THAT(log.text(), HasSubstr("sources=\"flags (1 key); defaults for the rest\""));
  }
  // A ConfigMap that fails validation is an error naming the key and the ConfigMap.
  ASSERT_TRUE(server_->put(kubesim::configMapObject(
      "kurl", "ekco-config", {{"config.yaml", "min_ready_worker_nodes: many\n"}})));
  CliRun bad = purge({"w-1", "--dry-run"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("configmap kurl/ekco-config:1: min_ready_worker_nodes"));
  ASSERT_TRUE(
      server_->put(kubesim::configMapObject("kurl", "ekco-config", {{"other.yaml", "x: 1\n"}})));
  CliRun no_key = purge({"w-1", "--dry-run"});
  EXPECT_EQ(no_key.code, kExitUsage);
  EXPECT_THAT(no_key.err, HasSubstr("error: configmap kurl/ekco-config: has no data.config.yaml"));
  EXPECT_TRUE(server_->get("nodes", "", "w-1"));
}

TEST(PurgeCmd, UsageErrors) {
  EXPECT_EQ(cli({"purge-node"}).code, kExitUsage);  // NAME is required
  CliRun bad = cli({"purge-node", "x", "--min-ready-master-nodes", "zero"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("min_ready_master_nodes"));
}

}  // namespace
}  // namespace ekco::agent
