// ekco-kubesim: routing, discovery and the resource verbs.
#include "tests/kubesim/apply/managed_fields.h"
#include "tests/kubesim/features/events.h"
#include "tests/kubesim/features/openapi.h"
#include "tests/kubesim/features/protobuf.h"
#include "tests/kubesim/features/table.h"
#include "tests/kubesim/server/server_impl.h"
#include "tests/kubesim/store/list_options.h"
#include "tests/kubesim/validation/validation.h"

namespace ekco::kubesim {

using namespace server_detail;  // NOLINT(google-build-using-namespace): this server's internals

namespace {

Reply methodNotAllowed() {
  return statusReply(405, "MethodNotAllowed",
                     "the server does not allow this method on the requested resource");
}

// Every dryRun value of the query (it may repeat).
std::vector<std::string> dryRunValues(const Query& query) {
  std::vector<std::string> values;
  for (const auto& [key, value] : query) {
    if (key == "dryRun") values.push_back(value);
  }
  return values;
}

// A DELETE's options: from its DeleteOptions body, then the query (which wins).
DeleteOptions deleteOptions(const json& body, const Query& query) {
  DeleteOptions options;
  options.dry_run = !dryRunValues(query).empty();
  if (body.is_object() && body.contains("dryRun") && body["dryRun"].is_array() &&
      !body["dryRun"].empty()) {
    options.dry_run = true;
  }
  if (body.is_object()) {
    if (body.contains("gracePeriodSeconds") && body["gracePeriodSeconds"].is_number_integer()) {
      options.grace_period_seconds = body["gracePeriodSeconds"].get<std::int64_t>();
    }
    options.propagation_policy = body.value("propagationPolicy", "");
    const json& pre = body.value("preconditions", json::object());
    if (pre.is_object()) {
      options.precondition_uid = pre.value("uid", "");
      options.precondition_resource_version = pre.value("resourceVersion", "");
    }
  }
  if (auto g = toInt(queryValue(query, "gracePeriodSeconds"))) options.grace_period_seconds = g;
  if (std::string p = queryValue(query, "propagationPolicy"); !p.empty()) {
    options.propagation_policy = p;
  }
  return options;
}

// Who a write is for the field manager (managed_fields.h): ?fieldManager= or the User-Agent.
managed::Writer writerFor(const Request& req, const Query& query, const ResourceInfo& r,
                          const std::string& sub) {
  return managed::Writer{.manager = managed::managerFor(queryValue(query, "fieldManager"),
                                                        std::string(req[http::field::user_agent])),
                         .api_version = r.apiVersion(),
                         .subresource = sub,
                         .now = "",
                         .force = parseGoBool(queryValue(query, "force")).value_or(false),
                         .field_validation = queryValue(query, "fieldValidation")};
}

// ValidatePatchOptions: apply needs a fieldManager, only apply takes force (422 on
// PatchOptions.meta.k8s.io); ValidateFieldManager's length limit for every write.
std::optional<Reply> invalidManagerOptions(const char* options_kind, const Query& query,
                                           bool is_apply) {
  std::vector<FieldError> errs;
  const std::string manager = queryValue(query, "fieldManager");
  const bool has_force =
      std::any_of(query.begin(), query.end(), [](const auto& kv) { return kv.first == "force"; });
  if (std::string_view(options_kind) == "PatchOptions") {
    if (!is_apply && has_force) {
      errs.push_back(forbidden("force", "may not be specified for non-apply patch"));
    }
    if (is_apply && manager.empty()) {
      errs.push_back(requiredValue("fieldManager", "is required for apply patch"));
    }
  }
  if (manager.size() > 128) errs.push_back(tooLong("fieldManager", 128));
  // ValidateFieldValidation: "" (the server's default, Warn), Ignore, Warn, Strict.
  const std::string field_validation = queryValue(query, "fieldValidation");
  const std::vector<std::string> directives = {"", "Ignore", "Strict", "Warn"};
  if (std::find(directives.begin(), directives.end(), field_validation) == directives.end()) {
    errs.push_back(notSupported("fieldValidation", field_validation, directives));
  }
  if (errs.empty()) return std::nullopt;
  return invalidReply("meta.k8s.io", options_kind, "", errs);
}

}  // namespace

// A routing table, one branch per path family, tried top to bottom; it reads best as one.
Reply Server::Impl::route(const Request& req, const std::vector<std::string>& segs,
                          const Query& query, bool* is_watch, ParsedRoute* watch_route,
                          ResourceInfo* watch_resource) {
  const bool get = req.method() == http::verb::get;
  auto all = store_.resources();
  if (segs.size() == 1 && (segs[0] == "healthz" || segs[0] == "readyz" || segs[0] == "livez")) {
    return Reply{.code = 200, .body = "ok"};
  }
  if (segs.size() == 1 && segs[0] == "version" && get) {
    return Reply{.code = 200,
                 .body = {{"major", "1"},
                          {"minor", std::to_string(options_.minor_version)},
                          {"gitVersion", "v1." + std::to_string(options_.minor_version) + ".4"},
                          {"gitCommit", "kubesim"},
                          {"gitTreeState", "clean"},
                          {"buildDate", "2025-01-01T00:00:00Z"},
                          {"goVersion", "go1.23.8"},
                          {"compiler", "gc"},
                          {"platform", "linux/amd64"}}};
  }
  if (segs.size() == 3 && segs[0] == "kubesim" && segs[1] == "v1" && segs[2] == "exec-log") {
    json log = json::array();
    std::lock_guard lock(mu_);
    for (const ExecRecord& e : exec_log_) {
      log.push_back({{"namespace", e.ns},
                     {"pod", e.pod},
                     {"container", e.container},
                     {"command", e.command}});
    }
    return Reply{.code = 200, .body = log};
  }
  if (segs.size() == 3 && segs[0] == "kubesim" && segs[1] == "v1" && segs[2] == "request-log") {
    if (req.method() == http::verb::delete_) {
      std::lock_guard lock(log_mu_);
      request_log_.clear();
      return Reply{.code = 200, .body = json::array()};
    }
    std::vector<RequestRecord> records;
    {
      std::lock_guard lock(log_mu_);
      records.assign(request_log_.begin(), request_log_.end());
    }
    json log = json::array();
    for (const RequestRecord& r : records) {
      log.push_back({{"user", r.user},
                     {"verb", r.verb},
                     {"apiGroup", r.api_group},
                     {"resource", r.resource},
                     {"subresource", r.subresource},
                     {"namespace", r.ns},
                     {"name", r.name},
                     {"path", r.path},
                     {"code", r.code},
                     {"allowed", r.allowed}});
    }
    return Reply{.code = 200, .body = log};
  }
  if (segs.size() >= 2 && segs[0] == "openapi" && segs[1] == "v3" && get) {
    if (segs.size() == 2) return Reply{.code = 200, .body = openapi::v3Index(all)};
    std::optional<json> document;
    if (segs.size() == 4 && segs[2] == "api") document = openapi::v3GroupVersion(all, "", segs[3]);
    if (segs.size() == 5 && segs[2] == "apis") {
      document = openapi::v3GroupVersion(all, segs[3], segs[4]);
    }
    if (document) return Reply{.code = 200, .body = std::move(*document)};
    return Reply{.code = 404, .body = "404 page not found\n"};
  }
  if (segs.size() == 2 && segs[0] == "openapi" && segs[1] == "v2" && get) {
    json document = openapi::v2Document(all);
    const std::string_view accept(req[http::field::accept].data(), req[http::field::accept].size());
    if (accept.find(openapi::kV2ProtobufAccept) != std::string_view::npos) {
      return Reply{.code = 200,
                   .body = openapi::v2Protobuf(document),
                   .content_type = std::string(openapi::kV2ProtobufType)};
    }
    return Reply{.code = 200, .body = std::move(document)};
  }
  if (!segs.empty() && segs[0] == "api") {
    if (segs.size() == 1 && get) {
      return Reply{.code = 200,
                   .body = {{"kind", "APIVersions"},
                            {"versions", {"v1"}},
                            {"serverAddressByClientCIDRs",
                             {{{"clientCIDR", "0.0.0.0/0"},
                               {"serverAddress", "127.0.0.1:" + std::to_string(port_)}}}}}};
    }
    if (segs.size() == 2 && segs[1] == "v1" && get) {
      return Reply{.code = 200, .body = resourceList(all, "", "v1")};
    }
    if (segs.size() >= 3 && segs[1] == "v1") {
      auto r = parseResourcePath(std::vector<std::string>(segs.begin() + 2, segs.end()));
      if (r) {
        r->version = "v1";
        Reply reply = serveResource(req, *r, query, is_watch, watch_resource);
        if (*is_watch) *watch_route = *r;
        return reply;
      }
    }
  }
  if (!segs.empty() && segs[0] == "apis") {
    if (segs.size() == 1 && get) {
      json groups = json::array();
      std::vector<std::string> seen;
      for (const ResourceInfo& r : all) {
        if (r.group.empty() || std::find(seen.begin(), seen.end(), r.group) != seen.end()) {
          continue;
        }
        seen.push_back(r.group);
        json g = apiGroup(all, r.group);
        g.erase("kind");
        g.erase("apiVersion");
        groups.push_back(g);
      }
      return Reply{.code = 200,
                   .body = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}}};
    }
    if (segs.size() == 2 && get) {
      json g = apiGroup(all, segs[1]);
      if (!g["versions"].empty()) return Reply{.code = 200, .body = g};
    }
    if (segs.size() == 3 && get && !groupVersions(all, segs[1]).empty()) {
      json list = resourceList(all, segs[1], segs[2]);
      if (!list["resources"].empty()) return Reply{.code = 200, .body = list};
    }
    if (segs.size() >= 4) {
      auto r = parseResourcePath(std::vector<std::string>(segs.begin() + 3, segs.end()));
      if (r) {
        r->group = segs[1];
        r->version = segs[2];
        Reply reply = serveResource(req, *r, query, is_watch, watch_resource);
        if (*is_watch) *watch_route = *r;
        return reply;
      }
    }
  }
  return statusReply(404, "NotFound", "the server could not find the requested resource");
}

Reply Server::Impl::serveResource(const Request& req, const ParsedRoute& route, const Query& query,
                                  bool* is_watch, ResourceInfo* resource_out) {
  if (events::isView(route.group, route.resource)) {
    return serveEventsView(req, route, query, is_watch, resource_out);
  }
  auto resource = store_.findResource(route.group, route.version, route.resource);
  const http::verb method = req.method();
  json body;
  bool has_body = !req.body().empty();
  if (has_body && method != http::verb::patch &&
      protobuf::isProtobuf(std::string(req[http::field::content_type]))) {
    // kubectl's typed commands send protobuf (protobuf.h).
    auto decoded = protobuf::decode(req.body());
    if (!decoded && decoded.error().code() == base::ErrorCode::kNotFound) {
      return statusReply(415, "UnsupportedMediaType",
                         "the body of the request was in an unknown format - accepted media types "
                         "include: application/json, application/yaml (" +
                             decoded.error().message() + ")");
    }
    if (!decoded) return statusReply(400, "BadRequest", decoded.error().message());
    body = std::move(*decoded);
  } else if (has_body && method != http::verb::patch) {
    body = json::parse(req.body(), nullptr, false);
    if (body.is_discarded()) {
      return statusReply(400, "BadRequest",
                         "the request body is not valid JSON (kubesim accepts only JSON)");
    }
  }
  if (!resource)
    return statusReply(404, "NotFound", "the server could not find the requested resource");
  const ResourceInfo& r = *resource;
  if (!r.namespaced && !route.ns.empty()) {
    return statusReply(404, "NotFound", "the server could not find the requested resource");
  }
  if (r.namespaced && route.ns.empty() && !route.name.empty()) {
    return statusReply(404, "NotFound", "the server could not find the requested resource");
  }
  if (!route.sub.empty() && !r.hasSubresource(route.sub)) {
    return statusReply(404, "NotFound", "the server could not find the requested resource");
  }
  auto patch_type = [&] { return std::string(req[http::field::content_type]); };
  // dryRun=All (query, or a DeleteOptions body): validated as the real handlers validate
  // CreateOptions/UpdateOptions/PatchOptions/DeleteOptions (422 for any other value).
  std::vector<std::string> dry_run = dryRunValues(query);
  if (method == http::verb::delete_ && body.is_object() && body.contains("dryRun") &&
      body["dryRun"].is_array()) {
    for (const json& v : body["dryRun"])
      dry_run.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  }
  const char* options_kind = method == http::verb::post    ? "CreateOptions"
                             : method == http::verb::put   ? "UpdateOptions"
                             : method == http::verb::patch ? "PatchOptions"
                                                           : "DeleteOptions";
  if (method != http::verb::get) {
    if (auto bad = invalidDryRun(options_kind, dry_run)) return std::move(*bad);
  }
  const bool is_apply = patch_type().rfind("application/apply-patch+yaml", 0) == 0;
  if (method == http::verb::post || method == http::verb::put || method == http::verb::patch) {
    if (auto bad = invalidManagerOptions(options_kind, query, is_apply)) return std::move(*bad);
  }
  const managed::Writer writer = writerFor(req, query, r, route.sub);
  const bool is_dry_run = !dry_run.empty();
  // `kubectl get` asks for server-side Tables (table.h); a GET accepting nothing kubesim
  // serves is 406, as kube-apiserver answers.
  std::optional<std::string> as_table = "";
  if (method == http::verb::get && route.sub.empty()) {
    as_table = table::wantsTable(std::string(req[http::field::accept]));
    if (!as_table) {
      return statusReply(406, "NotAcceptable",
                         "only the following media types are accepted: application/json, "
                         "application/yaml, application/vnd.kubernetes.protobuf, "
                         "application/json;as=Table;v=v1;g=meta.k8s.io");
    }
  }
  auto answer = [&](Reply reply) {
    if (!as_table->empty() && reply.code == 200 && !*is_watch) {
      reply.body = table::toTable(r, reply.body, queryValue(query, "includeObject"),
                                  clock_->wallNow(), *as_table);
    }
    return reply;
  };

  if (route.name.empty()) {
    return answer(serveCollection(req, r, route, query, std::move(body), is_watch, resource_out));
  }

  if (route.sub == "scale") {
    if (method == http::verb::get) return store_.getScale(r, route.ns, route.name);
    if (method == http::verb::put) return store_.updateScale(r, route.ns, route.name, body);
    if (method == http::verb::patch) {
      return store_.patchScale(r, route.ns, route.name, patch_type(), req.body());
    }
    return methodNotAllowed();
  }
  if (route.sub == "eviction") {
    if (method != http::verb::post) return methodNotAllowed();
    return store_.evict(route.ns, route.name, body);
  }
  if (route.sub == "exec") {
    return statusReply(400, "BadRequest",
                       "Upgrade request required (kubesim serves exec over WebSocket only: "
                       "v5.channel.k8s.io, v4.channel.k8s.io)");
  }
  switch (method) {
    case http::verb::get:
      return answer(store_.get(r, route.ns, route.name));
    case http::verb::put:
      if (!body.is_object())
        return statusReply(400, "BadRequest", "the body must be a JSON object");
      return store_.update(r, route.ns, route.name, std::move(body), route.sub, is_dry_run,
                           &writer);
    case http::verb::patch:
      return store_.patch(r, route.ns, route.name, patch_type(), req.body(), route.sub, is_dry_run,
                          &writer);
    case http::verb::delete_: {
      if (!route.sub.empty()) return methodNotAllowed();
      return store_.remove(r, route.ns, route.name, deleteOptions(body, query));
    }
    default:
      return methodNotAllowed();
  }
}

// The verbs on a collection: list or watch (GET), create (POST), delete a selection (DELETE).
Reply Server::Impl::serveCollection(const Request& req, const ResourceInfo& r,
                                    const ParsedRoute& route, const Query& query, json body,
                                    bool* is_watch, ResourceInfo* resource_out) {
  const http::verb method = req.method();
  if (method == http::verb::get) {
    // Options are checked as the API server does before reading: ListOptions validation (422),
    // the selectors (400), the kind's field labels (400).
    ListQuery list_query{.watch = queryFlag(query, "watch"),
                         .resource_version = queryValue(query, "resourceVersion"),
                         .resource_version_match = queryValue(query, "resourceVersionMatch"),
                         .continue_token = queryValue(query, "continue")};
    if (std::string s = queryValue(query, "sendInitialEvents"); !s.empty()) {
      list_query.send_initial_events = parseGoBool(s).value_or(false);
    }
    if (auto invalid = validateListQuery(list_query)) return std::move(*invalid);
    auto labels = LabelSelector::parse(queryValue(query, "labelSelector"));
    if (!labels) return statusReply(400, "BadRequest", labels.error().message());
    if (auto bad = checkFieldLabels(r, queryValue(query, "fieldSelector"))) return std::move(*bad);
    if (list_query.watch) {
      std::string rv = queryValue(query, "resourceVersion");
      if (!rv.empty() && !toInt(rv)) {
        return statusReply(400, "BadRequest", "invalid resourceVersion: " + rv);
      }
      *is_watch = true;
      *resource_out = r;
      return Reply{};
    }
    ListOptions options{.label_selector = queryValue(query, "labelSelector"),
                        .field_selector = queryValue(query, "fieldSelector"),
                        .limit = toInt(queryValue(query, "limit")).value_or(0),
                        .continue_token = list_query.continue_token,
                        .resource_version = list_query.resource_version,
                        .resource_version_match = list_query.resource_version_match};
    return store_.list(r, route.ns, options);
  }
  if (method == http::verb::post) {
    if (r.namespaced && route.ns.empty()) return methodNotAllowed();
    if (!body.is_object()) return statusReply(400, "BadRequest", "the body must be a JSON object");
    const managed::Writer writer = writerFor(req, query, r, "");
    return store_.create(r, route.ns, std::move(body), !dryRunValues(query).empty(), &writer);
  }
  if (method == http::verb::delete_) {
    ListOptions options = selectorsOnly(query);
    Reply listed = store_.list(r, route.ns, options);
    if (listed.code != 200) return listed;
    DeleteOptions each = deleteOptions(body, query);
    for (const json& item : listed.body["items"]) {
      (void)store_.remove(r, item["metadata"].value("namespace", ""),
                          item["metadata"].value("name", ""), each);
    }
    return listed;
  }
  return methodNotAllowed();
}

}  // namespace ekco::kubesim
