#include "agent/serve/metrics.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ekco::agent {
namespace {

using ::testing::HasSubstr;

TEST(Metrics, CounterRendersHelpTypeAndSeriesSortedByLabelValues) {
  MetricsRegistry registry;
  auto c = registry.counter("ekco_reconcile_total", "Reconciles run.", {"controller", "result"});
  ASSERT_TRUE(c) << c.error().message();
  (*c)->inc({"purge-nodes", "success"});
  (*c)->inc({"clear-nodes", "success"}, 2);
  (*c)->inc({"clear-nodes", "error"});
  (*c)->inc({"clear-nodes", "success"}, 0.5);
  EXPECT_EQ(registry.render(),
            "# HELP ekco_reconcile_total Reconciles run.\n"
            "# TYPE ekco_reconcile_total counter\n"
            "ekco_reconcile_total{controller=\"clear-nodes\",result=\"error\"} 1\n"
            "ekco_reconcile_total{controller=\"clear-nodes\",result=\"success\"} 2.5\n"
            "ekco_reconcile_total{controller=\"purge-nodes\",result=\"success\"} 1\n");
  EXPECT_EQ((*c)->value({"clear-nodes", "success"}), 2.5);
  EXPECT_EQ((*c)->value({"nobody", "success"}), 0);
}

TEST(Metrics, CounterNeverGoesDown) {
  MetricsRegistry registry;
  auto c = registry.counter("ekco_things_total", "Things.");
  ASSERT_TRUE(c);
  (*c)->inc();
  (*c)->inc({}, -5);
  (*c)->inc({}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ((*c)->value(), 1);
}

TEST(Metrics, UnlabelledFamiliesShowZeroAndLabelledOnesNothingBeforeTheFirstSample) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.counter("b_total", "B."));
  ASSERT_TRUE(registry.gauge("a_gauge", "A."));
  ASSERT_TRUE(registry.counter("c_total", "C.", {"kind"}));
  EXPECT_EQ(registry.render(),
            "# HELP a_gauge A.\n"
            "# TYPE a_gauge gauge\n"
            "a_gauge 0\n"
            "# HELP b_total B.\n"
            "# TYPE b_total counter\n"
            "b_total 0\n");
}

TEST(Metrics, GaugeSetsAddsAndRemovesSeries) {
  MetricsRegistry registry;
  auto g = registry.gauge("ekco_cache_objects", "Objects in each informer cache.", {"cache"});
  ASSERT_TRUE(g);
  (*g)->set({"pods"}, 150000);
  (*g)->set({"nodes"}, 5);
  (*g)->add({"nodes"}, -1);
  (*g)->set({"leases"}, 0.25);
  (*g)->set({"gone"}, 1);
  (*g)->remove({"gone"});
  (*g)->remove({"never-there"});
  EXPECT_EQ(registry.render(),
            "# HELP ekco_cache_objects Objects in each informer cache.\n"
            "# TYPE ekco_cache_objects gauge\n"
            "ekco_cache_objects{cache=\"leases\"} 0.25\n"
            "ekco_cache_objects{cache=\"nodes\"} 4\n"
            "ekco_cache_objects{cache=\"pods\"} 150000\n");
  auto leader = registry.gauge("ekco_is_leader", "Leader.");
  ASSERT_TRUE(leader);
  (*leader)->set(1);
  EXPECT_EQ((*leader)->value(), 1);
  (*leader)->remove({});  // the one series of an unlabelled family stays
  EXPECT_THAT(registry.render(), HasSubstr("\nekco_is_leader 1\n"));
}

TEST(Metrics, HistogramRendersCumulativeBucketsSumAndCount) {
  MetricsRegistry registry;
  auto h = registry.histogram("ekco_reconcile_duration_seconds", "How long one reconcile took.",
                              {"controller"}, {0.25, 1, 10});
  ASSERT_TRUE(h) << h.error().message();
  (*h)->observe({"clear-nodes"}, 0.125);
  (*h)->observe({"clear-nodes"}, 0.25);  // upper bounds are inclusive
  (*h)->observe({"clear-nodes"}, 2);
  (*h)->observe({"clear-nodes"}, 30);
  (*h)->observe({"clear-nodes"}, std::nan(""));  // ignored
  EXPECT_EQ(registry.render(),
            "# HELP ekco_reconcile_duration_seconds How long one reconcile took.\n"
            "# TYPE ekco_reconcile_duration_seconds histogram\n"
            "ekco_reconcile_duration_seconds_bucket{controller=\"clear-nodes\",le=\"0.25\"} 2\n"
            "ekco_reconcile_duration_seconds_bucket{controller=\"clear-nodes\",le=\"1\"} 2\n"
            "ekco_reconcile_duration_seconds_bucket{controller=\"clear-nodes\",le=\"10\"} 3\n"
            "ekco_reconcile_duration_seconds_bucket{controller=\"clear-nodes\",le=\"+Inf\"} 4\n"
            "ekco_reconcile_duration_seconds_sum{controller=\"clear-nodes\"} 32.375\n"
            "ekco_reconcile_duration_seconds_count{controller=\"clear-nodes\"} 4\n");
  EXPECT_EQ((*h)->count({"clear-nodes"}), 4u);
  EXPECT_EQ((*h)->sum({"clear-nodes"}), 32.375);
}

TEST(Metrics, UnlabelledHistogramStartsEmptyWithTheDefaultBuckets) {
  MetricsRegistry registry;
  auto h = registry.histogram("d_seconds", "D.", {}, kReconcileDurationBuckets);
  ASSERT_TRUE(h);
  EXPECT_EQ(registry.render(),
            "# HELP d_seconds D.\n"
            "# TYPE d_seconds histogram\n"
            "d_seconds_bucket{le=\"0.005\"} 0\n"
            "d_seconds_bucket{le=\"0.01\"} 0\n"
            "d_seconds_bucket{le=\"0.025\"} 0\n"
            "d_seconds_bucket{le=\"0.05\"} 0\n"
            "d_seconds_bucket{le=\"0.1\"} 0\n"
            "d_seconds_bucket{le=\"0.25\"} 0\n"
            "d_seconds_bucket{le=\"0.5\"} 0\n"
            "d_seconds_bucket{le=\"1\"} 0\n"
            "d_seconds_bucket{le=\"2.5\"} 0\n"
            "d_seconds_bucket{le=\"5\"} 0\n"
            "d_seconds_bucket{le=\"10\"} 0\n"
            "d_seconds_bucket{le=\"30\"} 0\n"
            "d_seconds_bucket{le=\"60\"} 0\n"
            "d_seconds_bucket{le=\"+Inf\"} 0\n"
            "d_seconds_sum 0\n"
            "d_seconds_count 0\n");
}

TEST(Metrics, EscapesLabelValuesAndHelpText) {
  MetricsRegistry registry;
  auto c = registry.counter("ekco_errors_total", "Errors by message.\nA \\ backslash.", {"msg"});
  ASSERT_TRUE(c);
  (*c)->inc({"say \"hi\"\nC:\\dir"});
  EXPECT_EQ(registry.render(),
            "# HELP ekco_errors_total Errors by message.\\nA \\\\ backslash.\n"
            "# TYPE ekco_errors_total counter\n"
            "ekco_errors_total{msg=\"say \\\"hi\\\"\\nC:\\\\dir\"} 1\n");
}

TEST(Metrics, WrongNumberOfLabelValuesIsIgnored) {
  MetricsRegistry registry;
  auto c = registry.counter("x_total", "X.", {"a", "b"});
  ASSERT_TRUE(c);
  (*c)->inc({"only-one"});
  (*c)->inc({});
  (*c)->inc({"1", "2", "3"});
  EXPECT_EQ(registry.render(), "");
}

TEST(Metrics, FormatsSpecialValues) {
  EXPECT_EQ(formatMetricValue(1), "1");
  EXPECT_EQ(formatMetricValue(0.005), "0.005");
  EXPECT_EQ(formatMetricValue(-2.5), "-2.5");
  EXPECT_EQ(formatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(formatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(formatMetricValue(std::nan("")), "NaN");
}

TEST(Metrics, RejectsInvalidNamesAndDefinitions) {
  MetricsRegistry registry;
  for (const char* bad : {"", "1abc", "ekco-reconciles", "ekco reconciles", "é"}) {
    auto c = registry.counter(bad, "Bad.");
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().code(), base::ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(registry.counter("ok:recording_rule_total", "Colons are allowed."));
  EXPECT_TRUE(registry.counter("_underscore", "Leading underscore."));
  for (const char* bad_label : {"", "a:b", "9x", "__reserved", "with-dash"}) {
    auto g = registry.gauge("g", "G.", {bad_label});
    ASSERT_FALSE(g) << bad_label;
    EXPECT_EQ(g.error().code(), base::ErrorCode::kInvalidArgument) << bad_label;
  }
  EXPECT_EQ(registry.gauge("g", "G.", {"a", "a"}).error().code(),
            base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry.histogram("h", "H.", {"le"}, {1}).error().code(),
            base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry.histogram("h", "H.", {}, {}).error().code(),
            base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry.histogram("h", "H.", {}, {1, 1}).error().code(),
            base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry.histogram("h", "H.", {}, {2, 1}).error().code(),
            base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry.histogram("h", "H.", {}, {1, std::numeric_limits<double>::infinity()})
                .error()
                .code(),
            base::ErrorCode::kInvalidArgument);
  EXPECT_TRUE(registry.histogram("h", "H.", {}, {1, 2}));
}

TEST(Metrics, RejectsADuplicateName) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.counter("ekco_x", "X."));
  auto again = registry.gauge("ekco_x", "X again.");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), base::ErrorCode::kAlreadyExists);
}

TEST(Metrics, ConcurrentRecordingAndRenderingLoseNothing) {
  MetricsRegistry registry;
  auto c = registry.counter("c_total", "C.", {"worker"});
  auto g = registry.gauge("g", "G.");
  auto h = registry.histogram("h_seconds", "H.", {"worker"}, {0.5, 1});
  ASSERT_TRUE(c && g && h);
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string worker = std::to_string(t % 2);
      for (int i = 0; i < kIterations; ++i) {
        (*c)->inc({worker});
        (*g)->add({}, 1);
        (*h)->observe({worker}, 0.75);
        if (i % 200 == 0) (void)registry.render();
      }
    });
  }
  // Registering while others record is allowed too.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(registry.counter("late_" + std::to_string(i), "L."));
  for (auto& th : threads) th.join();
  EXPECT_EQ((*c)->value({"0"}) + (*c)->value({"1"}), kThreads * kIterations);
  EXPECT_EQ((*g)->value(), kThreads * kIterations);
  EXPECT_EQ((*h)->count({"0"}) + (*h)->count({"1"}),
            static_cast<std::uint64_t>(kThreads * kIterations));
  EXPECT_THAT(registry.render(), HasSubstr("h_seconds_bucket{worker=\"0\",le=\"1\"} " +
                                           std::to_string(kThreads / 2 * kIterations) + "\n"));
}

}  // namespace
}  // namespace ekco::agent
