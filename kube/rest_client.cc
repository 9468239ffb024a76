#include "kube/rest_client.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "base/utf8.h"
#include "kube/decode/json_depth.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/errors.h"

namespace ekco::kube {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

// "get nodes/node-a", "get pods/x/status in kube-system", "list pods in kube-system".
std::string opName(std::string_view verb, const Resource& resource, std::string_view ns,
                   std::string_view name = {}, std::string_view subresource = {}) {
  std::string op(verb);
  op += " " + resource.plural;
  if (!name.empty()) op += "/" + std::string(name);
  if (!subresource.empty()) op += "/" + std::string(subresource);
  if (resource.namespaced && !ns.empty()) op += " in " + std::string(ns);
  return op;
}

void addQuery(std::string& target, std::string_view key, std::string_view value) {
  if (value.empty()) return;
  target += target.find('?') == std::string::npos ? '?' : '&';
  target += key;
  target += '=';
  target += percentEncode(value);
}

std::string_view contentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
  }
  return "application/merge-patch+json";
}

Json deleteOptionsJson(const DeleteOptions& options) {
  Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (!options.precondition_uid.empty()) {
    body["preconditions"]["uid"] = options.precondition_uid;
  }
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  return body;
}

std::string metadataString(const Json& object, const char* key) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return {};
  auto it = meta->find(key);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

RestClient::RestClient(HttpTransport& transport, const base::Clock& clock,
                       RestClientOptions options)
    : transport_(transport), clock_(clock), options_(std::move(options)) {
  if (!options_.sleep) {
    options_.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  }
  if (!options_.random) {
    struct Source {
      std::mutex mu;
      std::mt19937_64 gen{std::random_device{}()};
      std::uniform_real_distribution<double> dist{0.0, 1.0};
    };
    auto source = std::make_shared<Source>();
    options_.random = [source] {
      std::lock_guard lock(source->mu);
      return source->dist(source->gen);
    };
  }
}

Result<HttpResponse> RestClient::execute(HttpRequest request, Idempotency idempotency,
                                         std::string_view op) {
  request.timeout = options_.request_timeout;
  if (request.max_body_bytes == 0) request.max_body_bytes = kMaxObjectResponseBytes;
  request.headers.emplace_back("Accept", "application/json");
  for (int attempt = 1;; ++attempt) {
    auto sent = transport_.send(request);
    Failure failure;
    std::optional<Error> error;
    if (!sent) {
      failure.code = sent.error().code();
      error = sent.error().wrap(op);
    } else if (sent->status >= 200 && sent->status <= 299) {
      return sent;
    } else {
      error = apiError(op, *sent);
      failure.code = error->code();
      failure.http_status = sent->status;
      failure.retry_after = parseRetryAfter(sent->header("retry-after"));
    }
    auto delay = retryDelay(options_.retry, attempt, failure, idempotency, options_.random());
    if (!delay) {
      if (attempt > 1) {
        return Error(error->message() + " (after " + std::to_string(attempt) + " attempts)",
                     error->code());
      }
      return std::move(*error);
    }
    options_.sleep(*delay);
  }
}

Result<Json> RestClient::executeJson(HttpRequest request, Idempotency idempotency,
                                     std::string_view op) {
  auto response = execute(std::move(request), idempotency, op);
  if (!response) return std::move(response).error();
  // Callers copy and dump what they get, which recurses once per level (kube/decode/json_depth.h).
  if (jsonNestedDeeperThan(response->body)) {
    return Error(std::string(op) + ": response is JSON nested deeper than " +
                     std::to_string(kMaxJsonDepth) + " levels (HTTP " +
                     std::to_string(response->status) + ")",
                 ErrorCode::kParse);
  }
  auto json = Json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return Error(
        std::string(op) + ": response is not JSON (HTTP " + std::to_string(response->status) + ")",
        ErrorCode::kParse);
  }
  return json;
}

Result<Json> RestClient::get(const Resource& resource, std::string_view ns, std::string_view name,
                             std::string_view subresource) {
  const std::string op = opName("get", resource, ns, name, subresource);
  if (name.empty()) return Error(op + ": empty name", ErrorCode::kInvalidArgument);
  return executeJson({.method = "GET", .target = resource.path(ns, name, subresource)},
                     Idempotency::kIdempotent, op);
}

Result<Json> RestClient::serverVersion() {
  return executeJson({.method = "GET", .target = "/version"}, Idempotency::kIdempotent,
                     "get server version");
}

namespace {

std::string listTarget(const Resource& resource, std::string_view ns, const ListOptions& options) {
  std::string target = resource.path(ns);
  addQuery(target, "labelSelector", options.label_selector);
  addQuery(target, "fieldSelector", options.field_selector);
  if (options.limit > 0) addQuery(target, "limit", std::to_string(options.limit));
  addQuery(target, "continue", options.continue_token);
  addQuery(target, "resourceVersion", options.resource_version);
  addQuery(target, "resourceVersionMatch", options.resource_version_match);
  return target;
}

HttpRequest listRequest(const Resource& resource, std::string_view ns, const ListOptions& options) {
  return {.method = "GET",
          .target = listTarget(resource, ns, options),
          .max_body_bytes = options.limit > 0 ? kMaxListPageBytes : kMaxUnpagedListBytes};
}

}  // namespace

Result<Json> RestClient::list(const Resource& resource, std::string_view ns,
                              const ListOptions& options) {
  return executeJson(listRequest(resource, ns, options), Idempotency::kIdempotent,
                     opName("list", resource, ns));
}

Result<std::string> RestClient::listText(const Resource& resource, std::string_view ns,
                                         const ListOptions& options) {
  auto response = execute(listRequest(resource, ns, options), Idempotency::kIdempotent,
                          opName("list", resource, ns));
  if (!response) return std::move(response).error();
  return std::move(response->body);
}

Result<Json> RestClient::create(const Resource& resource, std::string_view ns, const Json& object) {
  const std::string op = opName("create", resource, ns, metadataString(object, "name"));
  HttpRequest request{.method = "POST", .target = resource.path(ns), .body = jsonDump(object)};
  request.headers.emplace_back("Content-Type", "application/json");
  return executeJson(std::move(request), Idempotency::kNotIdempotent, op);
}

Result<Json> RestClient::update(const Resource& resource, std::string_view ns, const Json& object,
                                std::string_view subresource) {
  const std::string name = metadataString(object, "name");
  const std::string op = opName("update", resource, ns, name, subresource);
  if (name.empty()) return Error(op + ": object has no metadata.name", ErrorCode::kInvalidArgument);
  HttpRequest request{
      .method = "PUT", .target = resource.path(ns, name, subresource), .body = jsonDump(object)};
  request.headers.emplace_back("Content-Type", "application/json");
  return executeJson(std::move(request), Idempotency::kIdempotent, op);
}

Result<Json> RestClient::patch(const Resource& resource, std::string_view ns, std::string_view name,
                               PatchType type, const Json& patch, std::string_view subresource) {
  const std::string op = opName("patch", resource, ns, name, subresource);
  if (name.empty()) return Error(op + ": empty name", ErrorCode::kInvalidArgument);
  HttpRequest request{
      .method = "PATCH", .target = resource.path(ns, name, subresource), .body = jsonDump(patch)};
  request.headers.emplace_back("Content-Type", std::string(contentType(type)));
  return executeJson(std::move(request), Idempotency::kIdempotent, op);
}

base::Status RestClient::remove(const Resource& resource, std::string_view ns,
                                std::string_view name, const DeleteOptions& options) {
  const std::string op = opName("delete", resource, ns, name);
  if (name.empty()) return Error(op + ": empty name", ErrorCode::kInvalidArgument);
  HttpRequest request{.method = "DELETE",
                      .target = resource.path(ns, name),
                      .body = jsonDump(deleteOptionsJson(options))};
  request.headers.emplace_back("Content-Type", "application/json");
  auto response = execute(std::move(request), Idempotency::kIdempotent, op);
  if (!response) return std::move(response).error();
  return base::ok();
}

base::Status RestClient::evict(std::string_view ns, std::string_view pod,
                               const DeleteOptions& options) {
  const std::string op = opName("evict", resources::kPods, ns, pod);
  if (pod.empty() || ns.empty()) {
    return Error(op + ": empty namespace or name", ErrorCode::kInvalidArgument);
  }
  Json body = {{"apiVersion", "policy/v1"},
               {"kind", "Eviction"},
               {"metadata", {{"name", pod}, {"namespace", ns}}}};
  if (options.grace_period_seconds || !options.propagation_policy.empty() ||
      !options.precondition_uid.empty() || !options.precondition_resource_version.empty()) {
    body["deleteOptions"] = deleteOptionsJson(options);
  }
  HttpRequest request{.method = "POST",
                      .target = resources::kPods.path(ns, pod, "eviction"),
                      .body = jsonDump(body)};
  request.headers.emplace_back("Content-Type", "application/json");
  auto response = execute(std::move(request), Idempotency::kNotIdempotent, op);
  if (!response) return std::move(response).error();
  return base::ok();
}

base::Status RestClient::recordEvent(const EventSpec& event) {
  const base::WallTime now = clock_.wallNow();
  const std::string ns = event.involved_resource.namespaced && !event.involved_namespace.empty()
                             ? event.involved_namespace
                             : std::string("default");
  // client-go names events "<object>.<unix nanoseconds in hex>": unique per object and time.
  char suffix[32];
  std::snprintf(
      suffix, sizeof(suffix), ".%" PRIx64,
      static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()));
  const std::string stamp = formatRfc3339(now);
  Json involved = {{"kind", event.involved_resource.kind},
                   {"apiVersion", event.involved_resource.apiVersion()},
                   {"name", event.involved_name}};
  if (event.involved_resource.namespaced) involved["namespace"] = event.involved_namespace;
  if (!event.involved_uid.empty()) involved["uid"] = event.involved_uid;
  Json source = {{"component", "ekco"}};
  if (!options_.reporting_instance.empty()) source["host"] = options_.reporting_instance;
  Json body = {{"apiVersion", "v1"},
               {"kind", "Event"},
               {"metadata", {{"name", event.involved_name + suffix}, {"namespace", ns}}},
               {"involvedObject", std::move(involved)},
               {"reason", event.reason},
               {"message", std::string(base::utf8Prefix(event.message, kEventMessageBytes))},
               {"type", event.type},
               {"source", std::move(source)},
               {"firstTimestamp", stamp},
               {"lastTimestamp", stamp},
               {"count", 1},
               {"reportingComponent", "ekco"},
               {"reportingInstance", options_.reporting_instance}};
  auto created = create(resources::kEvents, ns, body);
  if (!created) return std::move(created).error();
  return base::ok();
}

base::Status RestClient::watch(const Resource& resource, std::string_view ns,
                               const WatchOptions& options, const WatchHandler& handler,
                               CancelToken* cancel) {
  const std::string op = opName("watch", resource, ns);
  return watchText(
      resource, ns, options,
      [&](JsonText line, bool& keep_going) -> base::Status {
        auto event = parseWatchEvent(line.text, op);
        if (!event) return std::move(event).error();
        keep_going = handler(*event);
        return base::ok();
      },
      cancel);
}

base::Status RestClient::watchText(const Resource& resource, std::string_view ns,
                                   const WatchOptions& options, const WatchLineHandler& on_line,
                                   CancelToken* cancel) {
  const std::string op = opName("watch", resource, ns);
  std::string target = resource.path(ns) + "?watch=true";
  addQuery(target, "resourceVersion", options.resource_version);
  if (options.allow_watch_bookmarks) addQuery(target, "allowWatchBookmarks", "true");
  const std::int64_t timeout_seconds = std::max<std::int64_t>(1, options.timeout_seconds);
  addQuery(target, "timeoutSeconds", std::to_string(timeout_seconds));
  addQuery(target, "labelSelector", options.label_selector);
  addQuery(target, "fieldSelector", options.field_selector);
  HttpRequest request{.method = "GET",
                      .target = std::move(target),
                      .timeout = std::chrono::seconds(timeout_seconds + 30),
                      .idle_timeout = options.idle_timeout,
                      .max_body_bytes = kMaxObjectResponseBytes};  // a refusal's Status
  request.headers.emplace_back("Accept", "application/json");
  if (options.on_open) {
    request.on_headers = [&options](int status) {
      if (status >= 200 && status <= 299) options.on_open();
    };
  }

  WatchDecoder decoder(op, WatchDecoder::kMaxLineBytes, transport_.budget());
  std::optional<Error> decode_error;
  bool keep_going = true;
  CancelToken local_cancel;
  auto streamed = transport_.stream(
      request,
      [&](std::string_view chunk) {
        auto fed = decoder.feedLines(chunk, on_line, keep_going);
        if (!fed) decode_error = std::move(fed).error();
        return keep_going && !decode_error;
      },
      cancel != nullptr ? *cancel : local_cancel);
  if (decode_error) return std::move(*decode_error);
  if (!streamed) return std::move(streamed).error().wrap(op);
  if (streamed->status < 200 || streamed->status > 299) return apiError(op, *streamed);
  return decoder.finishLines(on_line, keep_going);
}

}  // namespace ekco::kube
