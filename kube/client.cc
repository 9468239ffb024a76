#include "kube/client.h"

#include <optional>

#include "kube/decode/json_fields.h"

namespace ekco::kube {

base::Result<Json> KubeClient::listAll(const Resource& resource, std::string_view ns,
                                       ListOptions options) {
  Json all;
  Json items = Json::array();
  while (true) {
    auto page = list(resource, ns, options);
    if (!page) return std::move(page).error();
    auto it = page->find("items");
    if (it != page->end() && it->is_array()) {
      for (auto& item : *it) items.push_back(std::move(item));
    }
    std::string next;
    if (auto meta = page->find("metadata"); meta != page->end() && meta->is_object()) {
      if (auto c = meta->find("continue"); c != meta->end() && c->is_string()) {
        next = c->get<std::string>();
      }
    }
    if (all.is_null()) {
      all = std::move(*page);
    }
    if (next.empty()) break;
    // The continue token carries the snapshot; resourceVersion must not be sent with it.
    options.continue_token = next;
    options.resource_version.clear();
    options.resource_version_match.clear();
  }
  all["items"] = std::move(items);
  if (auto meta = all.find("metadata"); meta != all.end() && meta->is_object()) {
    meta->erase("continue");
  }
  return all;
}

base::Result<std::string> KubeClient::listText(const Resource& resource, std::string_view ns,
                                               const ListOptions& options) {
  auto page = list(resource, ns, options);
  if (!page) return std::move(page).error();
  return page->dump();
}

base::Status KubeClient::watchText(const Resource& resource, std::string_view ns,
                                   const WatchOptions& options, const WatchLineHandler& on_line,
                                   CancelToken* cancel) {
  std::optional<base::Error> failed;
  auto status = watch(
      resource, ns, options,
      [&](const WatchEvent& event) {
        const char* type = event.type == WatchEventType::kAdded      ? "ADDED"
                           : event.type == WatchEventType::kModified ? "MODIFIED"
                           : event.type == WatchEventType::kDeleted  ? "DELETED"
                                                                     : "BOOKMARK";
        std::string line = jsonDump(Json{{"type", type}, {"object", event.object}});
        bool keep_going = true;
        auto handled = on_line(padded(line), keep_going);
        if (!handled) {
          failed = std::move(handled).error();
          return false;
        }
        return keep_going;
      },
      cancel);
  if (failed) return std::move(*failed);
  return status;
}

}  // namespace ekco::kube
