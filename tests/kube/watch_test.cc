#include "kube/watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "kube/decode/json_depth.h"
#include "kube/rest_client.h"
#include "tests/fakes/fake_transport.h"

namespace ekco::kube {
namespace {

using base::ErrorCode;
using ::testing::ElementsAre;
using testing::FakeTransport;
using ::testing::HasSubstr;

constexpr const char* kStream =
    R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"11"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"12"}}})"
    "\r\n\n"
    R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"15"}}})"
    "\n"
    R"({"type":"DELETED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"16"}}})";

// "ADDED a 11", "BOOKMARK 15", ...
std::string describe(const WatchEvent& e) {
  static const char* kNames[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
  std::string out = kNames[static_cast<int>(e.type)];
  const auto& meta = e.object["metadata"];
  if (meta.contains("name")) out += " " + meta["name"].get<std::string>();
  return out + " " + meta["resourceVersion"].get<std::string>();
}

TEST(WatchDecoder, DecodesEventsSplitAcrossArbitraryChunks) {
  for (std::size_t size : {1u, 2u, 7u, 64u, 10000u}) {
    WatchDecoder decoder("watch pods");
    std::vector<std::string> seen;
    bool keep_going = true;
    const std::string_view all(kStream);
    for (std::size_t i = 0; i < all.size(); i += size) {
      ASSERT_TRUE(decoder.feed(
          all.substr(i, size),
          [&](const WatchEvent& e) {
            seen.push_back(describe(e));
            return true;
          },
          keep_going));
    }
    ASSERT_TRUE(decoder.finish(
        [&](const WatchEvent& e) {
          seen.push_back(describe(e));
          return true;
        },
        keep_going));
    EXPECT_THAT(seen, ElementsAre("ADDED a 11", "MODIFIED a 12", "BOOKMARK 15", "DELETED a 16"))
        << "chunk size " << size;
  }
}

TEST(WatchDecoder, AnErrorEventWithExpiredIsGone) {
  WatchDecoder decoder("watch pods");
  bool keep_going = true;
  auto fed = decoder.feed(
      R"js({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (40)","reason":"Expired","code":410}})js"
      "\n",
      [](const WatchEvent&) { return true; }, keep_going);
  ASSERT_FALSE(fed);
  EXPECT_EQ(fed.error().code(), ErrorCode::kGone);
  EXPECT_EQ(fed.error().message(), "watch pods: too old resource version: 5 (40) (Expired, 410)");
}

TEST(WatchDecoder, MalformedLinesAreParseErrors) {
  for (const char* bad : {"not json\n", "[1]\n",
                          R"({"type":"ADDED"})"
                          "\n",
                          R"({"type":"SOMETHING","object":{}})"
                          "\n"}) {
    WatchDecoder decoder("watch pods");
    bool keep_going = true;
    auto fed = decoder.feed(
        bad, [](const WatchEvent&) { return true; }, keep_going);
    ASSERT_FALSE(fed) << bad;
    EXPECT_EQ(fed.error().code(), ErrorCode::kParse) << bad;
  }
}

// Issue 24 defect 11: a line that never ends is refused once it passes the bound, and what the
// decoder holds never grows much past it (an endless line grew the agent to 373 MiB).
TEST(WatchDecoder, ALineLongerThanTheBoundIsRefusedAndDropped) {
  WatchDecoder decoder("watch pods", 1024);
  bool keep_going = true;
  const auto handler = [](const WatchEvent&) { return true; };
  const std::string chunk(300, 'x');
  base::Status fed = base::ok();
  int chunks = 0;
  while (fed && chunks < 100) {
    fed = decoder.feed(chunk, handler, keep_going);
    ++chunks;
  }
  ASSERT_FALSE(fed);
  EXPECT_EQ(chunks, 4);  // 1,200 bytes held > 1,024
  EXPECT_EQ(fed.error().code(), ErrorCode::kParse);
  EXPECT_THAT(fed.error().message(),
              HasSubstr("watch pods: a watch event is longer than 1 KiB without a newline"));
  // Complete lines up to the bound still decode, and the default bound is 8 MiB.
  WatchDecoder ok("watch pods", 1024);
  std::vector<std::string> seen;
  ASSERT_TRUE(ok.feed(
      std::string(kStream) + "\n",
      [&](const WatchEvent& e) {
        seen.push_back(describe(e));
        return true;
      },
      keep_going));
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(WatchDecoder::kMaxLineBytes, std::size_t{8} << 20);
}

// Issue 34 Medium 8: every watch bounded its own line, but a server sending endless lines to a
// dozen watches at once took the agent past its memory limit. The lines of all streams together
// stay within one budget: the stream the budget cannot hold is dropped, and gives its part back.
TEST(WatchDecoder, TheLinesOfEveryStreamTogetherStayWithinTheBudget) {
  base::MemoryBudget budget(std::size_t{64} << 10);
  std::vector<std::unique_ptr<WatchDecoder>> streams;
  for (int i = 0; i < 8; ++i) {
    streams.push_back(
        std::make_unique<WatchDecoder>("watch pods " + std::to_string(i), 1 << 20, &budget));
  }
  const std::string chunk(4096, 'x');  // never a newline
  const auto handler = [](const WatchEvent&) { return true; };
  std::vector<bool> dropped(streams.size(), false);
  std::vector<std::string> errors;
  for (int round = 0; round < 64; ++round) {
    for (std::size_t i = 0; i < streams.size(); ++i) {
      if (dropped[i]) continue;
      bool keep_going = true;
      auto fed = streams[i]->feed(chunk, handler, keep_going);
      if (!fed) {
        EXPECT_EQ(fed.error().code(), ErrorCode::kIo);
        errors.push_back(fed.error().message());
        dropped[i] = true;
      }
      ASSERT_LE(budget.used(), budget.limit());
    }
  }
  ASSERT_FALSE(errors.empty());
  EXPECT_THAT(errors.front(), HasSubstr(": the agent's buffer budget (64 KiB, "));
  EXPECT_THAT(errors.front(), HasSubstr("cannot hold more of a watch event; dropping the stream"));
  EXPECT_LE(budget.peak(), budget.limit());
  EXPECT_GT(budget.refusals(), 0u);
  streams.clear();
  EXPECT_EQ(budget.used(), 0u);

  // With the pressure gone, a stream decodes again, and after a long line it keeps no long
  // buffer (nor its part of the budget).
  base::MemoryBudget roomy(std::size_t{4} << 20);
  WatchDecoder decoder("watch pods", 1 << 20, &roomy);
  const std::string long_line =
      R"({"type":"ADDED","object":{"metadata":{"name":"big","resourceVersion":"2"},"pad":")" +
      std::string(std::size_t{512} << 10, 'p') + R"("}})" + "\n";
  std::vector<std::string> seen;
  bool keep_going = true;
  ASSERT_TRUE(decoder.feed(
      long_line + std::string(kStream).substr(0, 20),
      [&](const WatchEvent& e) {
        seen.push_back(describe(e));
        return true;
      },
      keep_going));
  EXPECT_THAT(seen, ElementsAre("ADDED big 2"));
  EXPECT_LT(roomy.used(), std::size_t{256} << 10);
}

// Found by tests/fuzz/list_watch_fuzz.cc: the malformed line was copied raw into the message, so
// a server could break it over lines or send terminal escapes through it.
TEST(WatchDecoder, AMalformedLineIsQuotedAndEscapedInItsOneLineMessage) {
  WatchDecoder decoder("watch pods");
  bool keep_going = true;
  auto fed = decoder.feed(
      "{\"type\":\"ADDED\",\"obj\x13"
      "ct\":{}}\r\x1b[2J\n",
      [](const WatchEvent&) { return true; }, keep_going);
  ASSERT_FALSE(fed);
  EXPECT_EQ(
      fed.error().message(),
      R"(watch pods: watch event is not a JSON object: "{\"type\":\"ADDED\",\"obj\x13ct\":{}}\r\x1b[2J")");
  WatchDecoder long_line("watch pods");
  fed = long_line.feed(
      std::string(200, 'x') + "\n", [](const WatchEvent&) { return true; }, keep_going);
  ASSERT_FALSE(fed);
  EXPECT_EQ(fed.error().message(),
            "watch pods: watch event is not a JSON object: \"" + std::string(120, 'x') + "...\"");
}

// Found with tests/fuzz/list_watch_fuzz.cc (a 60 KB input): copying the event's object recursed
// once per level and overflowed the stack. Lines nested deeper than kMaxJsonDepth are refused.
TEST(WatchDecoder, ALineNestedTooDeeplyIsAParseErrorNotACrash) {
  auto line = [](int depth) {
    return R"({"type":"ADDED","object":{"metadata":{"name":"a"},"x":)" + std::string(depth, '[') +
           std::string(depth, ']') + "}}\n";
  };
  WatchDecoder decoder("watch pods");
  bool keep_going = true;
  int events = 0;
  auto handler = [&](const WatchEvent&) { return ++events > 0; };
  ASSERT_TRUE(decoder.feed(line(kMaxJsonDepth - 2), handler, keep_going));
  EXPECT_EQ(events, 1);
  auto fed = decoder.feed(line(100000), handler, keep_going);
  ASSERT_FALSE(fed);
  EXPECT_EQ(fed.error().code(), ErrorCode::kParse);
  EXPECT_EQ(fed.error().message(), "watch pods: watch event nested deeper than 1000 levels");
  EXPECT_EQ(events, 1);
}

struct Fixture {
  FakeTransport transport;
  base::ManualClock clock;
  RestClient client{transport, clock, {.sleep = [](std::chrono::milliseconds) {}}};
};

TEST(RestClientWatch, SendsTheWatchQueryAndDeliversEveryEvent) {
  Fixture f;
  f.transport.reply(200, kStream);
  std::vector<std::string> seen;
  auto watched =
      f.client.watch(resources::kPods, "default",
                     {.resource_version = "10", .timeout_seconds = 60, .label_selector = "app=x"},
                     [&](const WatchEvent& e) {
                       seen.push_back(describe(e));
                       return true;
                     });
  ASSERT_TRUE(watched) << watched.error().message();
  EXPECT_THAT(seen, ElementsAre("ADDED a 11", "MODIFIED a 12", "BOOKMARK 15", "DELETED a 16"));
  const auto request = f.transport.last();
  EXPECT_EQ(request.target,
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion=10"
            "&allowWatchBookmarks=true&timeoutSeconds=60&labelSelector=app%3Dx");
  EXPECT_EQ(request.timeout, std::chrono::seconds(90));
}

TEST(RestClientWatch, TheHandlerCanStopTheWatch) {
  Fixture f;
  f.transport.reply(200, kStream);
  int seen = 0;
  auto watched = f.client.watch(resources::kPods, "", {}, [&](const WatchEvent&) {
    ++seen;
    return false;
  });
  ASSERT_TRUE(watched) << watched.error().message();
  EXPECT_EQ(seen, 1);
}

TEST(RestClientWatch, A410ResponseIsGone) {
  Fixture f;
  f.transport.reply(410, R"({"kind":"Status","message":"too old","reason":"Expired","code":410})");
  auto watched = f.client.watch(resources::kPods, "", {.resource_version = "1"},
                                [](const WatchEvent&) { return true; });
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kGone);
  EXPECT_THAT(watched.error().message(), HasSubstr("watch pods: too old (Expired, 410)"));
  EXPECT_EQ(f.transport.requests().size(), 1u);
}

TEST(RestClientWatch, ACancelledTokenEndsTheWatchAsCancelled) {
  Fixture f;
  f.transport.reply(200, kStream);
  CancelToken cancel;
  cancel.cancel();
  auto watched = f.client.watch(
      resources::kPods, "", {}, [](const WatchEvent&) { return true; }, &cancel);
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kCancelled);
}

}  // namespace
}  // namespace ekco::kube
