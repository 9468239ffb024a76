#include "tests/kubesim/server.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "tests/kubesim/pki.h"
#include "tests/kubesim/rbac.h"
#include "tests/kubesim/selector.h"

namespace ekco::kubesim {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;
using SslStream = ssl::stream<tcp::socket>;
using Request = http::request<http::string_body>;

namespace {

using Query = std::vector<std::pair<std::string, std::string>>;

std::string percentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      int hi = i + 1 < s.size() ? hex(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        out += s[i];
        continue;
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

Query parseQuery(std::string_view q) {
  Query out;
  while (!q.empty()) {
    auto amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    auto eq = part.find('=');
    if (!part.empty()) {
      out.emplace_back(percentDecode(part.substr(0, eq)),
                       eq == std::string_view::npos ? "" : percentDecode(part.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return out;
}

std::string queryValue(const Query& q, std::string_view key, std::string fallback = "") {
  for (const auto& [k, v] : q) {
    if (k == key) return v;
  }
  return fallback;
}

// List options with just the label and field selectors of the query: a whole, unpaged list.
ListOptions selectorsOnly(const Query& q) {
  ListOptions options;
  options.label_selector = queryValue(q, "labelSelector");
  options.field_selector = queryValue(q, "fieldSelector");
  return options;
}

bool queryFlag(const Query& q, std::string_view key) {
  std::string v = queryValue(q, key);
  return v == "true" || v == "1";
}

std::vector<std::string> splitPath(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    if (slash != 0) out.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

std::optional<std::int64_t> toInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

base::Status writeFileAtomic(const std::filesystem::path& path, const std::string& data) {
  std::filesystem::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << data;
    if (!out.flush()) return base::Error("write " + tmp.string(), base::ErrorCode::kIo);
  }
  std::filesystem::permissions(
      tmp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return base::Error("rename " + path.string() + ": " + ec.message(), base::ErrorCode::kIo);
  return base::ok();
}

json resourceList(const std::vector<ResourceInfo>& all, const std::string& group,
                  const std::string& version) {
  json resources = json::array();
  const json all_verbs = {"create", "delete", "deletecollection", "get",
                          "list",   "patch",  "update",           "watch"};
  for (const ResourceInfo& r : all) {
    if (r.group != group || r.version != version) continue;
    json entry = {{"name", r.plural},
                  {"singularName", r.singular},
                  {"namespaced", r.namespaced},
                  {"kind", r.kind},
                  {"verbs", r.verbs.empty() ? all_verbs : json(r.verbs)}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    resources.push_back(entry);
    for (const std::string& sub : r.subresources) {
      json s = {{"name", r.plural + "/" + sub}, {"singularName", ""}, {"namespaced", r.namespaced}};
      if (sub == "status") {
        s["kind"] = r.kind;
        s["verbs"] = {"get", "patch", "update"};
      } else if (sub == "scale") {
        s["group"] = "autoscaling";
        s["version"] = "v1";
        s["kind"] = "Scale";
        s["verbs"] = {"get", "patch", "update"};
      } else if (sub == "eviction") {
        s["group"] = "policy";
        s["version"] = "v1";
        s["kind"] = "Eviction";
        s["verbs"] = {"create"};
      } else if (sub == "exec") {
        s["kind"] = "PodExecOptions";
        s["verbs"] = {"create", "get"};
      }
      resources.push_back(s);
    }
  }
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", group.empty() ? version : group + "/" + version},
          {"resources", resources}};
}

json groupVersions(const std::vector<ResourceInfo>& all, const std::string& group) {
  json versions = json::array();
  std::vector<std::string> seen;
  for (const ResourceInfo& r : all) {
    if (r.group != group || std::find(seen.begin(), seen.end(), r.version) != seen.end()) continue;
    seen.push_back(r.version);
    versions.push_back({{"groupVersion", group + "/" + r.version}, {"version", r.version}});
  }
  return versions;
}

json apiGroup(const std::vector<ResourceInfo>& all, const std::string& group) {
  json versions = groupVersions(all, group);
  return {{"kind", "APIGroup"},
          {"apiVersion", "v1"},
          {"name", group},
          {"versions", versions},
          {"preferredVersion", versions.empty() ? json::object() : versions[0]}};
}

// Whether a watch event passes the watch's selectors, and as which type: an object that starts
// or stops matching is ADDED or DELETED for this watcher, as the API server's filtered watch.
std::optional<std::string> filteredType(const WatchEvent& e, const std::string& ns,
                                        const LabelSelector& labels, const FieldSelector& fields) {
  auto matches = [&](const json& obj) {
    if (!obj.is_object()) return false;
    const json& meta = obj.value("metadata", json::object());
    if (!ns.empty() && meta.value("namespace", "") != ns) return false;
    return labels.matches(meta.value("labels", json())) && fields.matches(obj);
  };
  bool now = matches(e.object);
  bool before = matches(e.old);
  if (e.type == "ADDED") return now ? std::optional<std::string>("ADDED") : std::nullopt;
  if (e.type == "DELETED") return now ? std::optional<std::string>("DELETED") : std::nullopt;
  if (now && before) return "MODIFIED";
  if (now) return "ADDED";
  if (before) return "DELETED";
  return std::nullopt;
}

json goneEvent(std::uint64_t requested, std::uint64_t oldest) {
  return {{"type", "ERROR"},
          {"object",
           {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", "Failure"},
            {"message", "too old resource version: " + std::to_string(requested) + " (" +
                            std::to_string(oldest) + ")"},
            {"reason", "Expired"},
            {"code", 410}}}};
}

// OpenAPI v3, only as much as kubectl needs: `kubectl create/apply/replace` (--validate=strict,
// the default) asks /openapi/v3 whether each kind's PATCH operation (the operation's own
// parameters, not the path's) takes the fieldValidation query parameter (supportsQueryParamV3); if
// it does, kubectl leaves validation to the server (and sends ?fieldValidation=Strict, which
// kubesim accepts and ignores). Without /openapi/v3 it falls back to /openapi/v2 and fails "failed
// to download openapi". No schemas are served.
json openapiRoot(const std::vector<ResourceInfo>& all) {
  json paths = json::object();
  for (const ResourceInfo& r : all) {
    std::string gv = r.group.empty() ? "api/" + r.version : "apis/" + r.group + "/" + r.version;
    paths[gv] = {{"serverRelativeURL", "/openapi/v3/" + gv + "?hash=kubesim"}};
  }
  return {{"paths", paths}};
}

json openapiGroupVersion(const std::vector<ResourceInfo>& all, const std::string& group,
                         const std::string& version) {
  json paths = json::object();
  for (const ResourceInfo& r : all) {
    if (r.group != group || r.version != version) continue;
    std::string prefix =
        r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version;
    std::string path =
        prefix + (r.namespaced ? "/namespaces/{namespace}/" : "/") + r.plural + "/{name}";
    paths[path] = {
        {"patch",
         {{"operationId", "patch" + r.kind},
          {"parameters",
           {{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}}}},
          {"responses", {{"200", {{"description", "OK"}}}}},
          {"x-kubernetes-action", "patch"},
          {"x-kubernetes-group-version-kind",
           {{"group", r.group}, {"version", r.version}, {"kind", r.kind}}}}}};
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes"}, {"version", "v1.32.4"}}},
          {"paths", paths},
          {"components", {{"schemas", json::object()}}}};
}

// The identity of a TLS client certificate (verified against the CA): CN is the user name, each
// O a group, as kube-apiserver's x509 authenticator.
std::optional<UserInfo> certificateUser(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return std::nullopt;
  UserInfo user;
  X509_NAME* subject = X509_get_subject_name(cert);
  auto entries = [&](int nid, auto&& each) {
    for (int i = X509_NAME_get_index_by_NID(subject, nid, -1); i >= 0;
         i = X509_NAME_get_index_by_NID(subject, nid, i)) {
      ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
      unsigned char* utf8 = nullptr;
      int len = ASN1_STRING_to_UTF8(&utf8, data);
      if (len >= 0) each(std::string(reinterpret_cast<char*>(utf8), static_cast<std::size_t>(len)));
      OPENSSL_free(utf8);
    }
  };
  entries(NID_commonName, [&](std::string v) { user.name = std::move(v); });
  entries(NID_organizationName, [&](std::string v) { user.groups.push_back(std::move(v)); });
  user.groups.push_back("system:authenticated");
  X509_free(cert);
  return user;
}

// The bearer token of an Authorization header ("Bearer TOKEN", scheme case-insensitive), or "".
std::string bearerToken(std::string_view header) {
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) {
    header.remove_prefix(1);
  }
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t'))
    header.remove_suffix(1);
  auto space = header.find(' ');
  if (space == std::string_view::npos || space != 6) return {};
  std::string scheme(header.substr(0, space));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer") return {};
  std::string_view token = header.substr(space + 1);
  if (token.find(' ') != std::string_view::npos) token = token.substr(0, token.find(' '));
  return std::string(token);
}

struct ParsedRoute {
  std::string group{};
  std::string version{};
  std::string ns{};
  std::string resource{};
  std::string name{};
  std::string sub{};
};

// Splits ".../namespaces/NS/RES/NAME/SUB" or ".../RES/NAME/SUB" (segments after the version).
std::optional<ParsedRoute> parseResourcePath(std::vector<std::string> rest) {
  ParsedRoute route;
  if (rest.empty()) return std::nullopt;
  if (rest[0] == "namespaces" && rest.size() >= 3 &&
      !(rest.size() == 3 && (rest[2] == "status" || rest[2] == "finalize"))) {
    route.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.size() > 3) return std::nullopt;
  route.resource = rest[0];
  if (rest.size() > 1) route.name = rest[1];
  if (rest.size() > 2) route.sub = rest[2];
  return route;
}

}  // namespace

class Server::Impl {
 public:
  explicit Impl(ServerOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : &system_clock_),
        store_(*clock_, options_.history_window),
        ssl_ctx_(ssl::context::tls_server),
        acceptor_(ioc_),
        faults_(options_.faults),
        rng_(std::random_device{}()) {}

  base::Status start();
  void stop();

  ServerOptions options_;
  base::SystemClock system_clock_;
  const base::Clock* clock_;
  Store store_;
  Pki pki_;
  std::string kubeconfig_path_;
  std::uint16_t port_ = 0;
  net::io_context ioc_;
  ssl::context ssl_ctx_;
  tcp::acceptor acceptor_;
  std::thread accept_thread_;
  std::thread kubelet_thread_;
  std::mutex kubelet_mu_;
  std::condition_variable kubelet_cv_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  std::mutex stop_mu_;

  struct Conn {
    int fd = -1;
    std::atomic<bool> done{false};
    std::thread thread{};
  };
  std::mutex conns_mu_;
  std::list<std::shared_ptr<Conn>> conns_;

  mutable std::mutex mu_;  // faults_, rng_, exec_log_, force_gone_
  Faults faults_;
  std::mt19937_64 rng_;
  std::vector<ExecRecord> exec_log_;
  bool force_gone_ = false;

  mutable std::mutex log_mu_;  // request_log_
  std::deque<RequestRecord> request_log_;

 private:
  void acceptLoop();
  void serve(tcp::socket socket, const std::shared_ptr<Conn>& conn);
  // Answers one request; false when the connection must close afterwards. `cert_user`: the
  // client certificate's identity, if the client presented one.
  bool handle(SslStream& stream, Request& req, const std::optional<UserInfo>& cert_user);
  // The RBAC objects that can apply to a request in `ns` ("" : cluster-scoped only).
  RbacPolicy rbacPolicy(const std::string& ns) const;
  void record(RequestAttributes&& attrs, const std::string& user, int code, bool allowed);
  Reply route(const Request& req, const std::vector<std::string>& segs, const Query& query,
              bool* is_watch, ParsedRoute* watch_route, ResourceInfo* watch_resource);
  Reply serveResource(const Request& req, const ParsedRoute& route, const Query& query,
                      bool* is_watch, ResourceInfo* resource_out);
  void serveWatch(SslStream& stream, const Request& req, const ResourceInfo& r,
                  const ParsedRoute& route, const Query& query);
  // Runs an exec; `answering(code)` is called just before the answer is written (101 when the
  // exec runs over the upgraded connection). Returns that code.
  int serveExec(SslStream& stream, Request& req, const ParsedRoute& route, const Query& query,
                const std::function<void(int)>& answering);
  void writeReply(SslStream& stream, const Request& req, const Reply& reply, bool keep_alive,
                  int retry_after = 0);
};

base::Status Server::Impl::start() {
  if (options_.out_dir.empty()) {
    return base::Error("kubesim: out_dir is required", base::ErrorCode::kInvalidArgument);
  }
  if (options_.pki) {
    pki_ = *options_.pki;
  } else {
    auto pki = generatePki();
    EKCO_TRY(pki);
    pki_ = std::move(*pki);
  }
  for (const json& obj : options_.objects) {
    auto put = store_.put(obj);
    if (!put) return std::move(put).error().wrap("kubesim: load object");
  }
  try {
    ssl_ctx_.use_certificate_chain(net::buffer(pki_.server_cert_pem));
    ssl_ctx_.use_private_key(net::buffer(pki_.server_key_pem), ssl::context::pem);
    ssl_ctx_.add_certificate_authority(net::buffer(pki_.ca_cert_pem));
    ssl_ctx_.set_verify_mode(ssl::verify_peer);
    static const unsigned char kSessionContext[] = "kubesim";
    SSL_CTX_set_session_id_context(ssl_ctx_.native_handle(), kSessionContext,
                                   sizeof(kSessionContext) - 1);
    tcp::endpoint endpoint(net::ip::make_address(options_.listen_address), options_.port);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
  } catch (const std::exception& e) {
    return base::Error(std::string("kubesim: listen on ") + options_.listen_address + ":" +
                           std::to_string(options_.port) + ": " + e.what(),
                       base::ErrorCode::kIo);
  }
  std::filesystem::path dir(options_.out_dir);
  kubeconfig_path_ =
      options_.kubeconfig_path.empty() ? (dir / "kubeconfig").string() : options_.kubeconfig_path;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string host = options_.listen_address == "0.0.0.0" ? "127.0.0.1" : options_.listen_address;
  std::string url = "https://" + host + ":" + std::to_string(port_);
  for (const auto& [file, text] :
       std::vector<std::pair<std::string, std::string>>{{"ca.crt", pki_.ca_cert_pem},
                                                        {"server.crt", pki_.server_cert_pem},
                                                        {"server.key", pki_.server_key_pem},
                                                        {"client.crt", pki_.client_cert_pem},
                                                        {"client.key", pki_.client_key_pem}}) {
    EKCO_TRY(writeFileAtomic(dir / file, text));
  }
  EKCO_TRY(writeFileAtomic(kubeconfig_path_, renderKubeconfig(pki_, url)));
  accept_thread_ = std::thread([this] { acceptLoop(); });
  kubelet_thread_ = std::thread([this] {
    std::unique_lock lock(kubelet_mu_);
    while (!stopping_) {
      kubelet_cv_.wait_for(lock, options_.kubelet_interval);
      if (stopping_) break;
      lock.unlock();
      store_.kubeletPass();
      lock.lock();
    }
  });
  return base::ok();
}

void Server::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard lock(kubelet_mu_);
    stopping_ = true;
  }
  kubelet_cv_.notify_all();
  store_.shutdown();
  if (acceptor_.is_open()) ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  if (kubelet_thread_.joinable()) kubelet_thread_.join();
  boost::system::error_code ec;
  acceptor_.close(ec);
  std::list<std::shared_ptr<Conn>> conns;
  {
    std::lock_guard lock(conns_mu_);
    for (auto& c : conns_) {
      if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
    }
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void Server::Impl::acceptLoop() {
  while (!stopping_) {
    tcp::socket socket(ioc_);
    boost::system::error_code ec;
    acceptor_.accept(socket, ec);
    if (stopping_) break;
    if (ec) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    // As Go's net/http does: without it Nagle's algorithm holds the last segment of each
    // answer until the client's delayed ACK, ~40 ms per request.
    socket.set_option(tcp::no_delay(true), ec);
    auto conn = std::make_shared<Conn>();
    conn->fd = socket.native_handle();
    std::lock_guard lock(conns_mu_);
    // Reap finished connection threads.
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done) {
        (*it)->thread.join();
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    conn->thread =
        std::thread([this, conn, s = std::move(socket)]() mutable { serve(std::move(s), conn); });
    conns_.push_back(conn);
  }
}

void Server::Impl::serve(tcp::socket socket, const std::shared_ptr<Conn>& conn) {
  SslStream stream(std::move(socket), ssl_ctx_);
  try {
    stream.handshake(ssl::stream_base::server);
    const std::optional<UserInfo> cert_user = certificateUser(stream.native_handle());
    beast::flat_buffer buffer;
    while (!stopping_) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64u << 20);
      http::read(stream, buffer, parser);
      Request req = parser.release();
      if (!handle(stream, req, cert_user)) break;
    }
    boost::system::error_code ec;
    stream.shutdown(ec);
  } catch (const std::exception&) {
    // The client went away or sent garbage: nothing to answer.
  }
  {
    // Before the socket closes (at the end of this scope), so stop() never shuts down an fd
    // number that has been reused.
    std::lock_guard lock(conns_mu_);
    conn->fd = -1;
  }
  conn->done = true;
}

void Server::Impl::writeReply(SslStream& stream, const Request& req, const Reply& reply,
                              bool keep_alive, int retry_after) {
  http::response<http::string_body> res{static_cast<http::status>(reply.code), req.version()};
  res.set(http::field::server, "kubesim");
  if (reply.body.is_string()) {
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = reply.body.get<std::string>();
  } else {
    res.set(http::field::content_type, "application/json");
    res.body() = reply.body.dump();
  }
  if (retry_after > 0) res.set(http::field::retry_after, std::to_string(retry_after));
  res.keep_alive(keep_alive);
  res.prepare_payload();
  http::write(stream, res);
}

RbacPolicy Server::Impl::rbacPolicy(const std::string& ns) const {
  RbacPolicy policy;
  auto load = [&](const char* plural, const std::string& in_ns, std::vector<json>* out) {
    auto r = store_.findResource("rbac.authorization.k8s.io", "v1", plural);
    if (!r) return;
    Reply listed = store_.list(*r, in_ns, ListOptions{});
    if (listed.code != 200) return;
    for (json& item : listed.body["items"]) out->push_back(std::move(item));
  };
  load("clusterroles", "", &policy.cluster_roles);
  load("clusterrolebindings", "", &policy.cluster_role_bindings);
  if (!ns.empty()) {
    load("roles", ns, &policy.roles);
    load("rolebindings", ns, &policy.role_bindings);
  }
  return policy;
}

void Server::Impl::record(RequestAttributes&& attrs, const std::string& user, int code,
                          bool allowed) {
  if (options_.request_log_limit == 0) return;
  RequestRecord rec{.user = user,
                    .verb = std::move(attrs.verb),
                    .api_group = std::move(attrs.api_group),
                    .resource = std::move(attrs.resource),
                    .subresource = std::move(attrs.subresource),
                    .ns = std::move(attrs.ns),
                    .name = std::move(attrs.name),
                    .path = std::move(attrs.path),
                    .code = code,
                    .allowed = allowed};
  std::lock_guard lock(log_mu_);
  while (request_log_.size() >= options_.request_log_limit) request_log_.pop_front();
  request_log_.push_back(std::move(rec));
}

bool Server::Impl::handle(SslStream& stream, Request& req,
                          const std::optional<UserInfo>& cert_user) {
  std::string_view target(req.target().data(), req.target().size());
  auto qpos = target.find('?');
  std::string path = percentDecode(target.substr(0, qpos));
  Query query = parseQuery(qpos == std::string_view::npos ? "" : target.substr(qpos + 1));
  std::vector<std::string> segs = splitPath(path);
  bool keep_alive = req.keep_alive();
  const bool upgrade = websocket::is_upgrade(req);
  RequestAttributes attrs =
      requestAttributes(std::string_view(req.method_string().data(), req.method_string().size()),
                        path, query, upgrade);

  // Authentication, as kube-apiserver's union authenticator: the client certificate first, then
  // a bearer token (unknown: 401), then anonymous.
  static const UserInfo kAnonymousAdmin{.name = "system:anonymous",
                                        .groups = {"system:unauthenticated", "system:masters"}};
  static const UserInfo kAnonymous{.name = "system:anonymous",
                                   .groups = {"system:unauthenticated"}};
  std::optional<UserInfo> token_user;
  const UserInfo* user = nullptr;
  if (cert_user) {
    user = &*cert_user;
  } else if (std::string token = bearerToken(std::string_view(
                 req[http::field::authorization].data(), req[http::field::authorization].size()));
             !token.empty()) {
    for (const TokenUser& t : options_.tokens) {
      if (t.token == token) {
        token_user = tokenUserInfo(t);
        break;
      }
    }
    if (!token_user) {
      // Recorded before answering, so a client that has its answer finds it in the log.
      record(std::move(attrs), "", 401, false);
      writeReply(stream, req, statusReply(401, "Unauthorized", "Unauthorized"), keep_alive);
      return keep_alive;
    }
    user = &*token_user;
  } else {
    user = options_.anonymous_admin ? &kAnonymousAdmin : &kAnonymous;
  }

  // Authorization: RBAC from the store (system:masters bypasses it).
  if (!user->isMaster()) {
    Decision decision = authorize(rbacPolicy(attrs.ns), *user, attrs);
    if (!decision.allowed) {
      Reply forbidden{.code = 403, .body = forbiddenStatus(*user, attrs, decision.reason)};
      record(std::move(attrs), user->name, 403, false);
      writeReply(stream, req, forbidden, keep_alive);
      return keep_alive;
    }
  }

  bool is_kubesim = !segs.empty() && segs[0] == "kubesim";
  if (!is_kubesim) {
    Faults faults;
    double roll = 0;
    {
      std::lock_guard lock(mu_);
      faults = faults_;
      roll = std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    if (faults.hang) {
      while (!stopping_) {
        {
          std::lock_guard lock(mu_);
          if (!faults_.hang) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      record(std::move(attrs), user->name, 0, true);
      return false;  // never answered: the connection closes
    }
    if (faults.latency.count() > 0) std::this_thread::sleep_for(faults.latency);
    if (roll < faults.rate_429) {
      record(std::move(attrs), user->name, 429, true);
      writeReply(stream, req,
                 statusReply(429, "TooManyRequests",
                             "the server has received too many requests "
                             "and has asked us to try again later"),
                 keep_alive, 1);
      return keep_alive;
    }
    if (roll < faults.rate_429 + faults.rate_500) {
      record(std::move(attrs), user->name, 500, true);
      writeReply(stream, req,
                 statusReply(500, "InternalError",
                             "an error on the server (\"injected by "
                             "kubesim\") has prevented the request from "
                             "succeeding"),
                 keep_alive);
      return keep_alive;
    }
  }

  bool is_watch = false;
  ParsedRoute watch_route;
  ResourceInfo watch_resource;
  Reply reply;
  try {
    // pods/exec takes over the connection (WebSocket).
    if (segs.size() >= 5 && segs.back() == "exec" && segs[0] == "api") {
      auto r = parseResourcePath(std::vector<std::string>(segs.begin() + 2, segs.end()));
      if (r && r->resource == "pods" && r->sub == "exec") {
        serveExec(stream, req, *r, query,
                  [&](int answered) { record(std::move(attrs), user->name, answered, true); });
        return false;
      }
    }
    if (attrs.resource_request && attrs.api_group == "authorization.k8s.io" &&
        attrs.resource == "selfsubjectaccessreviews" && attrs.ns.empty() && attrs.name.empty() &&
        attrs.subresource.empty()) {
      if (req.method() != http::verb::post) {
        reply = statusReply(405, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
      } else {
        std::string_view content_type(req[http::field::content_type].data(),
                                      req[http::field::content_type].size());
        json body;
        if (content_type.substr(0, 32) == "application/vnd.kubernetes.proto") {
          body =
              decodeSelfSubjectAccessReviewProtobuf(req.body()).value_or(json::value_t::discarded);
        } else {
          body = json::parse(req.body(), nullptr, false);
        }
        if (body.is_discarded()) {
          reply = statusReply(400, "BadRequest",
                              "the request body is not valid JSON (kubesim accepts only JSON)");
        } else {
          std::string ns;
          const json* attributes = body.is_object() ? &body : nullptr;
          for (const char* key : {"spec", "resourceAttributes", "namespace"}) {
            if (attributes == nullptr || !attributes->is_object() || !attributes->contains(key)) {
              attributes = nullptr;
              break;
            }
            attributes = &(*attributes)[key];
          }
          if (attributes != nullptr && attributes->is_string()) ns = attributes->get<std::string>();
          reply = selfSubjectAccessReview(user->isMaster() ? RbacPolicy{} : rbacPolicy(ns), *user,
                                          body);
        }
      }
    } else {
      reply = route(req, segs, query, &is_watch, &watch_route, &watch_resource);
    }
  } catch (const std::exception& e) {
    reply = statusReply(500, "InternalError", std::string("kubesim: ") + e.what());
  }
  if (is_watch) {
    record(std::move(attrs), user->name, 200, true);
    serveWatch(stream, req, watch_resource, watch_route, query);
    return false;
  }
  record(std::move(attrs), user->name, reply.code, true);
  writeReply(stream, req, reply, keep_alive);
  return keep_alive;
}

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
                          {"minor", "32"},
                          {"gitVersion", "v1.32.4"},
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
    if (segs.size() == 2) return Reply{.code = 200, .body = openapiRoot(all)};
    if (segs.size() == 4 && segs[2] == "api") {
      return Reply{.code = 200, .body = openapiGroupVersion(all, "", segs[3])};
    }
    if (segs.size() == 5 && segs[2] == "apis") {
      return Reply{.code = 200, .body = openapiGroupVersion(all, segs[3], segs[4])};
    }
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
  auto resource = store_.findResource(route.group, route.version, route.resource);
  const http::verb method = req.method();
  json body;
  bool has_body = !req.body().empty();
  if (has_body && method != http::verb::patch) {
    body = json::parse(req.body(), nullptr, false);
    if (body.is_discarded()) {
      return statusReply(400, "BadRequest",
                         "the request body is not valid JSON (kubesim accepts only JSON)");
    }
  }
  if (!resource && method == http::verb::post && route.name.empty() && body.is_object()) {
    // A custom resource created before any object of its kind was seen: learn it from the body.
    std::string api_version =
        route.group.empty() ? route.version : route.group + "/" + route.version;
    if (body.value("apiVersion", "") == api_version) {
      auto learned = store_.resourceForObject(body);
      if (learned && learned->plural == route.resource) resource = *learned;
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
  auto method_not_allowed = [&] {
    return statusReply(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource");
  };
  auto patch_type = [&] { return std::string(req[http::field::content_type]); };

  if (route.name.empty()) {
    if (method == http::verb::get) {
      if (queryFlag(query, "watch")) {
        auto labels = LabelSelector::parse(queryValue(query, "labelSelector"));
        if (!labels) return statusReply(400, "BadRequest", labels.error().message());
        auto fields = FieldSelector::parse(queryValue(query, "fieldSelector"));
        if (!fields) return statusReply(400, "BadRequest", fields.error().message());
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
                          .continue_token = queryValue(query, "continue"),
                          .resource_version = queryValue(query, "resourceVersion"),
                          .resource_version_match = queryValue(query, "resourceVersionMatch")};
      return store_.list(r, route.ns, options);
    }
    if (method == http::verb::post) {
      if (r.namespaced && route.ns.empty()) return method_not_allowed();
      if (!body.is_object())
        return statusReply(400, "BadRequest", "the body must be a JSON object");
      return store_.create(r, route.ns, std::move(body));
    }
    if (method == http::verb::delete_) {
      ListOptions options = selectorsOnly(query);
      Reply listed = store_.list(r, route.ns, options);
      if (listed.code != 200) return listed;
      for (const json& item : listed.body["items"]) {
        (void)store_.remove(r, item["metadata"].value("namespace", ""),
                            item["metadata"].value("name", ""), DeleteOptions{});
      }
      return listed;
    }
    return method_not_allowed();
  }

  if (route.sub == "scale") {
    if (method == http::verb::get) return store_.getScale(r, route.ns, route.name);
    if (method == http::verb::put) return store_.updateScale(r, route.ns, route.name, body);
    if (method == http::verb::patch) {
      return store_.patchScale(r, route.ns, route.name, patch_type(), req.body());
    }
    return method_not_allowed();
  }
  if (route.sub == "eviction") {
    if (method != http::verb::post) return method_not_allowed();
    return store_.evict(route.ns, route.name, body);
  }
  if (route.sub == "exec") {
    return statusReply(400, "BadRequest",
                       "Upgrade request required (kubesim serves exec over WebSocket only: "
                       "v5.channel.k8s.io, v4.channel.k8s.io)");
  }
  switch (method) {
    case http::verb::get:
      return store_.get(r, route.ns, route.name);
    case http::verb::put:
      if (!body.is_object())
        return statusReply(400, "BadRequest", "the body must be a JSON object");
      return store_.update(r, route.ns, route.name, std::move(body), route.sub);
    case http::verb::patch:
      return store_.patch(r, route.ns, route.name, patch_type(), req.body(), route.sub);
    case http::verb::delete_: {
      if (!route.sub.empty()) return method_not_allowed();
      DeleteOptions options;
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
      return store_.remove(r, route.ns, route.name, options);
    }
    default:
      return method_not_allowed();
  }
}

void Server::Impl::serveWatch(SslStream& stream, const Request& req, const ResourceInfo& r,
                              const ParsedRoute& route, const Query& query) {
  // Selectors were validated by serveResource.
  LabelSelector labels = *LabelSelector::parse(queryValue(query, "labelSelector"));
  FieldSelector fields = *FieldSelector::parse(queryValue(query, "fieldSelector"));
  const bool bookmarks = queryFlag(query, "allowWatchBookmarks");
  const auto timeout =
      std::chrono::seconds(toInt(queryValue(query, "timeoutSeconds")).value_or(1800));
  const std::string rv_text = queryValue(query, "resourceVersion");
  Faults faults;
  bool force_gone = false;
  {
    std::lock_guard lock(mu_);
    faults = faults_;
    force_gone = std::exchange(force_gone_, false);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;

  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::server, "kubesim");
  res.set(http::field::content_type, "application/json");
  res.chunked(true);
  res.keep_alive(false);
  http::response_serializer<http::empty_body> serializer{res};
  int sent = 0;
  try {
    http::write_header(stream, serializer);
    auto send = [&](const json& event) {
      std::string line = event.dump() + "\n";
      net::write(stream, http::make_chunk(net::buffer(line)));
    };
    auto finish = [&] { net::write(stream, http::make_chunk_last()); };
    std::uint64_t last = 0;
    if (rv_text.empty() || rv_text == "0") {
      // No resourceVersion: the current state as synthetic ADDED events, then changes.
      ListOptions options = selectorsOnly(query);
      Reply listed = store_.list(r, route.ns, options);
      last = std::stoull(listed.body["metadata"]["resourceVersion"].get<std::string>());
      for (const json& item : listed.body["items"]) {
        if (faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events) break;
        send({{"type", "ADDED"}, {"object", item}});
        ++sent;
      }
    } else {
      last = static_cast<std::uint64_t>(*toInt(rv_text));
    }
    auto bookmark = [&] {
      send({{"type", "BOOKMARK"},
            {"object",
             {{"kind", r.kind},
              {"apiVersion", r.apiVersion()},
              {"metadata", {{"resourceVersion", std::to_string(last)}}}}}});
    };
    if (force_gone) {
      send(goneEvent(last, store_.resourceVersion()));
      finish();
      return;
    }
    auto next_bookmark = start;
    while (!stopping_ &&
           !(faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events)) {
      {
        // Faults set while the stream is open apply to it too (an outage cuts open watches).
        std::lock_guard lock(mu_);
        faults = faults_;
      }
      if (faults.hang || faults.stall_watches) {
        // Silent: no event, no bookmark, for as long as the fault lasts (or the watch's time).
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      std::uint64_t scanned = last;
      auto events = store_.eventsAfter(last, r.key(), &scanned);
      if (!events) {
        // The apiserver's watch cache answers a too-old resourceVersion with an ERROR event
        // (HTTP 200): Status code 410, reason Expired.
        send(goneEvent(last, store_.resourceVersion()));
        break;
      }
      for (const WatchEvent& e : *events) {
        auto type = filteredType(e, route.ns, labels, fields);
        if (!type) continue;
        send({{"type", *type}, {"object", e.object}});
        ++sent;
        if (faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events) break;
      }
      last = scanned;
      auto now = std::chrono::steady_clock::now();
      if (faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events) break;
      if (faults.drop_watch_after.count() > 0 && now - start >= faults.drop_watch_after) break;
      if (now >= deadline) break;
      if (bookmarks && now >= next_bookmark) {
        bookmark();
        next_bookmark = now + options_.bookmark_interval;
      }
      auto wake = deadline;
      if (bookmarks) wake = std::min(wake, next_bookmark);
      if (faults.drop_watch_after.count() > 0)
        wake = std::min(wake, start + faults.drop_watch_after);
      wake = std::min(wake, now + std::chrono::milliseconds(500));
      store_.waitForChange(last, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now) +
                                     std::chrono::milliseconds(1));
      if (store_.isShutdown()) break;
    }
    finish();
  } catch (const std::exception&) {
    // The watcher went away.
  }
}

int Server::Impl::serveExec(SslStream& stream, Request& req, const ParsedRoute& route,
                            const Query& query, const std::function<void(int)>& answering) {
  std::vector<std::string> command;
  for (const auto& [k, v] : query) {
    if (k == "command") command.push_back(v);
  }
  auto pods = store_.findResource("", "v1", "pods");
  Reply pod = store_.get(*pods, route.ns, route.name);
  std::string container = queryValue(query, "container");
  if (pod.code == 200 && container.empty()) {
    const json& containers =
        pod.body.value("spec", json::object()).value("containers", json::array());
    if (!containers.empty()) container = containers[0].value("name", "");
  }
  std::string offered(req[http::field::sec_websocket_protocol]);
  std::string protocol;
  for (const char* p : {"v5.channel.k8s.io", "v4.channel.k8s.io"}) {
    if (offered.find(p) != std::string::npos) {
      protocol = p;
      break;
    }
  }
  if (pod.code != 200 || !websocket::is_upgrade(req) || protocol.empty() || command.empty()) {
    Reply reply = pod.code != 200 ? pod
                  : command.empty()
                      ? statusReply(400, "BadRequest", "you must specify at least 1 command")
                      : statusReply(400, "BadRequest",
                                    "kubesim serves exec only as a WebSocket upgrade with "
                                    "v5.channel.k8s.io or v4.channel.k8s.io");
    answering(reply.code);
    try {
      writeReply(stream, req, reply, false);
    } catch (const std::exception&) {
    }
    return reply.code;
  }
  ExecReply answer;
  {
    std::lock_guard lock(mu_);
    exec_log_.push_back(
        ExecRecord{.ns = route.ns, .pod = route.name, .container = container, .command = command});
    for (const ExecReply& scripted : options_.exec_script) {
      if (scripted.command_prefix.size() <= command.size() &&
          std::equal(scripted.command_prefix.begin(), scripted.command_prefix.end(),
                     command.begin())) {
        answer = scripted;
        break;
      }
    }
  }
  answering(101);
  try {
    websocket::stream<SslStream&> ws(stream);
    ws.set_option(websocket::stream_base::decorator([protocol](websocket::response_type& res) {
      res.set(http::field::sec_websocket_protocol, protocol);
    }));
    ws.accept(req);
    ws.binary(true);
    auto send = [&](char channel, const std::string& data) {
      std::string frame(1, channel);
      frame += data;
      ws.write(net::buffer(frame));
    };
    if (!answer.stdout_data.empty()) send(1, answer.stdout_data);
    if (!answer.stderr_data.empty()) send(2, answer.stderr_data);
    json status;
    if (answer.exit_code == 0) {
      status = {{"metadata", json::object()}, {"status", "Success"}};
    } else {
      status = {{"metadata", json::object()},
                {"status", "Failure"},
                {"message",
                 "command terminated with non-zero exit code: error executing "
                 "command [" +
                     command[0] + "], exit code " + std::to_string(answer.exit_code)},
                {"reason", "NonZeroExitCode"},
                {"details",
                 {{"causes",
                   {{{"reason", "ExitCode"}, {"message", std::to_string(answer.exit_code)}}}}}}};
    }
    send(3, status.dump());
    ws.close(websocket::close_code::normal);
  } catch (const std::exception&) {
    // The client went away.
  }
  return 101;
}

// --- Server ---

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

base::Result<std::unique_ptr<Server>> Server::start(ServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  auto started = impl->start();
  if (!started) {
    impl->stop();
    return std::move(started).error();
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::uint16_t Server::port() const { return impl_->port_; }
std::string Server::url() const { return "https://127.0.0.1:" + std::to_string(impl_->port_); }
const std::string& Server::kubeconfigPath() const { return impl_->kubeconfig_path_; }
const std::string& Server::caPem() const { return impl_->pki_.ca_cert_pem; }
const Pki& Server::pki() const { return impl_->pki_; }
const std::string& Server::clientCertPem() const { return impl_->pki_.client_cert_pem; }
const std::string& Server::clientKeyPem() const { return impl_->pki_.client_key_pem; }
void Server::stop() { impl_->stop(); }
base::Result<json> Server::put(json object) { return impl_->store_.put(std::move(object)); }
std::optional<json> Server::get(std::string_view resource, std::string_view ns,
                                std::string_view name) const {
  return impl_->store_.get(resource, ns, name);
}
bool Server::remove(std::string_view resource, std::string_view ns, std::string_view name) {
  return impl_->store_.remove(resource, ns, name);
}
Store& Server::store() { return impl_->store_; }
void Server::runKubelet() { impl_->store_.kubeletPass(); }
void Server::compactHistory() { impl_->store_.compact(); }
void Server::forceGoneOnNextWatch() {
  std::lock_guard lock(impl_->mu_);
  impl_->force_gone_ = true;
}
void Server::setFaults(const Faults& faults) {
  std::lock_guard lock(impl_->mu_);
  impl_->faults_ = faults;
}
std::vector<ExecRecord> Server::execLog() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->exec_log_;
}
std::vector<RequestRecord> Server::requestLog() const {
  std::lock_guard lock(impl_->log_mu_);
  return std::vector<RequestRecord>(impl_->request_log_.begin(), impl_->request_log_.end());
}
void Server::clearRequestLog() {
  std::lock_guard lock(impl_->log_mu_);
  impl_->request_log_.clear();
}
base::Result<void> Server::writeTokenKubeconfig(const std::string& path,
                                                const std::string& token) const {
  std::string user_name = "kubesim-token";
  for (const TokenUser& t : impl_->options_.tokens) {
    if (t.token == token) {
      user_name = t.user;
      break;
    }
  }
  std::filesystem::path file = std::filesystem::absolute(path);
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  return writeFileAtomic(file, renderTokenKubeconfig(impl_->pki_, url(), user_name, token));
}

}  // namespace ekco::kubesim
