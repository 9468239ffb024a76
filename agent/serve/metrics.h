// A small Prometheus registry: counters, gauges and histograms with fixed label names, rendered
// in the text exposition format 0.0.4 for the health socket's GET /metrics.
//
// Families are registered once (at start-up) and return a handle owned by the registry, valid
// as long as the registry lives. Every method of the registry and of the handles is thread-safe:
// controllers record from their threads while the health server renders.
//
// A series is one set of label values. Its values are given in the order of the family's label
// names; a call with the wrong number of values is a programming error and is ignored (the
// sample is dropped, nothing throws). A family without labels always shows its one series (0
// until recorded); a labelled family shows the series recorded so far, and nothing at all before
// the first one, as the Go client does.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::agent {

// Label values of one series, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

// Reconcile durations in seconds, from a cheap no-op (5 ms) to a drain or an upgrade step (60 s).
inline const std::vector<double> kReconcileDurationBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

class MetricFamily;

// Only goes up (restarts reset it, which Prometheus's rate() understands).
class Counter {
 public:
  // Adds `by` (default 1). A negative or NaN `by` is ignored: counters never go down.
  void inc(const LabelValues& labels = {}, double by = 1) const;
  // The current value of one series; 0 when it has not been recorded.
  double value(const LabelValues& labels = {}) const;

 private:
  friend class MetricsRegistry;
  explicit Counter(MetricFamily* family) : family_(family) {}
  MetricFamily* family_ = nullptr;
};

// A value that goes up and down (leader state, cache size).
class Gauge {
 public:
  void set(const LabelValues& labels, double value) const;
  void set(double value) const { set({}, value); }
  void add(const LabelValues& labels, double by) const;
  // Removes one series, e.g. a cache that no longer exists. Removing an absent series is not an
  // error.
  void remove(const LabelValues& labels) const;
  double value(const LabelValues& labels = {}) const;

 private:
  friend class MetricsRegistry;
  explicit Gauge(MetricFamily* family) : family_(family) {}
  MetricFamily* family_ = nullptr;
};

// Counts observations into fixed buckets (upper bounds, inclusive), plus their sum and count.
class Histogram {
 public:
  void observe(const LabelValues& labels, double value) const;
  void observe(double value) const { observe({}, value); }
  // Observations of one series so far (0 when none).
  std::uint64_t count(const LabelValues& labels = {}) const;
  double sum(const LabelValues& labels = {}) const;

 private:
  friend class MetricsRegistry;
  explicit Histogram(MetricFamily* family) : family_(family) {}
  MetricFamily* family_ = nullptr;
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registration fails with kInvalidArgument when the name does not match
  // [a-zA-Z_:][a-zA-Z0-9_:]*, a label name does not match [a-zA-Z_][a-zA-Z0-9_]*, starts with
  // "__" (reserved by Prometheus) or repeats; with kAlreadyExists when the name is taken. The
  // returned pointer is owned by the registry.
  [[nodiscard]] base::Result<const Counter*> counter(std::string name, std::string help,
                                                     std::vector<std::string> label_names = {});
  [[nodiscard]] base::Result<const Gauge*> gauge(std::string name, std::string help,
                                                 std::vector<std::string> label_names = {});
  // `buckets` are the finite upper bounds, strictly increasing and non-empty; "+Inf" is added.
  // A histogram may not have a label named "le".
  [[nodiscard]] base::Result<const Histogram*> histogram(std::string name, std::string help,
                                                         std::vector<std::string> label_names,
                                                         std::vector<double> buckets);

  // The text exposition format 0.0.4: families sorted by name, each with "# HELP" and "# TYPE",
  // series sorted by label values; histograms as _bucket{le="..."} (cumulative), _sum, _count.
  // HELP text escapes '\' and newline; label values escape '\', '"' and newline.
  std::string render() const;

 private:
  [[nodiscard]] base::Result<MetricFamily*> add(std::unique_ptr<MetricFamily> family);

  mutable std::mutex mu_;  // families_ (each family locks its own series)
  std::map<std::string, std::unique_ptr<MetricFamily>, std::less<>> families_;
};

// "0.005", "1", "2.5", "+Inf", "-Inf", "NaN": the shortest text that reads back as the same
// double, as Prometheus sample values and `le` labels are written.
std::string formatMetricValue(double value);

}  // namespace ekco::agent
