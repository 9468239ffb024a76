// The informer loop against the in-memory API with scripted lists and watches: paging, the replace
// diff, 410 re-lists, backoff after failures, unchanged records, malformed objects, stop.
// (informer_sim_test.cc runs it against ekco-kubesim over HTTPS.)
#include "kube/watch/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "base/clock.h"
#include "kube/decode/records.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::kube {
namespace {

using base::Error;
using base::ErrorCode;
using std::chrono::milliseconds;
using ::testing::ElementsAre;
using testing::FakeKube;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using testing::Verb;

Json pod(const std::string& name, const std::string& node, const std::string& rv = "1") {
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"resourceVersion", rv}}},
          {"spec", {{"nodeName", node}}},
          {"status", {{"phase", "Running"}}}};
}

Json listOf(std::vector<Json> items, const std::string& rv, const std::string& cont = "") {
  Json meta = {{"resourceVersion", rv}};
  if (!cont.empty()) meta["continue"] = cont;
  return {{"kind", "PodList"}, {"metadata", meta}, {"items", std::move(items)}};
}

WatchEvent event(WatchEventType type, Json object) { return {.type = type, .object = object}; }

WatchEvent bookmark(const std::string& rv) {
  return {.type = WatchEventType::kBookmark,
          .object = {{"kind", "Pod"}, {"metadata", {{"resourceVersion", rv}}}}};
}

// Records what the handlers saw, as strings: "add a", "update a", "delete a".
struct Recorder {
  std::mutex mu;
  std::vector<std::string> seen;
  std::vector<std::string> errors;
  InformerHandlers<PodRecord> handlers() {
    return {.on_add = [this](const PodRecord& p) { push("add " + p.name); },
            .on_update = [this](const PodRecord&, const PodRecord& p) { push("update " + p.name); },
            .on_delete = [this](const PodRecord& p) { push("delete " + p.name); },
            .on_error =
                [this](const Error& e) {
                  std::lock_guard lock(mu);
                  errors.push_back(e.message());
                }};
  }
  void push(std::string s) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(s));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu);
    return std::exchange(seen, {});
  }
};

class InformerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Informer<PodRecord>> make(InformerOptions options = {}) {
    options.initial_backoff = milliseconds(1);
    options.max_backoff = milliseconds(4);
    options.short_watch = milliseconds(0);
    return std::make_unique<Informer<PodRecord>>(client_, clock_, resources::kPods, "", options,
                                                 decodePod, recorder_.handlers());
  }
  // Runs the informer until the scripts are used up, then stops it.
  void runToIdle(Informer<PodRecord>& informer) {
    std::thread t([&] { informer.run(); });
    EXPECT_TRUE(client_.waitIdle());
    informer.stop();
    t.join();
  }

  // What the informer asked for, in order.
  std::vector<ListOptions> listCalls() const {
    std::vector<ListOptions> out;
    for (const auto& c : client_.calls(Verb::kList)) out.push_back(c.list_options);
    return out;
  }
  std::vector<WatchOptions> watchCalls() const {
    std::vector<WatchOptions> out;
    for (const auto& c : client_.calls(Verb::kWatch)) out.push_back(c.watch_options);
    return out;
  }

  base::ManualClock clock_;
  FakeKube client_;  // no objects: the lists and watches are scripted
  Recorder recorder_;
};

TEST_F(InformerTest, ListsInPagesThenWatchesFromTheFirstPagesVersion) {
  client_.scriptList(listOf({pod("a", "n1"), pod("b", "n1")}, "10", "page2"));
  client_.scriptList(listOf({pod("c", "n2")}, "11"));
  auto informer = make({.page_size = 2});
  runToIdle(*informer);

  ASSERT_EQ(listCalls().size(), 2U);
  EXPECT_EQ(listCalls()[0].limit, 2);
  EXPECT_EQ(listCalls()[0].continue_token, "");
  EXPECT_EQ(listCalls()[1].continue_token, "page2");
  ASSERT_EQ(watchCalls().size(), 1U);
  EXPECT_EQ(watchCalls()[0].resource_version, "10");
  EXPECT_TRUE(watchCalls()[0].allow_watch_bookmarks);
  EXPECT_GE(watchCalls()[0].timeout_seconds, 300);
  EXPECT_LT(watchCalls()[0].timeout_seconds, 600);
  EXPECT_THAT(recorder_.take(), UnorderedElementsAre("add a", "add b", "add c"));
  EXPECT_TRUE(informer->synced());
  EXPECT_EQ(informer->size(), 3U);
  auto c = informer->get("default", "c");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node_name, "n2");
  EXPECT_EQ(informer->stats().lists, 1U);
}

// A controller woken by on_add reads synced() on its own thread: during the first list that is
// still false, so on_synced (after synced() turned true) is what tells it to look again.
TEST_F(InformerTest, OnSyncedFollowsEveryListOnceTheCacheIsSynced) {
  client_.scriptList(listOf({pod("a", "n1"), pod("b", "n1")}, "10"));
  client_.scriptWatch({.end = Error("watch: too old resource version", ErrorCode::kGone)});
  client_.scriptList(listOf({pod("a", "n1")}, "12"));
  std::mutex mu;
  std::vector<std::string> seen;
  Informer<PodRecord>* self = nullptr;
  auto note = [&](const std::string& what) {
    std::lock_guard lock(mu);
    seen.push_back(what + (self->synced() ? " (synced)" : " (not synced)"));
  };
  auto informer = std::make_unique<Informer<PodRecord>>(
      client_, clock_, resources::kPods, "",
      InformerOptions{.initial_backoff = milliseconds(1),
                      .max_backoff = milliseconds(4),
                      .short_watch = milliseconds(0)},
      decodePod,
      InformerHandlers<PodRecord>{
          .on_add = [&](const PodRecord& p) { note("add " + p.name); },
          .on_delete = [&](const PodRecord& p) { note("delete " + p.name); },
          .on_synced = [&] { note("listed"); }});
  self = informer.get();
  runToIdle(*informer);
  ASSERT_EQ(seen.size(), 5U);
  std::sort(seen.begin(), seen.begin() + 2);  // the adds come in the store's order
  EXPECT_EQ(seen,
            (std::vector<std::string>{"add a (not synced)", "add b (not synced)", "listed (synced)",
                                      "delete b (synced)", "listed (synced)"}));
}

TEST_F(InformerTest, WatchEventsUpdateTheCacheAndCallHandlersOnlyForRealChanges) {
  client_.scriptList(listOf({pod("a", "n1")}, "10"));
  Json annotated = pod("a", "n1", "12");
  annotated["metadata"]["annotations"] = {{"irrelevant", "x"}};
  Json terminating = pod("a", "n1", "13");
  terminating["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z";
  client_.scriptWatch({.events = {event(WatchEventType::kAdded, pod("b", "n2", "11")),
                                  event(WatchEventType::kModified, annotated),
                                  event(WatchEventType::kModified, terminating), bookmark("20"),
                                  event(WatchEventType::kDeleted, pod("b", "n2", "21"))}});
  auto informer = make();
  runToIdle(*informer);

  EXPECT_THAT(recorder_.take(), ElementsAre("add a", "add b", "update a", "delete b"));
  auto stats = informer->stats();
  EXPECT_EQ(stats.events, 4U);
  EXPECT_EQ(stats.unchanged, 1U);
  EXPECT_EQ(stats.bookmarks, 1U);
  EXPECT_EQ(stats.resource_version, "21");
  EXPECT_TRUE(informer->get("default", "a")->terminating());
  EXPECT_FALSE(informer->get("default", "b"));
  // The server ended the first stream normally: the next watch resumes from the last version.
  ASSERT_EQ(watchCalls().size(), 2U);
  EXPECT_EQ(watchCalls()[1].resource_version, "21");
  EXPECT_EQ(listCalls().size(), 1U);
}

TEST_F(InformerTest, GoneRelistsAndHandlersSeeWhatChangedMeanwhile) {
  client_.scriptList(listOf({pod("a", "n1"), pod("b", "n1"), pod("c", "n1")}, "10"));
  client_.scriptWatch({.end = Error("watch: too old resource version", ErrorCode::kGone)});
  Json moved = pod("b", "n2", "40");
  client_.scriptList(listOf({pod("a", "n1"), moved, pod("d", "n1")}, "50"));
  auto informer = make();
  runToIdle(*informer);

  auto seen = recorder_.take();
  ASSERT_EQ(seen.size(), 6U);
  EXPECT_THAT(std::vector(seen.begin(), seen.begin() + 3),
              UnorderedElementsAre("add a", "add b", "add c"));
  // The re-list: a unchanged, b moved, d new, c gone (deletes come last).
  EXPECT_THAT(std::vector(seen.begin() + 3, seen.end() - 1),
              UnorderedElementsAre("update b", "add d"));
  EXPECT_EQ(seen.back(), "delete c");
  auto stats = informer->stats();
  EXPECT_EQ(stats.lists, 2U);
  EXPECT_EQ(stats.relists_gone, 1U);
  EXPECT_EQ(stats.failures, 0U);
  ASSERT_EQ(watchCalls().size(), 2U);
  EXPECT_EQ(watchCalls()[1].resource_version, "50");
}

TEST_F(InformerTest, FailuresBackOffAndResumeFromTheLastVersionWithoutListing) {
  client_.scriptList(Error("list pods: connection refused", ErrorCode::kUnavailable));
  client_.scriptList(listOf({pod("a", "n1")}, "10"));
  client_.scriptWatch({.events = {event(WatchEventType::kAdded, pod("b", "n1", "11"))},
                       .end = Error("watch pods: connection reset", ErrorCode::kIo)});
  client_.scriptWatch({.end = Error("watch pods: 503", ErrorCode::kUnavailable)});
  auto informer = make();
  runToIdle(*informer);

  EXPECT_EQ(listCalls().size(), 2U);
  ASSERT_EQ(watchCalls().size(), 3U);
  EXPECT_EQ(watchCalls()[1].resource_version, "11");
  EXPECT_EQ(watchCalls()[2].resource_version, "11");
  auto stats = informer->stats();
  EXPECT_EQ(stats.failures, 3U);
  EXPECT_EQ(stats.last_error, "watch pods: 503");
  EXPECT_THAT(recorder_.errors, ElementsAre("list pods: connection refused",
                                            "watch pods: connection reset", "watch pods: 503"));
  EXPECT_EQ(informer->size(), 2U);
}

TEST_F(InformerTest, AStreamThatCannotBeDecodedIsFollowedByAListNotAResume) {
  // Found by the fault matrix: a watch answered with a line that never ends was resumed from
  // the same version, which replays the same stream. The cache never moved again, while each
  // new watch made it look connected (and the agent ready on a stale picture).
  client_.scriptList(listOf({pod("a", "n1")}, "5"));
  client_.scriptWatch(
      {.end = Error("watch pods: a watch event is longer than 8 MiB without a newline; "
                    "dropping the stream",
                    ErrorCode::kParse),
       .accepted = true});
  client_.scriptList(listOf({pod("a", "n1"), pod("b", "n1", "9")}, "9"));
  client_.scriptWatch({.end = Error("watch pods: 503", ErrorCode::kUnavailable)});
  auto informer = make();
  runToIdle(*informer);

  EXPECT_EQ(listCalls().size(), 2U);
  ASSERT_GE(watchCalls().size(), 2U);
  EXPECT_EQ(watchCalls()[0].resource_version, "5");
  EXPECT_EQ(watchCalls()[1].resource_version, "9");  // from the new list, not resumed at 5
  EXPECT_EQ(informer->size(), 2U);
  EXPECT_EQ(informer->stats().relists_gone, 0U);
}

TEST_F(InformerTest, AnExpiredContinueTokenRestartsTheList) {
  client_.scriptList(listOf({pod("a", "n1")}, "10", "t1"));
  client_.scriptList(Error("list pods: continue expired", ErrorCode::kGone));
  client_.scriptList(listOf({pod("a", "n1")}, "30", "t2"));
  client_.scriptList(listOf({pod("b", "n1")}, "30"));
  auto informer = make({.page_size = 1});
  runToIdle(*informer);

  ASSERT_EQ(listCalls().size(), 4U);
  EXPECT_EQ(listCalls()[2].continue_token, "");
  EXPECT_THAT(recorder_.take(), UnorderedElementsAre("add a", "add b"));
  EXPECT_EQ(watchCalls().at(0).resource_version, "30");
  EXPECT_EQ(informer->stats().failures, 0U);
}

TEST_F(InformerTest, MalformedObjectsAreReportedAndSkippedNeverFatal) {
  Json bad_type = pod("bad", "n1");
  bad_type["spec"]["nodeName"] = 7;
  Json nameless = {{"metadata", {{"namespace", "default"}}}};
  client_.scriptList(listOf({pod("a", "n1"), bad_type, nameless, "garbage"}, "10"));
  client_.scriptWatch({.events = {event(WatchEventType::kModified, bad_type),
                                  event(WatchEventType::kAdded, pod("b", "n1", "12"))}});
  auto informer = make();
  runToIdle(*informer);

  EXPECT_THAT(recorder_.take(), ElementsAre("add a", "add b"));
  EXPECT_EQ(informer->stats().parse_errors, 4U);
  ASSERT_EQ(recorder_.errors.size(), 4U);
  EXPECT_THAT(recorder_.errors[0],
              HasSubstr("list pods in all namespaces: parse Pod bad: spec.nodeName: expected "
                        "string, got number"));
  EXPECT_THAT(recorder_.errors[1], HasSubstr("object without metadata.name"));
  EXPECT_THAT(recorder_.errors[3], HasSubstr("watch pods in all namespaces: parse Pod bad"));
}

TEST_F(InformerTest, AResponseThatIsNotAListIsAFailureNotACrash) {
  client_.scriptList(Json{{"kind", "Status"}});
  client_.scriptList(Json{{"metadata", Json::object()}, {"items", Json::array()}});
  client_.scriptList(listOf({}, "5"));
  auto informer = make();
  runToIdle(*informer);

  EXPECT_THAT(recorder_.errors, ElementsAre(HasSubstr("response is not a List"),
                                            HasSubstr("response has no metadata.resourceVersion")));
  EXPECT_TRUE(informer->synced());
}

TEST_F(InformerTest, AStreamThatEndsAtOnceWithNothingInItBacksOff) {
  client_.scriptList(listOf({}, "5"));
  for (int i = 0; i < 3; ++i) client_.scriptWatch({});
  auto informer =
      std::make_unique<Informer<PodRecord>>(client_, clock_, resources::kPods, "",
                                            InformerOptions{.initial_backoff = milliseconds(1),
                                                            .max_backoff = milliseconds(2),
                                                            .short_watch = milliseconds(60000)},
                                            decodePod, recorder_.handlers());
  runToIdle(*informer);
  EXPECT_EQ(informer->stats().failures, 3U);
  EXPECT_THAT(recorder_.errors, ::testing::Each(HasSubstr("the server ended the stream at once")));
}

// Issue 24 defect 7: identical 3 s outages of a quiet resource took 1.2 -> 1.9 -> 4.0 -> 12.8 ->
// 26.6 s to recover, because only a watch with events reset the backoff. A watch the server
// accepted and that ran at least short_watch resets it too; connection failures (nothing
// accepted) and watches that broke at once still back off exponentially.
TEST_F(InformerTest, AnAcceptedQuietWatchThatBreaksStartsTheBackoffAfresh) {
  std::vector<int> backoffs;
  std::mutex backoffs_mu;
  auto informer =
      std::make_unique<Informer<PodRecord>>(client_, clock_, resources::kPods, "",
                                            InformerOptions{.initial_backoff = milliseconds(1),
                                                            .max_backoff = milliseconds(4),
                                                            .short_watch = milliseconds(1000),
                                                            .on_backoff =
                                                                [&](int failures, milliseconds) {
                                                                  std::lock_guard lock(backoffs_mu);
                                                                  backoffs.push_back(failures);
                                                                }},
                                            decodePod, recorder_.handlers());
  client_.scriptList(listOf({}, "5"));
  const auto ranFor = [this](milliseconds d) { return [this, d] { clock_.advance(d); }; };
  const Error reset("watch pods: connection reset", ErrorCode::kIo);
  const Error refused("watch pods: connection refused", ErrorCode::kUnavailable);
  // Three outages after quiet watches that ran 2 s each: the backoff starts afresh each time.
  for (int i = 0; i < 3; ++i) {
    client_.scriptWatch({.end = reset, .accepted = true, .before_end = ranFor(milliseconds(2000))});
  }
  // Refused connections (never accepted): exponential again.
  for (int i = 0; i < 3; ++i) client_.scriptWatch({.end = refused});
  // Accepted, but broke at once: still counted on.
  client_.scriptWatch({.end = reset, .accepted = true, .before_end = ranFor(milliseconds(10))});
  runToIdle(*informer);
  std::lock_guard lock(backoffs_mu);
  EXPECT_THAT(backoffs, ElementsAre(1, 1, 1, 2, 3, 4, 5));
}

TEST_F(InformerTest, StopEndsABackoffWaitAndAnUnsyncedWaitForSync) {
  // Every list fails and the backoff is long: stop() must cut the wait short.
  client_.inject({.verb = Verb::kList,
                  .error = Error("list: no script left", ErrorCode::kUnavailable),
                  .times = -1});
  auto informer = std::make_unique<Informer<PodRecord>>(
      client_, clock_, resources::kPods, "",
      InformerOptions{.initial_backoff = std::chrono::seconds(60),
                      .max_backoff = std::chrono::seconds(60)},
      decodePod, recorder_.handlers());
  std::thread t([&] { informer->run(); });
  EXPECT_FALSE(informer->waitForSync(milliseconds(50)));
  const auto start = std::chrono::steady_clock::now();
  informer->stop();
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(informer->synced());
  EXPECT_GE(informer->stats().failures, 1U);
  EXPECT_FALSE(informer->stats().connected);
}

TEST_F(InformerTest, StopBeforeRunReturnsAtOnce) {
  auto informer = make();
  informer->stop();
  informer->run();
  EXPECT_TRUE(listCalls().empty());
}

TEST(InformerKeyTest, KeysAreNamespaceSlashNameOrTheName) {
  EXPECT_EQ(objectKey("kube-system", "etcd-a"), "kube-system/etcd-a");
  EXPECT_EQ(objectKey("", "node-a"), "node-a");
  EXPECT_EQ(*objectKey(Json{{"metadata", {{"name", "n"}}}}), "n");
  EXPECT_EQ(*objectKey(Json{{"metadata", {{"name", "p"}, {"namespace", "x"}}}}), "x/p");
  EXPECT_FALSE(objectKey(Json{{"metadata", {{"name", ""}}}}));
  EXPECT_FALSE(objectKey(Json::array()));
}

}  // namespace
}  // namespace ekco::kube
