// Events as one set: kube-apiserver serves `core/v1` Events and `events.k8s.io/v1` Events from
// the same storage (pkg/registry/core/event), converting through the internal type. kubesim
// stores the core/v1 form and converts the events.k8s.io view at the edges (server_events.cc):
// request bodies to core, replies, lists and watch events back, field selectors through the
// view's field labels. The conversion is pkg/apis/events/v1/conversion.go's.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "tests/kubesim/store/store.h"

namespace ekco::kubesim::events {

// The events.k8s.io resource (served as a view of core/v1 events).
bool isView(const ResourceInfo& r);
bool isView(std::string_view group, std::string_view resource);

// Convert_core_Event_To_v1_Event / Convert_v1_Event_To_core_Event on the JSON forms
// (involvedObject ↔ regarding, message ↔ note, source ↔ deprecatedSource, firstTimestamp,
// lastTimestamp, count ↔ deprecated*, reportingComponent ↔ reportingController; eventTime,
// series, related, action, reason, type, reportingInstance as they are).
nlohmann::json toView(const nlohmann::json& core);
nlohmann::json toCore(const nlohmann::json& view);

// A reply of the core storage as the view answers it: objects and lists converted, Status
// messages naming `events.events.k8s.io` / `Event.events.k8s.io`.
Reply viewReply(Reply reply);

// The view's field selector in core field labels (AddFieldLabelConversionsForEvent of
// events.k8s.io/v1: regarding.* → involvedObject.*, reportingController → reportingComponent);
// the 400 kube-apiserver answers for a label the view does not support.
base::Result<std::string> coreFieldSelector(std::string_view selector);

// ValidateEventCreate for a create through events.k8s.io/v1 (`view` in the view's form): the 422
// Invalid Status, or nullopt.
std::optional<Reply> invalidViewCreate(const nlohmann::json& view, const std::string& ns);

}  // namespace ekco::kubesim::events
