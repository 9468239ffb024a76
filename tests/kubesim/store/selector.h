// Label and field selectors as the API server parses them from ?labelSelector= and
// ?fieldSelector=.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::kubesim {

// Label selector: comma-separated requirements, all of which must hold.
//   key=value, key==value, key!=value (also true when the label is absent),
//   key in (a,b), key notin (a,b) (also true when absent), key (exists), !key (absent).
class LabelSelector {
 public:
  [[nodiscard]] static base::Result<LabelSelector> parse(std::string_view text);
  // `labels` is metadata.labels (an object, or null when the object has none).
  bool matches(const nlohmann::json& labels) const;
  bool empty() const { return reqs_.empty(); }

 private:
  enum class Op { kEq, kNotEq, kIn, kNotIn, kExists, kNotExists };
  struct Requirement {
    std::string key{};
    Op op = Op::kEq;
    std::vector<std::string> values{};
  };
  std::vector<Requirement> reqs_;
};

// How a field label reads an object: its dotted JSON path and the value an unset field compares
// as (the Go zero value of the typed field: "false" for spec.unschedulable, "0" for a count).
struct FieldLabel {
  std::string path{};
  std::string unset{};
};

// Field selector: comma-separated `path=value`, `path==value` or `path!=value`, where path is a
// dotted JSON path into the object (metadata.name, metadata.namespace, spec.nodeName,
// status.phase, ...). A missing field compares as the empty string, as the API server does.
class FieldSelector {
 public:
  [[nodiscard]] static base::Result<FieldSelector> parse(std::string_view text);
  bool matches(const nlohmann::json& object) const;
  bool empty() const { return reqs_.empty(); }
  // The value a non-negated requirement on `label` demands ("node-1" of spec.nodeName=node-1).
  std::optional<std::string> equalTo(std::string_view label) const;
  // The labels, as written ("spec.nodeName").
  std::vector<std::string> labels() const;
  // Reads the labels found in `labels` through their FieldLabel (path and unset value).
  void mapLabels(const std::map<std::string, FieldLabel>& labels);

 private:
  struct Requirement {
    std::string label{};
    std::vector<std::string> path{};
    bool negate = false;
    std::string value{};
    std::string unset{};
  };
  std::vector<Requirement> reqs_;
};

}  // namespace ekco::kubesim
