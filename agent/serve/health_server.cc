#include "agent/serve/health_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/clock.h"
#include "base/unique_fd.h"

namespace ekco::agent {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
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

// (1) The socket's directory: created 0750 when missing, an existing one left as it is.
base::Status ensureDirectory(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return Error(fmt::format("{} exists and is not a directory", dir.string()),
                   ErrorCode::kInvalidArgument);
    }
    return base::ok();
  }
  if (errno != ENOENT) return base::errnoError("stat " + dir.string(), errno);
  std::error_code ec;
  std::filesystem::create_directories(dir.parent_path(), ec);
  if (ec) {
    return Error(fmt::format("create {}: {}", dir.parent_path().string(), ec.message()),
                 ErrorCode::kIo);
  }
  if (::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return base::errnoError("mkdir " + dir.string(), errno);
  }
  // mkdir's mode is filtered by the umask; the mode is meant exactly.
  if (::chmod(dir.c_str(), 0750) != 0) return base::errnoError("chmod " + dir.string(), errno);
  return base::ok();
}

// Whether something accepts connections on the unix socket at `path`. A full backlog (EAGAIN
// on a non-blocking connect) is a live listener too.
Result<bool> socketIsLive(const std::string& path) {
  auto addr = unixAddress(path);
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
      return base::errnoError("connect " + path, errno);
  }
}

// (2) What is at the path: nothing, a stale socket (removed), or an error.
base::Status clearPath(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return base::ok();
    return base::errnoError("stat " + path, errno);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Error(fmt::format("{} exists and is not a socket; not removing it", path),
                 ErrorCode::kAlreadyExists);
  }
  auto live = socketIsLive(path);
  EKCO_TRY(live);
  if (*live) {
    return Error(fmt::format("another ekco agent is listening on {}", path),
                 ErrorCode::kAlreadyExists);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return base::errnoError("remove stale socket " + path, errno);
  }
  return base::ok();
}

std::string_view pathOf(std::string_view target) { return target.substr(0, target.find('?')); }

// Beast's parser errors (malformed request, header or body too large), as opposed to the
// connection closing or failing.
bool isParseError(const boost::system::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::end_of_stream).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

class HealthServer::Impl {
 public:
  explicit Impl(HealthServerOptions options) : options_(std::move(options)) {}
  ~Impl() { stop(); }

  base::Status start();
  void stop();

  HealthServerOptions options_;

 private:
  struct Conn {
    int fd = -1;                // -1 once the serving thread is about to close it
    base::MonoTime deadline{};  // of the current request; guarded by conns_mu_
    bool expired = false;
    std::atomic<bool> done{false};
    std::thread thread{};
  };

  void acceptLoop();
  void serve(int fd, const std::shared_ptr<Conn>& conn);
  http::response<http::string_body> answer(const http::request<http::string_body>& req) const;

  base::SystemClock clock_;
  net::io_context ioc_;  // never run: the sockets only do blocking I/O
  base::UniqueFd listen_fd_;
  base::UniqueFd wake_read_;
  base::UniqueFd wake_write_;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool stopped_ = false;
  bool started_ = false;
  std::mutex conns_mu_;
  std::list<std::shared_ptr<Conn>> conns_;
};

base::Status HealthServer::Impl::start() {
  const std::string& path = options_.socket_path;
  if (path.empty() || path.front() != '/') {
    return Error("the health socket path must be absolute", ErrorCode::kInvalidArgument);
  }
  const std::filesystem::path fs_path(path);
  const std::string tmp =
      (fs_path.parent_path() / ("." + fs_path.filename().string() + ".tmp")).string();
  auto addr = unixAddress(path);
  EKCO_TRY(addr);
  auto tmp_addr = unixAddress(tmp);
  if (!tmp_addr) return std::move(tmp_addr).error().wrap("temporary socket");

  EKCO_TRY(ensureDirectory(fs_path.parent_path()));  // (1)
  EKCO_TRY(clearPath(path));                         // (2)

  // (3) Bind under the temporary name, restrict, then rename into place. A leftover temporary
  // socket (an agent died between bind and rename) is removed; anything else there is not ours.
  struct stat st {};
  if (::lstat(tmp.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Error(fmt::format("{} exists and is not a socket; not removing it", tmp),
                   ErrorCode::kAlreadyExists);
    }
    if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
      return base::errnoError("remove " + tmp, errno);
    }
  }
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return base::errnoError("socket", errno);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*tmp_addr), sizeof(*tmp_addr)) != 0) {
    return base::errnoError("bind " + tmp, errno);
  }
  auto unlink_tmp = [&tmp] { ::unlink(tmp.c_str()); };
  if (::chmod(tmp.c_str(), 0660) != 0) {
    Error e = base::errnoError("chmod " + tmp, errno);
    unlink_tmp();
    return e;
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    Error e = base::errnoError("listen " + tmp, errno);
    unlink_tmp();
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = base::errnoError(fmt::format("rename {} to {}", tmp, path), errno);
    unlink_tmp();
    return e;
  }
  if (::stat(path.c_str(), &st) == 0) {
    socket_dev_ = st.st_dev;
    socket_ino_ = st.st_ino;
  }

  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    Error e = base::errnoError("pipe", errno);
    ::unlink(path.c_str());
    return e;
  }
  wake_read_ = base::UniqueFd(pipe_fds[0]);
  wake_write_ = base::UniqueFd(pipe_fds[1]);
  listen_fd_ = std::move(fd);
  started_ = true;
  accept_thread_ = std::thread([this] { acceptLoop(); });
  return base::ok();
}

void HealthServer::Impl::acceptLoop() {
  while (!stopping_) {
    // Sleep until a connection arrives, the pipe is written (stop(), or a connection ended), or
    // the earliest request deadline passes (a deadline moved later since is found unexpired and
    // waited for again). At max_connections the listener is not polled: new connections wait in
    // its backlog until one ends.
    int timeout_ms = -1;
    std::size_t open = 0;
    {
      std::lock_guard lock(conns_mu_);
      const base::MonoTime now = clock_.monoNow();
      for (const auto& c : conns_) {
        if (c->fd < 0) continue;  // answered and closing
        ++open;
        if (c->expired) continue;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(c->deadline - now).count();
        const int ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
        timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
      }
    }
    const bool room = open < options_.max_connections;
    pollfd fds[2] = {{room ? listen_fd_.get() : -1, POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    const int n = ::poll(fds, 2, timeout_ms);
    if (stopping_) break;
    if (n < 0 && errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (n > 0 && (fds[1].revents & POLLIN) != 0) {
      char drain[64];
      while (::read(wake_read_.get(), drain, sizeof(drain)) > 0) {
      }
    }
    std::list<std::shared_ptr<Conn>> finished;
    {
      std::lock_guard lock(conns_mu_);
      // Finished connections are joined below, outside the lock: a connection thread takes the
      // lock on its way out, and joining under it would hold every other one up.
      for (auto it = conns_.begin(); it != conns_.end();) {
        auto next = std::next(it);
        if ((*it)->done) finished.splice(finished.end(), conns_, it);
        it = next;
      }
      // A connection past its deadline is shut down: its blocking read or write returns and its
      // thread ends.
      const base::MonoTime now = clock_.monoNow();
      for (auto& c : conns_) {
        if (c->fd >= 0 && !c->expired && c->deadline <= now) {
          c->expired = true;
          ::shutdown(c->fd, SHUT_RDWR);
        }
      }
      if (n > 0 && (fds[0].revents & POLLIN) != 0) {
        const int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          auto conn = std::make_shared<Conn>();
          conn->fd = fd;
          conn->deadline = now + options_.request_timeout;
          conn->thread = std::thread([this, fd, conn] { serve(fd, conn); });
          conns_.push_back(std::move(conn));
        }
      }
    }
    for (auto& c : finished) c->thread.join();
  }
}

http::response<http::string_body> HealthServer::Impl::answer(
    const http::request<http::string_body>& req) const {
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
      path == "/healthz" || path == "/readyz" || path == "/status" || path == "/metrics";
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
      res.body() = h.status().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

void HealthServer::Impl::serve(int fd, const std::shared_ptr<Conn>& conn) {
  boost::system::error_code ec;
  UnixSocket socket(ioc_);
  socket.assign(net::local::stream_protocol(), fd, ec);
  if (ec) ::close(fd);
  beast::flat_buffer buffer;
  while (!ec && !stopping_) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(16 * 1024);
    http::read(socket, buffer, parser, ec);
    if (ec) {
      // A malformed request gets a 400; a closed or timed-out connection nothing.
      if (isParseError(ec)) {
        http::response<http::string_body> bad{http::status::bad_request, 11};
        bad.set(http::field::server, "ekco");
        bad.set(http::field::content_type, "text/plain; charset=utf-8");
        bad.body() = "bad request\n";
        bad.keep_alive(false);
        bad.prepare_payload();
        boost::system::error_code ignored;
        http::write(socket, bad, ignored);
      }
      break;
    }
    const http::request<http::string_body>& req = parser.get();
    http::response<http::string_body> res = answer(req);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    http::write(socket, res, ec);
    if (ec || !res.keep_alive()) break;
    std::lock_guard lock(conns_mu_);
    conn->deadline = clock_.monoNow() + options_.request_timeout;
  }
  if (socket.is_open()) socket.shutdown(UnixSocket::shutdown_both, ec);
  {
    // Before the socket closes (at the end of this scope), so stop() and the accept loop never
    // shut down an fd number that has been reused.
    std::lock_guard lock(conns_mu_);
    conn->fd = -1;
  }
  conn->done = true;
  // Wakes the accept loop to join this thread and, at the connection limit, accept again.
  const char byte = 'c';
  [[maybe_unused]] const ssize_t written = ::write(wake_write_.get(), &byte, 1);
}

void HealthServer::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_ || !started_) return;
  stopped_ = true;
  stopping_ = true;
  const char byte = 's';
  [[maybe_unused]] const ssize_t written = ::write(wake_write_.get(), &byte, 1);
  if (accept_thread_.joinable()) accept_thread_.join();
  // Remove the socket file only while it is still the one we bound: after a stale-socket
  // take-over by a newer agent, the path is its socket.
  struct stat st {};
  if (::lstat(options_.socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
    ::unlink(options_.socket_path.c_str());
  }
  listen_fd_.reset();
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
  wake_read_.reset();
  wake_write_.reset();
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
