// kill -9 of the leader in the middle of the MinIO migration: a real `ekco agent` (as the ekco
// ServiceAccount, deploy/ and deploy-minio/ RBAC) starts migrating the old MinIO to ha-minio (two
// real S3 servers on loopback), is SIGKILLed once it has recorded copy progress, and a new agent
// takes over when the Lease expires: it resumes from the recorded progress, finishes, and the
// contents are identical; no object is copied twice needlessly (the objects the dead leader
// copied after its last checkpoint are found identical on ha-minio and skipped).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <regex>

#include "agent/policy/storage_migration.h"
#include "agent/serve/health_server.h"
#include "tests/agent/features/minio/minio_ha_fixture.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/server/server.h"
#include "tests/kubesim/store/store.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr std::size_t kObjects = 400;  // in registry, besides the 7 of kotsadm

json node(const std::string& name) { return kubesim::readyNodeObject(name); }

class MinioHaKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(minio_.start(dir_.path(), 0, kObjects, clock_,
                                         {node("node-a"), node("node-b"), node("node-c")}));
    testing::writeMinioAgentFiles(dir_.path(), "2s");
  }
  void TearDown() override {
    for (pid_t& p : agents_) testing::killAndReap(p);
    // Every call about MinIO and the migration state was granted by the manifests.
    for (const auto& r : minio_.server().requestLog()) {
      if (r.ns == "minio" || r.name == kStorageMigrationConfigMap ||
          r.resource == "storageclasses") {
        EXPECT_TRUE(r.allowed) << r.verb << " " << r.resource << " " << r.ns << "/" << r.name;
      }
    }
  }
  void startAgent() {
    socket_ = dir_.path() + "/a" + std::to_string(agents_.size()) + ".sock";
    log_ = dir_.path() + "/agent" + std::to_string(agents_.size()) + ".log";
    const pid_t pid =
        testing::spawnLogged({EKCO_BIN, "agent", "--config", dir_.path() + "/config.yaml",
                              "--kubeconfig", dir_.path() + "/sa.kubeconfig", "--node-name",
                              "node-a", "--host-root", dir_.path() + "/host", "--socket", socket_},
                             log_);
    ASSERT_GT(pid, 0);
    agents_.push_back(pid);
  }
  json status() {
    auto reply = queryHealthSocket(socket_, "/status", milliseconds(3000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  }
  std::map<std::string, std::string> migration() {
    auto cm = minio_.server().get("configmaps", "kurl", kStorageMigrationConfigMap);
    std::map<std::string, std::string> out;
    if (!cm) return out;
    for (auto& [k, v] : (*cm)["data"].items()) out[k] = v.get<std::string>();
    return out;
  }
  std::uint64_t number(const std::string& key) {
    const std::string v = migration()[key];
    std::uint64_t n = 0;
    std::from_chars(v.data(), v.data() + v.size(), n);
    return n;
  }

  ekco::agent::testing::TempDir dir_{"ekco-minio-kill"};
  base::SystemClock clock_;
  testing::MinioCluster minio_;
  std::vector<pid_t> agents_;
  std::string socket_;
  std::string log_;
};

TEST_F(MinioHaKillTest, ANewLeaderResumesAKilledLeadersMigrationAndNothingIsLost) {
  const auto source = minio_.contents(minio_.from());
  ASSERT_NO_FATAL_FAILURE(startAgent());
  // Killed once it has recorded copy progress, well before the end.
  ASSERT_TRUE(testing::eventually(
      [&] { return migration()["phase"] == "copying" && number("copied-objects") >= 100; },
      seconds(40)))
      << testing::readWholeFile(log_);
  ::kill(-agents_[0], SIGKILL);
  ::waitpid(agents_[0], nullptr, 0);
  agents_[0] = -1;
  const std::uint64_t recorded = number("copied-objects");
  ASSERT_LT(recorded, kObjects) << "the copy finished before the kill; make it longer";
  EXPECT_EQ(minio_.server().get("services", "minio", "minio").value()["spec"]["selector"],
            json({{"doesnotexist", "doesnotexist"}}));  // MinIO offline meanwhile
  EXPECT_TRUE(minio_.server().get("deployments.apps", "minio", "minio"));

  ASSERT_NO_FATAL_FAILURE(startAgent());
  ASSERT_TRUE(testing::eventually(
      [&] { return !minio_.server().get("deployments.apps", "minio", "minio"); }, seconds(45)))
      << testing::readWholeFile(log_);
  ASSERT_TRUE(testing::eventually(
      [&] {
        json s = status();
        return s.is_object() && s["minio_ha"].is_object() &&
               s["minio_ha"].value("decision", "").find("completed") != std::string::npos;
      },
      seconds(10)))
      << status().dump();

  EXPECT_EQ(minio_.contents(minio_.to()), source);
  EXPECT_EQ(minio_.server().get("services", "minio", "minio").value()["spec"]["selector"],
            json({{"app", "ha-minio"}}));
  EXPECT_FALSE(minio_.server().get("persistentvolumeclaims", "minio", "minio-pv-claim"));
  EXPECT_FALSE(minio_.server().get("configmaps", "kurl", kStorageMigrationConfigMap));
  // "copied N objects (...), M already on ha-minio": every object once; the only ones met again
  // are those the dead leader copied after its last checkpoint (at most one checkpoint's worth).
  std::string copied_message;
  auto& store = minio_.server().store();
  const auto events = store.findQualified("events");
  ASSERT_TRUE(events);
  const json listed = store.list(*events, "minio", {}).body;
  for (const json& e : listed["items"]) {
    if (e.value("reason", "") == "MinioDataCopied") copied_message = e.value("message", "");
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(copied_message, m,
                                std::regex(R"(copied (\d+) objects \(\d+ bytes\), (\d+) already)")))
      << copied_message;
  const std::size_t copied = std::stoul(m[1]);
  const std::size_t skipped = std::stoul(m[2]);
  EXPECT_EQ(copied + skipped, kObjects + minio_.nestedKeys().size());
  EXPECT_LE(skipped, 100u + 1u);
}

}  // namespace
}  // namespace ekco::agent
