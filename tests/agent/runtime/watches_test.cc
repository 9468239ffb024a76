// The runtime's watch registry (agent/runtime/watches.h) with recording watches: one watch per
// key whoever declares it, followed watches first, node watches with the agent, leader watches
// only while leading and from a fresh start each term, stops in reverse, nothing declared after
// the start, and every declarer woken.
#include "agent/runtime/watches.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "kube/decode/records.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using ::testing::ElementsAre;

// Records start/stop into a shared journal ("+key", "-key"); running() as the last said.
class RecordingWatch final : public Watch {
 public:
  RecordingWatch(std::string key, std::vector<std::string>& journal, std::function<void()> changed)
      : key_(std::move(key)), journal_(journal), changed_(std::move(changed)) {}
  void start() override {
    if (running_) return;
    running_ = true;
    journal_.push_back("+" + key_);
  }
  void stop() override {
    if (!running_) return;
    running_ = false;
    journal_.push_back("-" + key_);
  }
  void supervise() override { ++supervised; }
  void forEachStats(const WatchStatsFn& f) const override {
    if (running_) f(key_, kube::InformerStats{.synced = true});
  }
  void change() { changed_(); }
  bool running() const { return running_; }
  int supervised = 0;

 private:
  std::string key_;
  std::vector<std::string>& journal_;
  std::function<void()> changed_;
  bool running_ = false;
};

class WatchRegistryTest : public ::testing::Test {
 protected:
  WatchSpec spec(std::string_view key, Scope scope, std::string_view follows = "") {
    return {.key = key,
            .scope = scope,
            .build = [this, key, follows](const WatchContext& c) -> std::shared_ptr<Watch> {
              if (!follows.empty()) {
                auto followed = c.watches.require<RecordingWatch>(spec(follows, Scope::kLeader));
                if (!followed) return nullptr;
              }
              ++builds_;
              return std::make_shared<RecordingWatch>(std::string(key), journal_, c.changed);
            }};
  }
  std::shared_ptr<RecordingWatch> require(const WatchSpec& s, std::function<void()> wake = {}) {
    auto w = registry_.require<RecordingWatch>(s, std::move(wake));
    EXPECT_TRUE(w) << w.error().message();
    return w ? *w : nullptr;
  }

  kube::testing::FakeKube kube_;
  base::ManualClock clock_;
  Config config_;
  WatchRegistry registry_{kube_, clock_, config_, "node-a"};
  std::vector<std::string> journal_;
  int builds_ = 0;
};

TEST_F(WatchRegistryTest, OneWatchPerKeyAndEveryDeclarerIsWoken) {
  int woke_a = 0;
  int woke_b = 0;
  auto a = require(spec("cluster-nodes", Scope::kLeader), [&] { ++woke_a; });
  auto b = require(spec("cluster-nodes", Scope::kLeader), [&] { ++woke_b; });
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(builds_, 1);
  a->change();
  EXPECT_EQ(woke_a, 1);
  EXPECT_EQ(woke_b, 1);
  EXPECT_THAT(registry_.keys(), ElementsAre("cluster-nodes"));
}

TEST_F(WatchRegistryTest, LeaderWatchesRunOnlyWhileLeadingAndRestartEachTerm) {
  auto node = require(spec("own-node", Scope::kNode));
  // A watch that follows another: the followed one is listed (and started) first.
  auto pods = require(spec("unhealthy-node-pods", Scope::kLeader, "cluster-nodes"));
  ASSERT_TRUE(node && pods);
  EXPECT_THAT(registry_.keys(), ElementsAre("own-node", "cluster-nodes", "unhealthy-node-pods"));

  registry_.setLeading(true);  // before the start: remembered, nothing runs yet
  EXPECT_TRUE(journal_.empty());
  registry_.start();
  EXPECT_THAT(journal_, ElementsAre("+own-node", "+cluster-nodes", "+unhealthy-node-pods"));
  journal_.clear();

  registry_.setLeading(false);  // in reverse: the follower first
  EXPECT_THAT(journal_, ElementsAre("-unhealthy-node-pods", "-cluster-nodes"));
  EXPECT_TRUE(node->running());
  journal_.clear();

  // Lost and won again before the supervisor acted (agent.cc): false then true, so the new term
  // starts its watches again rather than keeping the old term's.
  registry_.setLeading(true);
  registry_.setLeading(false);
  registry_.setLeading(true);
  EXPECT_THAT(journal_,
              ElementsAre("+cluster-nodes", "+unhealthy-node-pods", "-unhealthy-node-pods",
                          "-cluster-nodes", "+cluster-nodes", "+unhealthy-node-pods"));
  journal_.clear();

  registry_.supervise();
  EXPECT_EQ(pods->supervised, 1);
  std::vector<std::string> labels;
  registry_.forEachStats(
      [&](const std::string& label, const kube::InformerStats&) { labels.push_back(label); });
  EXPECT_THAT(labels, ElementsAre("own-node", "cluster-nodes", "unhealthy-node-pods"));

  registry_.stop();
  EXPECT_THAT(journal_, ElementsAre("-unhealthy-node-pods", "-cluster-nodes", "-own-node"));
}

TEST_F(WatchRegistryTest, NothingIsDeclaredAfterTheStart) {
  ASSERT_TRUE(require(spec("own-node", Scope::kNode)));
  registry_.start();
  auto late = registry_.require<RecordingWatch>(spec("envoy-pods", Scope::kLeader));
  ASSERT_FALSE(late);
  EXPECT_THAT(late.error().message(), ::testing::HasSubstr("watch envoy-pods: not built"));
  EXPECT_THAT(registry_.keys(), ElementsAre("own-node"));
  registry_.stop();
}

TEST_F(WatchRegistryTest, AKeyDeclaredAsAnotherKindOfWatchIsAnError) {
  ASSERT_TRUE(require(spec("hostjobs", Scope::kNode)));
  auto other = registry_.require<InformerWatch<kube::NodeRecord>>(spec("hostjobs", Scope::kNode));
  ASSERT_FALSE(other);
  EXPECT_THAT(other.error().message(), ::testing::HasSubstr("watch hostjobs"));
}

}  // namespace
}  // namespace ekco::agent
