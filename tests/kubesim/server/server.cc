#include "tests/kubesim/server/server.h"

#include <cstdio>

#include "tests/kubesim/controllers/csr.h"
#include "tests/kubesim/rbac/request_user.h"
#include "tests/kubesim/server/server_impl.h"
#include "tests/kubesim/validation/validation.h"

// ekco-kubesim: start and stop, connections, authentication, authorization and dispatch;
// the Server facade.

namespace ekco::kubesim {

using namespace server_detail;  // NOLINT(google-build-using-namespace): this server's internals

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
  listeners_.push_back(std::make_unique<Listener>(ioc_));
  EKCO_TRY(listen(*listeners_.front(), options_.listen_address, options_.port,
                  options_.serving_cert_file, options_.serving_key_file));
  port_ = listeners_.front()->port;
  for (const ApiserverListener& more : options_.more_apiservers) {
    listeners_.push_back(std::make_unique<Listener>(ioc_));
    EKCO_TRY(listen(*listeners_.back(), more.address, more.port, more.serving_cert_file,
                    more.serving_key_file));
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
  for (auto& l : listeners_) {
    l->accept_thread = std::thread([this, raw = l.get()] { acceptLoop(*raw); });
  }
  kubelet_thread_ = std::thread([this] {
    std::unique_lock lock(kubelet_mu_);
    while (!stopping_) {
      kubelet_cv_.wait_for(lock, options_.kubelet_interval);
      if (stopping_) break;
      lock.unlock();
      try {
        lifecycle_.pass();
        store_.kubeletPass();
        store_.namespaceControllerPass();
        store_.garbageCollectorPass();
        store_.disruptionControllerPass();
        csr::signerPass(store_, pki_, clock_->wallNow());
      } catch (const std::exception& e) {
        // An object the pass cannot read must not end the server (std::terminate): say so and
        // carry on; the typed writes (types.h) keep such objects out of the store.
        std::fprintf(stderr, "kubesim: kubelet pass: %s\n", e.what());
      }
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
  for (auto& l : listeners_) {
    if (l->acceptor.is_open()) ::shutdown(l->acceptor.native_handle(), SHUT_RDWR);
    if (l->accept_thread.joinable()) l->accept_thread.join();
  }
  if (kubelet_thread_.joinable()) kubelet_thread_.join();
  for (auto& l : listeners_) {
    boost::system::error_code ec;
    l->acceptor.close(ec);
  }
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

base::Status Server::Impl::listen(Listener& l, const std::string& address, std::uint16_t port,
                                  const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return base::Error("kubesim: a serving certificate file and its key file go together",
                       base::ErrorCode::kInvalidArgument);
  }
  if (!cert_file.empty()) {
    auto served = FileServingCert::open(cert_file, key_file);
    if (!served) return std::move(served).error();
    l.file_cert = std::move(*served);
    l.file_cert->install(l.ssl_ctx.native_handle());
  }
  try {
    // With serving files, the callback supplies the only certificate (a second one of another
    // key type would be chosen by some clients' signature preferences).
    if (!l.file_cert) {
      l.ssl_ctx.use_certificate_chain(net::buffer(pki_.server_cert_pem));
      l.ssl_ctx.use_private_key(net::buffer(pki_.server_key_pem), ssl::context::pem);
    }
    l.ssl_ctx.add_certificate_authority(net::buffer(pki_.ca_cert_pem));
    l.ssl_ctx.set_verify_mode(ssl::verify_peer);
    static const unsigned char kSessionContext[] = "kubesim";
    SSL_CTX_set_session_id_context(l.ssl_ctx.native_handle(), kSessionContext,
                                   sizeof(kSessionContext) - 1);
    tcp::endpoint endpoint(net::ip::make_address(address), port);
    l.acceptor.open(endpoint.protocol());
    l.acceptor.set_option(net::socket_base::reuse_address(true));
    l.acceptor.bind(endpoint);
    l.acceptor.listen(net::socket_base::max_listen_connections);
    l.port = l.acceptor.local_endpoint().port();
  } catch (const std::exception& e) {
    return base::Error(
        "kubesim: listen on " + address + ":" + std::to_string(port) + ": " + e.what(),
        base::ErrorCode::kIo);
  }
  return base::ok();
}

void Server::Impl::acceptLoop(Listener& l) {
  while (!stopping_) {
    tcp::socket socket(ioc_);
    boost::system::error_code ec;
    l.acceptor.accept(socket, ec);
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
    conn->thread = std::thread([this, conn, &l, s = std::move(socket)]() mutable {
      serve(std::move(s), conn, l.ssl_ctx);
    });
    conns_.push_back(conn);
  }
}

void Server::Impl::serve(tcp::socket socket, const std::shared_ptr<Conn>& conn, ssl::context& ctx) {
  SslStream stream(std::move(socket), ctx);
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

namespace {

// Whether a CSR /status write (`req`: a PUT of the object, or a patch) sets status.certificate to
// something other than `stored`'s. A patch counts when it names status.certificate at all.
bool csrCertificateChanges(const Request& req, const json& stored) {
  json body = json::parse(req.body(), nullptr, false);
  if (body.is_discarded()) return false;
  const json none = json();
  const json& old = stored.contains("status") && stored["status"].is_object()
                        ? stored["status"].value("certificate", none)
                        : none;
  if (body.is_array()) {  // a JSON patch
    for (const json& op : body) {
      if (op.is_object() && op.value("path", std::string()).starts_with("/status/certificate")) {
        return true;
      }
    }
    return false;
  }
  if (!body.is_object() || !body.contains("status") || !body["status"].is_object()) return false;
  const json& status = body["status"];
  if (!status.contains("certificate")) return false;
  return req.method() == http::verb::patch || status["certificate"] != old;
}

}  // namespace

void Server::Impl::writeReply(SslStream& stream, const Request& req, const Reply& reply,
                              bool keep_alive, int retry_after) {
  http::response<http::string_body> res{static_cast<http::status>(reply.code), req.version()};
  res.set(http::field::server, "kubesim");
  if (reply.body.is_string()) {
    res.set(http::field::content_type,
            reply.content_type.empty() ? "text/plain; charset=utf-8" : reply.content_type);
    res.body() = reply.body.get<std::string>();
  } else {
    res.set(http::field::content_type, "application/json");
    res.body() = reply.body.dump();
  }
  if (retry_after > 0) res.set(http::field::retry_after, std::to_string(retry_after));
  // As kube-apiserver's warning recorder writes them: code 299, agent "-", the text Go-quoted.
  for (const std::string& w : reply.warnings)
    res.insert(http::field::warning, "299 - " + goQuote(w));
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

// Authentication, as kube-apiserver's union authenticator: the client certificate first, then
// a bearer token (unknown: nullptr, answered 401 by the caller), then anonymous. token_user
// holds a token's user for the returned pointer.
const UserInfo* Server::Impl::authenticate(const Request& req,
                                           const std::optional<UserInfo>& cert_user,
                                           std::optional<UserInfo>& token_user) const {
  static const UserInfo kAnonymousAdmin{.name = "system:anonymous",
                                        .groups = {"system:unauthenticated", "system:masters"}};
  static const UserInfo kAnonymous{.name = "system:anonymous",
                                   .groups = {"system:unauthenticated"}};
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
    if (!token_user) return nullptr;
    user = &*token_user;
  } else {
    user = options_.anonymous_admin ? &kAnonymousAdmin : &kAnonymous;
  }
  return user;
}

// The faults injected with setFaults(), for requests outside /kubesim: a hang, latency, 429s
// and 500s. The connection's keep-alive when a fault answered (or hung up), else nullopt.
std::optional<bool> Server::Impl::injectFaults(SslStream& stream, Request& req,
                                               RequestAttributes& attrs, const std::string& user,
                                               bool keep_alive) {
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
    record(std::move(attrs), user, 0, true);
    return false;  // never answered: the connection closes
  }
  if (faults.latency.count() > 0) std::this_thread::sleep_for(faults.latency);
  if (roll < faults.rate_429) {
    record(std::move(attrs), user, 429, true);
    writeReply(stream, req,
               statusReply(429, "TooManyRequests",
                           "the server has received too many requests "
                           "and has asked us to try again later"),
               keep_alive, 1);
    return keep_alive;
  }
  if (roll < faults.rate_429 + faults.rate_500) {
    record(std::move(attrs), user, 500, true);
    writeReply(stream, req,
               statusReply(500, "InternalError",
                           "an error on the server (\"injected by "
                           "kubesim\") has prevented the request from "
                           "succeeding"),
               keep_alive);
    return keep_alive;
  }
  return std::nullopt;
}

// A SelfSubjectAccessReview, answered from the same RBAC evaluator as every request.
Reply Server::Impl::serveSelfSubjectAccessReview(const Request& req, const UserInfo& user) {
  Reply reply;
  if (req.method() != http::verb::post) {
    reply = statusReply(405, "MethodNotAllowed",
                        "the server does not allow this method on the requested resource");
  } else {
    std::string_view content_type(req[http::field::content_type].data(),
                                  req[http::field::content_type].size());
    json body;
    if (content_type.substr(0, 32) == "application/vnd.kubernetes.proto") {
      body = decodeSelfSubjectAccessReviewProtobuf(req.body()).value_or(json::value_t::discarded);
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
      reply = selfSubjectAccessReview(user.isMaster() ? RbacPolicy{} : rbacPolicy(ns), user, body);
    }
  }
  return reply;
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
  std::optional<UserInfo> token_user;
  const UserInfo* user = authenticate(req, cert_user, token_user);
  if (user == nullptr) {
    // Recorded before answering, so a client that has its answer finds it in the log.
    record(std::move(attrs), "", 401, false);
    writeReply(stream, req, statusReply(401, "Unauthorized", "Unauthorized"), keep_alive);
    return keep_alive;
  }

  // Impersonation (Impersonate-User, -Group, -Uid, -Extra-*: `kubectl --as`), between
  // authentication and authorization as in kube-apiserver: the requester must be allowed to
  // impersonate, then the request is authorized and served as the impersonated user.
  std::optional<UserInfo> impersonated;
  if (ImpersonationHeaders asked = impersonationHeaders(req); !asked.empty()) {
    Impersonation result =
        impersonate(*user, asked, [this](const std::string& ns) { return rbacPolicy(ns); });
    if (result.refused) {
      record(std::move(attrs), user->name, result.refused->code, false);
      writeReply(stream, req, *result.refused, keep_alive);
      return keep_alive;
    }
    impersonated = std::move(result.user);
    user = &*impersonated;
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

  // The CertificateApproval admission plugin: /approval also needs `approve` on the signer.
  if (attrs.resource == "certificatesigningrequests" && attrs.subresource == "approval" &&
      (attrs.verb == "update" || attrs.verb == "patch") && !user->isMaster()) {
    auto stored = store_.get("certificatesigningrequests.certificates.k8s.io", "", attrs.name);
    if (stored) {
      if (auto refused = csr::admitApproval(rbacPolicy(""), *user, *stored)) {
        record(std::move(attrs), user->name, 403, false);
        writeReply(stream, req, *refused, keep_alive);
        return keep_alive;
      }
    }
  }
  // The CertificateSigning admission plugin: a /status write that sets or changes
  // status.certificate also needs `sign` on the signer.
  if (attrs.resource == "certificatesigningrequests" && attrs.subresource == "status" &&
      (attrs.verb == "update" || attrs.verb == "patch") && !user->isMaster()) {
    auto stored = store_.get("certificatesigningrequests.certificates.k8s.io", "", attrs.name);
    if (stored && csrCertificateChanges(req, *stored)) {
      if (auto refused = csr::admitSigning(rbacPolicy(""), *user, *stored)) {
        record(std::move(attrs), user->name, 403, false);
        writeReply(stream, req, *refused, keep_alive);
        return keep_alive;
      }
    }
  }
  // Admission and registry strategies see the caller (a CSR's spec.username, AdmissionReview).
  ScopedCurrentUser scoped_user(user);

  bool is_kubesim = !segs.empty() && segs[0] == "kubesim";
  if (!is_kubesim) {
    if (auto answered = injectFaults(stream, req, attrs, user->name, keep_alive)) return *answered;
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
      reply = serveSelfSubjectAccessReview(req, *user);
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
std::uint16_t Server::apiserverPort(std::size_t i) const {
  return impl_->listeners_.at(i + 1)->port;
}
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
NodeLifecycle& Server::nodeLifecycle() { return impl_->lifecycle_; }
void Server::runKubelet() {
  impl_->lifecycle_.pass();
  impl_->store_.kubeletPass();
  impl_->store_.namespaceControllerPass();
  csr::signerPass(impl_->store_, impl_->pki_, impl_->clock_->wallNow());
}
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
