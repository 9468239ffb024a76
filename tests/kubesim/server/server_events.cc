// ekco-kubesim: the events.k8s.io/v1 view of core/v1 Events (events.h). A request to the view
// is answered by the core resource's handlers with the body, the field selector and the reply
// converted; a patch applies to the view's form of the stored object.
#include <variant>

#include "tests/kubesim/apply/patch.h"
#include "tests/kubesim/features/events.h"
#include "tests/kubesim/features/protobuf.h"
#include "tests/kubesim/server/server_impl.h"

namespace ekco::kubesim {

using namespace server_detail;  // NOLINT(google-build-using-namespace): this server's internals

namespace {

// Applies a JSON, merge or strategic merge patch to `target`; the Reply on failure.
std::variant<json, Reply> patched(const json& target, std::string_view content_type,
                                  std::string_view body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded())
    return statusReply(400, "BadRequest", "error decoding patch: invalid JSON");
  std::string type(content_type.substr(0, content_type.find(';')));
  if (type == "application/merge-patch+json" && doc.is_object()) {
    json out = target;
    out.merge_patch(doc);
    return out;
  }
  if (type == "application/json-patch+json" && doc.is_array()) {
    try {
      return target.patch(doc);
    } catch (const json::exception& e) {
      return statusReply(422, "Invalid",
                         std::string("the server rejected our request due to an error in our "
                                     "request: ") +
                             e.what());
    }
  }
  if (type == "application/strategic-merge-patch+json") {
    auto merged = strategicMergePatch(target, doc);
    if (!merged) return statusReply(400, "BadRequest", merged.error().message());
    return std::move(*merged);
  }
  return statusReply(415, "UnsupportedMediaType",
                     "the body of the request was in an unknown format - accepted media types "
                     "include: application/json-patch+json, application/merge-patch+json, "
                     "application/strategic-merge-patch+json (kubesim: server-side apply is not "
                     "served on the events.k8s.io view)");
}

}  // namespace

Reply Server::Impl::serveEventsView(const Request& req, const ParsedRoute& route,
                                    const Query& query, bool* is_watch,
                                    ResourceInfo* resource_out) {
  auto view = store_.findResource(route.group, route.version, route.resource);
  if (!view)
    return statusReply(404, "NotFound", "the server could not find the requested resource");
  ParsedRoute core = route;
  core.group = "";
  core.version = "v1";
  Query core_query = query;
  for (auto& [key, value] : core_query) {
    if (key != "fieldSelector") continue;
    auto mapped = events::coreFieldSelector(value);
    if (!mapped) return statusReply(400, "BadRequest", mapped.error().message());
    value = *mapped;
  }
  Request inner = req;
  const http::verb method = req.method();
  if ((method == http::verb::post || method == http::verb::put) && !req.body().empty()) {
    json body;
    if (protobuf::isProtobuf(std::string(req[http::field::content_type]))) {
      auto decoded = protobuf::decode(req.body());
      if (!decoded) return statusReply(400, "BadRequest", decoded.error().message());
      body = std::move(*decoded);
    } else {
      body = json::parse(req.body(), nullptr, false);
      if (body.is_discarded()) {
        return statusReply(400, "BadRequest",
                           "the request body is not valid JSON (kubesim accepts only JSON)");
      }
    }
    if (method == http::verb::post && route.name.empty()) {
      if (auto bad = events::invalidViewCreate(body, route.ns)) return std::move(*bad);
    }
    inner.body() = events::toCore(body).dump();
    inner.set(http::field::content_type, "application/json");
  }
  if (method == http::verb::patch && !route.name.empty() && route.sub.empty()) {
    // (1) read the stored object, (2) patch its view form, (3) write it back as an update
    // conditioned on the resourceVersion read, (4) again if another write came in between.
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto r = store_.findResource("", "v1", "events");
      Reply current = store_.get(*r, route.ns, route.name);  // (1)
      if (current.code != 200) return events::viewReply(std::move(current));
      const std::string rv = current.body["metadata"].value("resourceVersion", "");
      json view_form = events::toView(current.body);
      auto result =
          patched(view_form, std::string(req[http::field::content_type]), req.body());  // (2)
      if (std::holds_alternative<Reply>(result)) return std::get<Reply>(std::move(result));
      json next = std::get<json>(std::move(result));
      const bool precondition = next.contains("metadata") && next["metadata"].is_object() &&
                                next["metadata"].value("resourceVersion", rv) != rv;
      json core_next = events::toCore(next);
      core_next["metadata"]["resourceVersion"] = next["metadata"].value("resourceVersion", rv);
      inner.method(http::verb::put);  // (3)
      inner.body() = core_next.dump();
      inner.set(http::field::content_type, "application/json");
      Reply reply = serveResource(inner, core, core_query, is_watch, resource_out);
      if (reply.code == 409 && !precondition) continue;  // (4)
      return events::viewReply(std::move(reply));
    }
    return statusReply(409, "Conflict", "the events.k8s.io patch kept conflicting");
  }
  Reply reply = serveResource(inner, core, core_query, is_watch, resource_out);
  if (*is_watch) {
    *resource_out = *view;  // serveWatch converts (serveEventsWatch)
    return reply;
  }
  return events::viewReply(std::move(reply));
}

}  // namespace ekco::kubesim
