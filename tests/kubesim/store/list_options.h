// List and watch options as kube-apiserver checks them before it reads anything: the
// ListOptions validation (422 Invalid), the field labels each resource supports (400 BadRequest)
// and the typed values those labels compare, with the Go zero value for an unset field
// (`spec.unschedulable=false` matches a node without the field).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tests/kubesim/store/selector.h"
#include "tests/kubesim/store/store.h"

namespace ekco::kubesim {

// Go's strconv.ParseBool: "1", "t", "T", "true", "TRUE", "True" are true; nullopt when the text
// is none of those nor their false forms ("0", "f", "F", "false", "FALSE", "False").
std::optional<bool> parseGoBool(std::string_view text);

// The query's list/watch options as the API server decodes them (metainternalversion.ListOptions).
struct ListQuery {
  bool watch = false;
  std::string resource_version{};
  std::string resource_version_match{};
  std::string continue_token{};
  std::optional<bool> send_initial_events{};
};

// ValidateListOptions / validateWatchOptions (apimachinery's metainternalversion validation):
// the 422 Invalid Status for `ListOptions.meta.k8s.io ""`, or nullopt when the options are valid.
std::optional<Reply> validateListQuery(const ListQuery& q);

// The field selector's labels checked against those the resource's kind supports: nullopt when
// all are supported, else the 400 BadRequest kube-apiserver answers (the kind's conversion
// function's "field label not supported: X", or the default conversion's
// "\"X\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"").
std::optional<Reply> checkFieldLabels(const ResourceInfo& r, std::string_view field_selector);

// The resource's field labels whose JSON path or unset value differs from the plain dotted path
// and "" (for FieldSelector::mapLabels).
const std::map<std::string, FieldLabel>& fieldLabelsFor(const ResourceInfo& r);

// The field selector of a list or watch on r, parsed and with r's field labels mapped.
base::Result<FieldSelector> fieldSelectorFor(const ResourceInfo& r, std::string_view text);

}  // namespace ekco::kubesim
