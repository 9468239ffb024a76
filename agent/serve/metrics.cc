#include "agent/serve/metrics.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;

enum class MetricType { kCounter, kGauge, kHistogram };

// One family's definition and series. Its own mutex keeps recording in one family from waiting
// on another.
class MetricFamily {
 public:
  struct Series {
    double value = 0;                      // counter, gauge
    std::vector<std::uint64_t> buckets{};  // histogram: per bucket (not cumulative), +Inf last
    double sum = 0;
    std::uint64_t count = 0;
  };

  MetricFamily(MetricType type, std::string name, std::string help,
               std::vector<std::string> label_names, std::vector<double> bounds)
      : type_(type),
        name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {
    // A family without labels shows its one series from the start.
    if (label_names_.empty()) series_.emplace(LabelValues{}, newSeries());
  }

  const std::string& name() const { return name_; }

  // Runs fn on the series of `labels` (created when absent) under the lock; ignores a wrong
  // number of label values.
  template <typename Fn>
  void update(const LabelValues& labels, Fn&& fn) {
    if (labels.size() != label_names_.size()) return;
    std::lock_guard lock(mu_);
    auto it = series_.find(labels);
    if (it == series_.end()) it = series_.emplace(labels, newSeries()).first;
    fn(it->second);
  }

  // A copy of one series; an empty series when absent.
  Series get(const LabelValues& labels) const {
    std::lock_guard lock(mu_);
    auto it = series_.find(labels);
    return it == series_.end() ? newSeries() : it->second;
  }

  void erase(const LabelValues& labels) {
    if (label_names_.empty()) return;  // the one series of an unlabelled family stays
    std::lock_guard lock(mu_);
    series_.erase(labels);
  }

  const std::vector<double>& bounds() const { return bounds_; }

  void render(std::string& out) const;

  std::unique_ptr<Counter> counter{};
  std::unique_ptr<Gauge> gauge{};
  std::unique_ptr<Histogram> histogram{};

 private:
  Series newSeries() const {
    Series s;
    if (type_ == MetricType::kHistogram) s.buckets.assign(bounds_.size() + 1, 0);
    return s;
  }

  // `name{a="x",b="y"}` (with an extra le="..." for buckets) or just `name`.
  void appendSeriesName(std::string& out, std::string_view suffix, const LabelValues& values,
                        const std::string* le) const;

  const MetricType type_;
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<LabelValues, Series> series_;
};

namespace {

bool validMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

bool validLabelName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

base::Status checkDefinition(const std::string& name, const std::vector<std::string>& labels) {
  if (!validMetricName(name)) {
    return Error(fmt::format("metric name \"{}\" does not match [a-zA-Z_:][a-zA-Z0-9_:]*", name),
                 ErrorCode::kInvalidArgument);
  }
  std::set<std::string_view> seen;
  for (const std::string& label : labels) {
    if (!validLabelName(label)) {
      return Error(fmt::format("metric {}: label name \"{}\" does not match [a-zA-Z_][a-zA-Z0-9_]*",
                               name, label),
                   ErrorCode::kInvalidArgument);
    }
    if (label.rfind("__", 0) == 0) {
      return Error(
          fmt::format("metric {}: label name \"{}\" is reserved (starts with __)", name, label),
          ErrorCode::kInvalidArgument);
    }
    if (!seen.insert(label).second) {
      return Error(fmt::format("metric {}: label name \"{}\" repeats", name, label),
                   ErrorCode::kInvalidArgument);
    }
  }
  return base::ok();
}

// HELP text: backslash and newline are escaped.
std::string escapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Label values: backslash, double quote and newline are escaped.
void appendLabelValue(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

std::string_view typeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string formatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // fmt's "{}" is the shortest round-trip form: 1 → "1", 0.005 → "0.005", 1e+16 → "1e+16".
  return fmt::format("{}", value);
}

void MetricFamily::appendSeriesName(std::string& out, std::string_view suffix,
                                    const LabelValues& values, const std::string* le) const {
  out += name_;
  out += suffix;
  if (values.empty() && le == nullptr) return;
  out += '{';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += label_names_[i];
    out += "=\"";
    appendLabelValue(out, values[i]);
    out += '"';
  }
  if (le != nullptr) {
    if (!values.empty()) out += ',';
    out += "le=\"";
    out += *le;
    out += '"';
  }
  out += '}';
}

void MetricFamily::render(std::string& out) const {
  std::lock_guard lock(mu_);
  if (series_.empty()) return;
  out +=
      fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, escapeHelp(help_), name_, typeName(type_));
  for (const auto& [labels, s] : series_) {
    if (type_ != MetricType::kHistogram) {
      appendSeriesName(out, "", labels, nullptr);
      out += ' ';
      out += formatMetricValue(s.value);
      out += '\n';
      continue;
    }
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < s.buckets.size(); ++i) {
      cumulative += s.buckets[i];
      const std::string le = i < bounds_.size() ? formatMetricValue(bounds_[i]) : "+Inf";
      appendSeriesName(out, "_bucket", labels, &le);
      out += fmt::format(" {}\n", cumulative);
    }
    appendSeriesName(out, "_sum", labels, nullptr);
    out += ' ';
    out += formatMetricValue(s.sum);
    out += '\n';
    appendSeriesName(out, "_count", labels, nullptr);
    out += fmt::format(" {}\n", s.count);
  }
}

void Counter::inc(const LabelValues& labels, double by) const {
  if (!(by >= 0)) return;  // negative or NaN
  family_->update(labels, [by](MetricFamily::Series& s) { s.value += by; });
}

double Counter::value(const LabelValues& labels) const { return family_->get(labels).value; }

void Gauge::set(const LabelValues& labels, double value) const {
  family_->update(labels, [value](MetricFamily::Series& s) { s.value = value; });
}

void Gauge::add(const LabelValues& labels, double by) const {
  family_->update(labels, [by](MetricFamily::Series& s) { s.value += by; });
}

void Gauge::remove(const LabelValues& labels) const { family_->erase(labels); }

double Gauge::value(const LabelValues& labels) const { return family_->get(labels).value; }

void Histogram::observe(const LabelValues& labels, double value) const {
  if (std::isnan(value)) return;
  const std::vector<double>& bounds = family_->bounds();
  // The first bucket whose upper bound is >= value (bounds are inclusive); +Inf when none.
  const auto index = static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  family_->update(labels, [index, value](MetricFamily::Series& s) {
    ++s.buckets[index];
    s.sum += value;
    ++s.count;
  });
}

std::uint64_t Histogram::count(const LabelValues& labels) const {
  return family_->get(labels).count;
}

double Histogram::sum(const LabelValues& labels) const { return family_->get(labels).sum; }

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

Result<MetricFamily*> MetricsRegistry::add(std::unique_ptr<MetricFamily> family) {
  std::lock_guard lock(mu_);
  const std::string& name = family->name();
  if (families_.count(name) > 0) {
    return Error(fmt::format("metric {} is already registered", name), ErrorCode::kAlreadyExists);
  }
  MetricFamily* raw = family.get();
  families_.emplace(name, std::move(family));
  return raw;
}

Result<const Counter*> MetricsRegistry::counter(std::string name, std::string help,
                                                std::vector<std::string> label_names) {
  EKCO_TRY(checkDefinition(name, label_names));
  auto family =
      std::make_unique<MetricFamily>(MetricType::kCounter, std::move(name), std::move(help),
                                     std::move(label_names), std::vector<double>{});
  family->counter.reset(new Counter(family.get()));
  auto added = add(std::move(family));
  EKCO_TRY(added);
  return static_cast<const Counter*>((*added)->counter.get());
}

Result<const Gauge*> MetricsRegistry::gauge(std::string name, std::string help,
                                            std::vector<std::string> label_names) {
  EKCO_TRY(checkDefinition(name, label_names));
  auto family = std::make_unique<MetricFamily>(MetricType::kGauge, std::move(name), std::move(help),
                                               std::move(label_names), std::vector<double>{});
  family->gauge.reset(new Gauge(family.get()));
  auto added = add(std::move(family));
  EKCO_TRY(added);
  return static_cast<const Gauge*>((*added)->gauge.get());
}

Result<const Histogram*> MetricsRegistry::histogram(std::string name, std::string help,
                                                    std::vector<std::string> label_names,
                                                    std::vector<double> buckets) {
  EKCO_TRY(checkDefinition(name, label_names));
  if (std::find(label_names.begin(), label_names.end(), "le") != label_names.end()) {
    return Error(fmt::format("metric {}: a histogram may not have a label named \"le\"", name),
                 ErrorCode::kInvalidArgument);
  }
  if (buckets.empty()) {
    return Error(fmt::format("metric {}: a histogram needs at least one bucket", name),
                 ErrorCode::kInvalidArgument);
  }
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1]))) {
      return Error(fmt::format("metric {}: buckets must be finite and strictly increasing", name),
                   ErrorCode::kInvalidArgument);
    }
  }
  auto family =
      std::make_unique<MetricFamily>(MetricType::kHistogram, std::move(name), std::move(help),
                                     std::move(label_names), std::move(buckets));
  family->histogram.reset(new Histogram(family.get()));
  auto added = add(std::move(family));
  EKCO_TRY(added);
  return static_cast<const Histogram*>((*added)->histogram.get());
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) family->render(out);
  return out;
}

}  // namespace ekco::agent
