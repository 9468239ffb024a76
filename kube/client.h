// The Kubernetes API as ekco's controllers see it: verbs on JSON objects addressed by Resource,
// namespace and name. RestClient (kube/rest_client.h) is the real one; tests use it against
// ekco-kubesim or a fake. Objects are nlohmann::json at this edge; kube/decode/objects.h parses the
// few kinds ekco reads into small structs.
//
// Errors are base::Error with the code mapped from the API's Status (kube/errors.h): kNotFound,
// kAlreadyExists, kConflict (stale resourceVersion or failed precondition), kGone,
// kInvalidArgument, kPermissionDenied, kUnauthenticated, kTooManyRequests, kUnavailable, kTimeout.
// Messages start with the operation: `get nodes/node-a: nodes "node-a" not found (NotFound, 404)`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/resource.h"
#include "kube/transport/cancel_token.h"
#include "kube/watch.h"

namespace ekco::kube {

using Json = nlohmann::json;

struct ListOptions {
  std::string label_selector{};  // "app=x,tier!=y"
  std::string field_selector{};  // "spec.nodeName=node-a"
  std::int64_t limit = 0;        // 0: no paging
  std::string continue_token{};
  // "" (most recent, from etcd), "0" (any, from the cache), or a version; with
  // resource_version_match "Exact" or "NotOlderThan".
  std::string resource_version{};
  std::string resource_version_match{};
};

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kStrategicMerge,  // application/strategic-merge-patch+json (built-in kinds only)
  kJson,            // application/json-patch+json (RFC 6902; a failed "test" op is the
                    // API's 422 Invalid: kInvalidArgument)
};

struct DeleteOptions {
  std::optional<std::int64_t> grace_period_seconds = std::nullopt;  // 0: delete now
  std::string propagation_policy{};  // "", "Background", "Foreground", "Orphan"
  // Preconditions: the delete fails with kConflict when the object's uid / resourceVersion
  // differs.
  std::string precondition_uid{};
  std::string precondition_resource_version{};
};

// A core/v1 Event about one object. The client fills in the rest: name, source component
// "ekco", reporting controller and instance, first/last timestamps from its clock, count 1.
inline constexpr std::size_t kEventMessageBytes = 1024;  // kubectl shows one line

struct EventSpec {
  Resource involved_resource{};      // for kind and apiVersion
  std::string involved_namespace{};  // "" for cluster-scoped objects (the Event goes to "default")
  std::string involved_name{};
  std::string involved_uid{};
  std::string reason{};         // "NodePurged", UpperCamelCase
  std::string message{};        // cut to kEventMessageBytes, never inside a UTF-8 character
  std::string type = "Normal";  // "Normal" or "Warning"
};

class KubeClient {
 public:
  virtual ~KubeClient() = default;

  // GET one object, or one of its subresources ("status", "scale").
  [[nodiscard]] virtual base::Result<Json> get(const Resource& resource, std::string_view ns,
                                               std::string_view name,
                                               std::string_view subresource = {}) = 0;

  // One page of a list: the List object itself, with items and metadata.continue /
  // metadata.resourceVersion. ns "" lists across all namespaces.
  [[nodiscard]] virtual base::Result<Json> list(const Resource& resource, std::string_view ns,
                                                const ListOptions& options = {}) = 0;

  // POST a new object into ns; returns it as stored. An existing name is kAlreadyExists.
  [[nodiscard]] virtual base::Result<Json> create(const Resource& resource, std::string_view ns,
                                                  const Json& object) = 0;

  // PUT the object (named by its metadata.name), or its subresource ("status", "scale"). When
  // metadata.resourceVersion is set and stale the result is kConflict (optimistic concurrency);
  // without it the write is unconditional.
  [[nodiscard]] virtual base::Result<Json> update(const Resource& resource, std::string_view ns,
                                                  const Json& object,
                                                  std::string_view subresource = {}) = 0;

  // PATCH the object or its subresource; returns the result.
  [[nodiscard]] virtual base::Result<Json> patch(const Resource& resource, std::string_view ns,
                                                 std::string_view name, PatchType type,
                                                 const Json& patch,
                                                 std::string_view subresource = {}) = 0;

  // DELETE. An absent object is kNotFound (callers that only want it gone treat that as
  // success). Graceful deletion returns before the object is gone.
  [[nodiscard]] virtual base::Status remove(const Resource& resource, std::string_view ns,
                                            std::string_view name,
                                            const DeleteOptions& options = {}) = 0;

  // POST a policy/v1 Eviction for the pod. A PodDisruptionBudget that forbids it is
  // kTooManyRequests (the API's 429), which callers retry later, not at once.
  [[nodiscard]] virtual base::Status evict(std::string_view ns, std::string_view pod,
                                           const DeleteOptions& options = {}) = 0;

  // Creates a core/v1 Event (see EventSpec).
  [[nodiscard]] virtual base::Status recordEvent(const EventSpec& event) = 0;

  // Streams changes to the handler until the server ends the stream (its timeoutSeconds; ok),
  // the handler returns false (ok) or `cancel` is cancelled (kCancelled). A resourceVersion the
  // server no longer has is kGone, whether the server answers 410 or sends an ERROR event with
  // reason Expired: list again and watch from the list's version. Not retried: on any error the
  // caller watches again from the last resourceVersion it saw (bookmarks keep it fresh).
  [[nodiscard]] virtual base::Status watch(const Resource& resource, std::string_view ns,
                                           const WatchOptions& options, const WatchHandler& handler,
                                           CancelToken* cancel = nullptr) = 0;

  // list() as the JSON text the server sent, undecoded: the informers read it with simdjson
  // (kube/watch/list_decode.h) instead of building a DOM. The default serialises list()'s answer.
  [[nodiscard]] virtual base::Result<std::string> listText(const Resource& resource,
                                                           std::string_view ns,
                                                           const ListOptions& options = {});

  // watch() with each event's line handed over undecoded (trimmed, not empty, padded for
  // simdjson). The same errors and end of stream as watch(); an error the handler returns ends
  // the stream with it. The default serialises watch()'s events.
  [[nodiscard]] virtual base::Status watchText(const Resource& resource, std::string_view ns,
                                               const WatchOptions& options,
                                               const WatchLineHandler& on_line,
                                               CancelToken* cancel = nullptr);

  // GET /version: the server's version.Info ({"major": "1", "minor": "32", "gitVersion":
  // "v1.32.4", ...}). Clients that cannot ask answer kNotFound.
  [[nodiscard]] virtual base::Result<Json> serverVersion() {
    return base::Error("serverVersion: not supported by this client", base::ErrorCode::kNotFound);
  }

  // Follows metadata.continue from the first page to the last and returns one List with all
  // items; its metadata.resourceVersion is the first page's (the snapshot the pages come from).
  // options.limit is the page size (0: the server's choice, usually no paging). An expired
  // continue token is kGone: list again from the start.
  [[nodiscard]] base::Result<Json> listAll(const Resource& resource, std::string_view ns,
                                           ListOptions options = {});
};

}  // namespace ekco::kube
