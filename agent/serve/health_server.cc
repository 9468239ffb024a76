#include "agent/serve/health_server.h"

#include "agent/serve/connection_loop.h"
#include "agent/serve/http_parse.h"
#include "agent/serve/listen.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/clock.h"
#include "base/os/unique_fd.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/json_fields.h"

namespace ekco::agent {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using Socket = net::generic::stream_protocol::socket;
using UnixSocket = net::local::stream_protocol::socket;
using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

// sun_path holds 108 bytes including the terminating NUL.
constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

Error errnoErrorOf(std::string_view context, int err) {
  Error e = base::errnoError(context, err);
  if (err == ECONNREFUSED || err == EAGAIN) return Error(e.message(), ErrorCode::kUnavailable);
  return e;
}

Result<sockaddr_un> unixAddress(const std::string& path) {
  if (path.size() > kMaxSocketPath) {
    return Error(fmt::format("socket path {} is {} bytes long; a unix socket path has at most {}",
                             path, path.size(), kMaxSocketPath),
                 ErrorCode::kInvalidArgument);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// The socket's directory, opened under the root through hostfs (every symlink on the way
// resolved inside the root, as for every host path), and names in it. Binding and connecting
// go through /proc/self/fd/N/<name>: the kernel resolves the directory we checked, whatever a
// symlink on the original path points to by then.
struct SocketDir {
  base::UniqueFd fd;
  std::string where;  // the directory's path as this process sees it, for messages

  std::string via(const std::string& name) const {
    return "/proc/self/fd/" + std::to_string(fd.get()) + "/" + name;
  }
  std::string shown(const std::string& name) const {
    return where == "/" ? "/" + name : where + "/" + name;
  }
};

// (1) The directory of `socket_path` (a path under `root`): missing parents created 0755 and
// the socket's own directory 0750, exactly (the umask plays no part); existing ones are left as
// they are.
Result<SocketDir> openSocketDir(std::string root, const std::string& socket_path,
                                const base::Clock& clock) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  std::string host_path = socket_path;
  if (root != "/") {
    if (!socket_path.starts_with(root + "/")) {
      return Error(
          fmt::format("the health socket {} is not under the host root {}", socket_path, root),
          ErrorCode::kInvalidArgument);
    }
    host_path = socket_path.substr(root.size());
  }
  const std::filesystem::path dir = std::filesystem::path(host_path).parent_path();
  auto fs = hostfs::LocalHostFs::open(root, clock);
  EKCO_TRY(fs);
  if (dir != dir.root_path()) {
    EKCO_TRY((*fs)->makeDirs(dir.parent_path().string(), 0755));
    EKCO_TRY((*fs)->makeDirs(dir.string(), 0750));
  }
  auto fd = (*fs)->openDirectory(dir.string());
  EKCO_TRY(fd);
  return SocketDir{.fd = std::move(*fd), .where = (*fs)->realPath(dir.string())};
}

// Whether something accepts connections on the unix socket `name`. A full backlog (EAGAIN on a
// non-blocking connect) is a live listener too.
Result<bool> socketIsLive(const SocketDir& dir, const std::string& name) {
  auto addr = unixAddress(dir.via(name));
  EKCO_TRY(addr);
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return base::errnoError("socket", errno);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) == 0) {
    return true;
  }
  switch (errno) {
    case EAGAIN:
    case EINPROGRESS:
      return true;
    case ECONNREFUSED:
    case ENOENT:
      return false;
    default:
      return base::errnoError("connect " + dir.shown(name), errno);
  }
}

// (2) What is at `name`: nothing, a stale socket (removed, when `check_live` finds no listener),
// or an error. Anything that is not a socket is not ours to remove.
base::Status clearName(const SocketDir& dir, const std::string& name, bool check_live) {
  struct stat st {};
  if (::fstatat(dir.fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return base::ok();
    return base::errnoError("stat " + dir.shown(name), errno);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Error(fmt::format("{} exists and is not a socket; not removing it", dir.shown(name)),
                 ErrorCode::kAlreadyExists);
  }
  if (check_live) {
    auto live = socketIsLive(dir, name);
    EKCO_TRY(live);
    if (*live) {
      return Error(fmt::format("another ekco agent is listening on {}", dir.shown(name)),
                   ErrorCode::kAlreadyExists);
    }
  }
  if (::unlinkat(dir.fd.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    return base::errnoError("remove stale socket " + dir.shown(name), errno);
  }
  return base::ok();
}

std::string_view pathOf(std::string_view target) { return target.substr(0, target.find('?')); }

// The metrics listener on "IPv4:PORT" or "[IPv6]:PORT" (port 0: any free port).
Result<base::UniqueFd> listenMetrics(const std::string& address) {
  const auto bad = [&address] {
    return Error(fmt::format("metrics address \"{}\": want IPv4:PORT or [IPv6]:PORT", address),
                 ErrorCode::kInvalidArgument);
  };
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return bad();
  std::string host = address.substr(0, colon);
  const std::string port_text = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad();  // IPv6 without brackets
  }
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
    return bad();
  }
  boost::system::error_code ec;
  net::ip::make_address(host, ec);
  const int port = std::stoi(port_text);
  if (ec || port > 65535) return bad();
  auto fd = listenTcp(host, port);
  if (!fd) return std::move(fd).error().wrap("metrics_address");
  return fd;
}

}  // namespace

class HealthServer::Impl {
 public:
  explicit Impl(HealthServerOptions options) : options_(std::move(options)) {}
  ~Impl() { stop(); }

  base::Status start();
  void stop();
  http::response<http::string_body> answer(const http::request<http::string_body>& req,
                                           bool metrics_only) const;

  HealthServerOptions options_;
  int metrics_port_ = 0;
  net::io_context ioc_;  // never run: the sockets only do blocking I/O

 private:
  base::SystemClock clock_;
  SocketDir dir_;     // the socket's directory (set by start())
  std::string name_;  // the socket's name in it
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  std::mutex stop_mu_;
  bool stopped_ = false;
  std::unique_ptr<ConnectionLoop> loop_;
};

namespace {

// One connection: HTTP requests over the plain socket, answered by HealthServer::Impl::answer.
class HealthSession final : public Session {
 public:
  HealthSession(const HealthServer::Impl& server, Socket socket, bool metrics_only)
      : server_(server), socket_(std::move(socket)), metrics_only_(metrics_only) {}

  Outcome serve(Context& context) override {
    const std::chrono::milliseconds timeout = server_.options_.request_timeout;
    boost::system::error_code ec;
    // Requests until nothing more is buffered; then the next one is waited for in the loop.
    do {
      if (context.stopping()) return Outcome::kClose;
      http::request_parser<http::string_body> parser;
      parser.body_limit(16 * 1024);
      http::read(socket_, buffer_, parser, ec);
      if (ec) {
        // A malformed request gets a 400; a closed or timed-out connection nothing.
        if (isHttpParseError(ec)) {
          http::response<http::string_body> bad{http::status::bad_request, 11};
          bad.set(http::field::server, "ekco");
          bad.set(http::field::content_type, "text/plain; charset=utf-8");
          bad.body() = "bad request\n";
          bad.keep_alive(false);
          bad.prepare_payload();
          boost::system::error_code ignored;
          http::write(socket_, bad, ignored);
        }
        return Outcome::kClose;
      }
      const http::request<http::string_body>& req = parser.get();
      http::response<http::string_body> res = server_.answer(req, metrics_only_);
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      http::write(socket_, res, ec);
      if (ec || !res.keep_alive()) return Outcome::kClose;
      context.setDeadline(timeout);
    } while (buffer_.size() > 0);
    return Outcome::kIdle;
  }

 private:
  const HealthServer::Impl& server_;
  Socket socket_;  // owns the descriptor
  bool metrics_only_;
  beast::flat_buffer buffer_{};
};

}  // namespace

base::Status HealthServer::Impl::start() {
  const std::string& path = options_.socket_path;
  if (path.empty() || path.front() != '/') {
    return Error("the health socket path must be absolute", ErrorCode::kInvalidArgument);
  }
  auto addr = unixAddress(path);  // what clients connect to must fit in sun_path
  EKCO_TRY(addr);
  base::UniqueFd metrics_fd;
  if (!options_.metrics_address.empty()) {
    // First: a bad or taken address then leaves no socket file behind.
    auto tcp = listenMetrics(options_.metrics_address);
    if (!tcp) return std::move(tcp).error();
    metrics_fd = std::move(*tcp);
    metrics_port_ = boundPort(metrics_fd.get());
  }
  auto dir = openSocketDir(options_.host_root.empty() ? "/" : options_.host_root, path, clock_);
  EKCO_TRY(dir);  // (1)
  dir_ = std::move(*dir);
  name_ = std::filesystem::path(path).filename().string();
  const std::string tmp = "." + name_ + ".tmp";
  auto tmp_addr = unixAddress(dir_.via(tmp));
  if (!tmp_addr) return std::move(tmp_addr).error().wrap("temporary socket");
  EKCO_TRY(clearName(dir_, name_, /*check_live=*/true));  // (2)

  // (3) Bind under the temporary name, restrict, then rename into place. A leftover temporary
  // socket (an agent died between bind and rename) is removed; anything else there is not ours.
  EKCO_TRY(clearName(dir_, tmp, /*check_live=*/false));
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return base::errnoError("socket", errno);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*tmp_addr), sizeof(*tmp_addr)) != 0) {
    return base::errnoError("bind " + dir_.shown(tmp), errno);
  }
  const int dfd = dir_.fd.get();
  auto unlink_tmp = [&] { ::unlinkat(dfd, tmp.c_str(), 0); };
  if (::fchmodat(dfd, tmp.c_str(), 0660, 0) != 0) {
    Error e = base::errnoError("chmod " + dir_.shown(tmp), errno);
    unlink_tmp();
    return e;
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    Error e = base::errnoError("listen " + dir_.shown(tmp), errno);
    unlink_tmp();
    return e;
  }
  if (::renameat(dfd, tmp.c_str(), dfd, name_.c_str()) != 0) {
    Error e = base::errnoError(fmt::format("rename {} to {}", dir_.shown(tmp), path), errno);
    unlink_tmp();
    return e;
  }
  struct stat st {};
  if (::fstatat(dfd, name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    socket_dev_ = st.st_dev;
    socket_ino_ = st.st_ino;
  }

  // The socket and the TCP listener are pools of their own (health_server.h).
  std::vector<Listener> listeners;
  listeners.push_back(Listener{.fd = std::move(fd),
                               .max_connections = options_.max_connections,
                               .workers = options_.workers});
  if (metrics_fd.valid()) {
    listeners.push_back(Listener{.fd = std::move(metrics_fd),
                                 .max_connections = options_.metrics_max_connections,
                                 .workers = options_.metrics_workers});
  }
  auto loop = ConnectionLoop::start(ConnectionLoopOptions{
      .name = "health",
      .listeners = std::move(listeners),
      .open = [this](const Accepted& accepted) -> std::unique_ptr<Session> {
        const bool tcp = accepted.listener != 0;
        boost::system::error_code ec;
        Socket socket(ioc_);
        socket.assign(
            net::generic::stream_protocol(tcp ? accepted.family : AF_UNIX, tcp ? IPPROTO_TCP : 0),
            accepted.fd, ec);
        if (ec) return nullptr;  // not adopted: the loop closes it
        return std::make_unique<HealthSession>(*this, std::move(socket), /*metrics_only=*/tcp);
      },
      .first_byte_timeout = options_.request_timeout,
      .request_timeout = options_.request_timeout});
  if (!loop) {
    ::unlinkat(dfd, name_.c_str(), 0);
    return std::move(loop).error();
  }
  loop_ = std::move(*loop);
  return base::ok();
}

http::response<http::string_body> HealthServer::Impl::answer(
    const http::request<http::string_body>& req, bool metrics_only) const {
  http::response<http::string_body> res{http::status::ok, req.version()};
  res.set(http::field::server, "ekco");
  auto text = [&res](http::status code, std::string body) {
    res.result(code);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = std::move(body);
  };
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = pathOf(target);
  const HealthHandlers& h = options_.handlers;
  const bool known =
      path == "/metrics" ||
      (!metrics_only && (path == "/healthz" || path == "/readyz" || path == "/status"));
  const bool served = (path == "/healthz" && h.healthz) || (path == "/readyz" && h.readyz) ||
                      (path == "/status" && h.status) || (path == "/metrics" && h.metrics);
  if (!known || !served) {
    text(http::status::not_found, "not found\n");
    return res;
  }
  if (req.method() != http::verb::get) {
    res.set(http::field::allow, "GET");
    text(http::status::method_not_allowed, "method not allowed\n");
    return res;
  }
  try {
    if (path == "/healthz" || path == "/readyz") {
      const Health health = path == "/healthz" ? h.healthz() : h.readyz();
      if (health.ok) {
        text(http::status::ok, "ok\n");
      } else {
        text(http::status::service_unavailable,
             (health.reason.empty() ? std::string("not ok") : health.reason) + "\n");
      }
    } else if (path == "/status") {
      res.set(http::field::content_type, "application/json");
      // Invalid UTF-8 in a message (an error text from the host) must not fail the whole page.
      res.body() = kube::jsonDump(h.status());
      res.body() += "\n";
    } else {
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = h.metrics();
    }
  } catch (const std::exception& e) {
    text(http::status::internal_server_error, fmt::format("internal error: {}\n", e.what()));
  }
  return res;
}

void HealthServer::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_ || !loop_) return;
  stopped_ = true;
  loop_->stop();
  // Remove the socket file only while it is still the one we bound: after a stale-socket
  // take-over by a newer agent, the path is its socket.
  struct stat st {};
  if (::fstatat(dir_.fd.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISSOCK(st.st_mode) && st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
    ::unlinkat(dir_.fd.get(), name_.c_str(), 0);
  }
}

HealthServer::HealthServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HealthServer::~HealthServer() { stop(); }

Result<std::unique_ptr<HealthServer>> HealthServer::start(HealthServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  const std::string path = impl->options_.socket_path;
  if (auto started = impl->start(); !started) {
    return std::move(started).error().wrap("health socket " + path);
  }
  return std::unique_ptr<HealthServer>(new HealthServer(std::move(impl)));
}

void HealthServer::stop() { impl_->stop(); }

const std::string& HealthServer::socketPath() const { return impl_->options_.socket_path; }

int HealthServer::metricsPort() const { return impl_->metrics_port_; }

Result<HealthReply> queryHealthSocket(const std::string& socket_path, std::string_view target,
                                      std::chrono::milliseconds timeout, std::string_view method) {
  if (socket_path.size() > kMaxSocketPath) {
    return Error(fmt::format("socket path {} is longer than {} bytes", socket_path, kMaxSocketPath),
                 ErrorCode::kInvalidArgument);
  }
  // Asynchronous operations driven by run_for: the simplest way to bound the whole exchange
  // (connect, write, read) by one deadline.
  net::io_context ioc;
  UnixSocket socket(ioc);
  beast::flat_buffer buffer;
  http::request<http::empty_body> req;
  req.version(11);
  req.target(std::string(target));
  const beast::string_view method_text(method.data(), method.size());
  if (const http::verb verb = http::string_to_verb(method_text); verb != http::verb::unknown) {
    req.method(verb);
  } else {
    req.method_string(method_text);
  }
  req.set(http::field::host, "localhost");
  req.set(http::field::user_agent, "ekco");
  req.keep_alive(false);
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  std::optional<Error> failure;
  bool finished = false;

  auto fail = [&](std::string_view step, const boost::system::error_code& ec) {
    finished = true;
    if (ec.category() == boost::system::system_category() ||
        ec.category() == boost::system::generic_category()) {
      failure = errnoErrorOf(fmt::format("{} {}", step, socket_path), ec.value());
    } else {
      failure = Error(fmt::format("{} {}: {}", step, socket_path, ec.message()), ErrorCode::kIo);
    }
  };
  socket.async_connect(
      net::local::stream_protocol::endpoint(socket_path), [&](boost::system::error_code ec) {
        if (ec) return fail("connect", ec);
        http::async_write(socket, req, [&](boost::system::error_code wec, std::size_t) {
          if (wec) return fail("send request to", wec);
          http::async_read(socket, buffer, parser, [&](boost::system::error_code rec, std::size_t) {
            if (rec) return fail("read answer from", rec);
            finished = true;
          });
        });
      });
  ioc.run_for(timeout);
  if (!finished) {
    // Cancel what is pending and let its handlers run (they refer to this frame).
    boost::system::error_code ignored;
    socket.close(ignored);
    ioc.restart();
    ioc.run();
    return Error(fmt::format("{} {}: no answer within {} ms", method, socket_path, timeout.count()),
                 ErrorCode::kTimeout);
  }
  if (failure) return *failure;
  const auto& res = parser.get();
  HealthReply reply;
  reply.status = static_cast<int>(res.result_int());
  reply.content_type = std::string(res[http::field::content_type]);
  reply.body = res.body();
  return reply;
}

}  // namespace ekco::agent
