// Internal to ekco-kubesim's server (server*.cc): the connection and request machinery shared by
// the files it is split into (server.cc: start, connections, authentication, authorization,
// dispatch; server_routes.cc: discovery and resources; server_watch.cc; server_exec.cc).
#pragma once

#include "tests/kubesim/server/server.h"
#include "tests/kubesim/server/serving_cert.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <utility>

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

#include "tests/kubesim/rbac/rbac.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/store/selector.h"

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

using Query = std::vector<std::pair<std::string, std::string>>;

namespace server_detail {

struct ParsedRoute {
  std::string group{};
  std::string version{};
  std::string ns{};
  std::string resource{};
  std::string name{};
  std::string sub{};
};

std::string percentDecode(std::string_view s);

Query parseQuery(std::string_view q);

std::string queryValue(const Query& q, std::string_view key, std::string fallback = "");

// List options with just the label and field selectors of the query: a whole, unpaged list.
ListOptions selectorsOnly(const Query& q);

bool queryFlag(const Query& q, std::string_view key);

std::vector<std::string> splitPath(std::string_view path);

std::optional<std::int64_t> toInt(const std::string& s);

base::Status writeFileAtomic(const std::filesystem::path& path, const std::string& data);

json resourceList(const std::vector<ResourceInfo>& all, const std::string& group,
                  const std::string& version);

json groupVersions(const std::vector<ResourceInfo>& all, const std::string& group);

json apiGroup(const std::vector<ResourceInfo>& all, const std::string& group);

// Whether a watch event passes the watch's selectors, and as which type: an object that starts
// or stops matching is ADDED or DELETED for this watcher, as the API server's filtered watch.
std::optional<std::string> filteredType(const WatchEvent& e, const std::string& ns,
                                        const LabelSelector& labels, const FieldSelector& fields);

json goneEvent(std::uint64_t requested, std::uint64_t oldest);

// The identity of a TLS client certificate (verified against the CA): CN is the user name, each
// O a group, as kube-apiserver's x509 authenticator.
std::optional<UserInfo> certificateUser(SSL* ssl);

// The bearer token of an Authorization header ("Bearer TOKEN", scheme case-insensitive), or "".
std::string bearerToken(std::string_view header);

// Splits ".../namespaces/NS/RES/NAME/SUB" or ".../RES/NAME/SUB" (segments after the version).
std::optional<ParsedRoute> parseResourcePath(std::vector<std::string> rest);

// The request's impersonation headers (names case-insensitive, as Go's http.Header).
ImpersonationHeaders impersonationHeaders(const Request& req);

}  // namespace server_detail

using server_detail::ParsedRoute;

class Server::Impl {
 public:
  explicit Impl(ServerOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : &system_clock_),
        store_(*clock_, options_.history_window),
        lifecycle_(store_, *clock_, options_.controllers),
        faults_(options_.faults),
        rng_(std::random_device{}()) {}

  base::Status start();
  void stop();

  ServerOptions options_;
  base::SystemClock system_clock_;
  const base::Clock* clock_;
  Store store_;
  NodeLifecycle lifecycle_;
  Pki pki_;
  std::string kubeconfig_path_;
  std::uint16_t port_ = 0;
  net::io_context ioc_;
  // A listening socket with its TLS context: the server's own, and one per
  // ServerOptions::more_apiservers.
  struct Listener {
    explicit Listener(net::io_context& ioc) : ssl_ctx(ssl::context::tls_server), acceptor(ioc) {}
    ssl::context ssl_ctx;
    std::unique_ptr<FileServingCert> file_cert;  // serving files, when given
    tcp::acceptor acceptor;
    std::thread accept_thread;
    std::uint16_t port = 0;
  };
  std::vector<std::unique_ptr<Listener>> listeners_;  // [0]: ServerOptions::listen_address
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
  // Opens `l` on address:port serving the PKI's pair or, when given, the files.
  base::Status listen(Listener& l, const std::string& address, std::uint16_t port,
                      const std::string& cert_file, const std::string& key_file);
  void acceptLoop(Listener& l);
  void serve(tcp::socket socket, const std::shared_ptr<Conn>& conn, ssl::context& ctx);
  // Answers one request; false when the connection must close afterwards. `cert_user`: the
  // client certificate's identity, if the client presented one.
  bool handle(SslStream& stream, Request& req, const std::optional<UserInfo>& cert_user);
  const UserInfo* authenticate(const Request& req, const std::optional<UserInfo>& cert_user,
                               std::optional<UserInfo>& token_user) const;
  std::optional<bool> injectFaults(SslStream& stream, Request& req, RequestAttributes& attrs,
                                   const std::string& user, bool keep_alive);
  Reply serveSelfSubjectAccessReview(const Request& req, const UserInfo& user);
  // The RBAC objects that can apply to a request in `ns` ("" : cluster-scoped only).
  RbacPolicy rbacPolicy(const std::string& ns) const;
  void record(RequestAttributes&& attrs, const std::string& user, int code, bool allowed);
  Reply route(const Request& req, const std::vector<std::string>& segs, const Query& query,
              bool* is_watch, ParsedRoute* watch_route, ResourceInfo* watch_resource);
  Reply serveResource(const Request& req, const ParsedRoute& route, const Query& query,
                      bool* is_watch, ResourceInfo* resource_out);
  // events.k8s.io/v1 Events, a view of core/v1 Events (server_events.cc).
  Reply serveEventsView(const Request& req, const ParsedRoute& route, const Query& query,
                        bool* is_watch, ResourceInfo* resource_out);
  Reply serveCollection(const Request& req, const ResourceInfo& r, const ParsedRoute& route,
                        const Query& query, json body, bool* is_watch, ResourceInfo* resource_out);
  void serveWatch(SslStream& stream, const Request& req, const ResourceInfo& r,
                  const ParsedRoute& route, const Query& query);
  // Runs an exec; `answering(code)` is called just before the answer is written (101 when the
  // exec runs over the upgraded connection). Returns that code.
  int serveExec(SslStream& stream, Request& req, const ParsedRoute& route, const Query& query,
                const std::function<void(int)>& answering);
  void writeReply(SslStream& stream, const Request& req, const Reply& reply, bool keep_alive,
                  int retry_after = 0);
};

}  // namespace ekco::kubesim
