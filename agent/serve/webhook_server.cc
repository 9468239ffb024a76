#include "agent/serve/webhook_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/clock.h"
#include "base/thread.h"
#include "base/unique_fd.h"

namespace ekco::agent {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using base::Error;
using base::ErrorCode;
using base::Result;
using Tcp = net::ip::tcp;

namespace {

// A TLS server context over the PEM credentials (TLS 1.2+), or kInvalidArgument.
Result<std::shared_ptr<ssl::context>> tlsContext(const TlsCredentials& c) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::single_dh_use,
                   ec);
  if (!ec) ctx->use_certificate_chain(net::buffer(c.cert_pem), ec);
  if (ec) {
    return Error("the serving certificate is unusable: " + ec.message(),
                 ErrorCode::kInvalidArgument);
  }
  ctx->use_private_key(net::buffer(c.key_pem), ssl::context::pem, ec);
  if (ec) {
    return Error("the serving key is unusable: " + ec.message(), ErrorCode::kInvalidArgument);
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return Error("the serving key does not match the certificate", ErrorCode::kInvalidArgument);
  }
  return ctx;
}

// A listening TCP socket on address:port ("::" dual-stack, or 0.0.0.0 without IPv6).
Result<base::UniqueFd> listenOn(const std::string& address, int port) {
  if (port < 0 || port > 65535) {
    return Error(fmt::format("port {} is out of range", port), ErrorCode::kInvalidArgument);
  }
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family = AF_INET6;
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    family = AF_INET;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else {
    return Error(fmt::format("\"{}\" is not an IP address", address), ErrorCode::kInvalidArgument);
  }
  base::UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() && family == AF_INET6 && errno == EAFNOSUPPORT && address == "::") {
    return listenOn("0.0.0.0", port);  // a host without IPv6
  }
  if (!fd.valid()) return base::errnoError("socket", errno);
  const int one = 1;
  const int zero = 0;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), len) != 0) {
    return base::errnoError(fmt::format("bind {}:{}", address, port), errno);
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return base::errnoError(fmt::format("listen {}:{}", address, port), errno);
  }
  return fd;
}

int boundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

bool isParseError(const boost::system::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::end_of_stream).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

class WebhookServer::Impl {
 public:
  explicit Impl(WebhookServerOptions options) : options_(std::move(options)) {}
  ~Impl() { stop(); }

  base::Status start(const TlsCredentials& credentials);
  base::Status setCredentials(const TlsCredentials& credentials);
  void stop();
  int port() const { return port_; }
  WebhookServerStats stats() const {
    std::lock_guard lock(stats_mu_);
    return stats_;
  }

 private:
  struct Conn {
    int fd = -1;                // -1 once the serving thread is about to close it
    base::MonoTime deadline{};  // guarded by conns_mu_
    bool expired = false;
    std::atomic<bool> done{false};
    std::thread thread{};
  };
  using Stream = ssl::stream<Tcp::socket>;

  void acceptLoop();
  void serve(int fd, const std::shared_ptr<Conn>& conn, std::shared_ptr<ssl::context> ctx);
  void setDeadline(const std::shared_ptr<Conn>& conn, std::chrono::milliseconds from_now);
  // Writes a plain-text answer; false when the connection failed.
  bool refuse(Stream& stream, http::status status, unsigned version, std::string body,
              bool keep_alive, std::string_view allow = {});
  void count(std::uint64_t WebhookServerStats::*field) {
    std::lock_guard lock(stats_mu_);
    ++(stats_.*field);
  }

  WebhookServerOptions options_;
  base::SystemClock clock_;
  net::io_context ioc_;  // never run: the sockets only do blocking I/O
  base::UniqueFd listen_fd_;
  base::UniqueFd wake_read_;
  base::UniqueFd wake_write_;
  int port_ = 0;
  int family_ = AF_INET6;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool stopped_ = false;
  bool started_ = false;
  mutable std::mutex ctx_mu_;
  std::shared_ptr<ssl::context> ctx_;
  std::mutex conns_mu_;
  std::list<std::shared_ptr<Conn>> conns_;
  mutable std::mutex stats_mu_;
  WebhookServerStats stats_;
};

base::Status WebhookServer::Impl::start(const TlsCredentials& credentials) {
  auto ctx = tlsContext(credentials);
  EKCO_TRY(ctx);
  ctx_ = std::move(*ctx);
  auto fd = listenOn(options_.address, options_.port);
  EKCO_TRY(fd);
  port_ = boundPort(fd->get());
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (::getsockname(fd->get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0) {
    family_ = bound.ss_family;
  }
  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return base::errnoError("pipe", errno);
  wake_read_ = base::UniqueFd(pipe_fds[0]);
  wake_write_ = base::UniqueFd(pipe_fds[1]);
  listen_fd_ = std::move(*fd);
  started_ = true;
  accept_thread_ = base::startThread("webhook-accept", [this] { acceptLoop(); });
  return base::ok();
}

base::Status WebhookServer::Impl::setCredentials(const TlsCredentials& credentials) {
  auto ctx = tlsContext(credentials);
  EKCO_TRY(ctx);
  std::lock_guard lock(ctx_mu_);
  ctx_ = std::move(*ctx);
  return base::ok();
}

void WebhookServer::Impl::setDeadline(const std::shared_ptr<Conn>& conn,
                                      std::chrono::milliseconds from_now) {
  // Only ever later than the one the accept loop may be sleeping towards: when it wakes, it
  // finds this one unexpired and sleeps again.
  std::lock_guard lock(conns_mu_);
  conn->deadline = clock_.monoNow() + from_now;
}

void WebhookServer::Impl::acceptLoop() {
  // As the health socket's (agent/serve/health_server.cc): sleep until a connection, a wake-up
  // or the earliest deadline; shut down connections past theirs; stop accepting at the limit.
  while (!stopping_) {
    int timeout_ms = -1;
    std::size_t open = 0;
    {
      std::lock_guard lock(conns_mu_);
      const base::MonoTime now = clock_.monoNow();
      for (const auto& c : conns_) {
        if (c->fd < 0) continue;
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
      for (auto it = conns_.begin(); it != conns_.end();) {
        auto next = std::next(it);
        if ((*it)->done) finished.splice(finished.end(), conns_, it);
        it = next;
      }
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
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          std::shared_ptr<ssl::context> ctx;
          {
            std::lock_guard ctx_lock(ctx_mu_);
            ctx = ctx_;
          }
          auto conn = std::make_shared<Conn>();
          conn->fd = fd;
          conn->deadline = now + options_.request_timeout;
          conn->thread = base::startThread(
              "webhook-conn", [this, fd, conn, ctx = std::move(ctx)] { serve(fd, conn, ctx); });
          conns_.push_back(std::move(conn));
        }
      }
    }
    for (auto& c : finished) c->thread.join();
  }
}

bool WebhookServer::Impl::refuse(Stream& stream, http::status status, unsigned version,
                                 std::string body, bool keep_alive, std::string_view allow) {
  count(&WebhookServerStats::refused);
  http::response<http::string_body> res{status, version};
  res.set(http::field::server, "ekco");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  if (!allow.empty()) res.set(http::field::allow, std::string(allow));
  res.body() = std::move(body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  boost::system::error_code ec;
  http::write(stream, res, ec);
  return !ec;
}

void WebhookServer::Impl::serve(int fd, const std::shared_ptr<Conn>& conn,
                                std::shared_ptr<ssl::context> ctx) {
  count(&WebhookServerStats::connections);
  boost::system::error_code ec;
  Stream stream(ioc_, *ctx);
  stream.next_layer().assign(family_ == AF_INET6 ? Tcp::v6() : Tcp::v4(), fd, ec);
  if (ec) ::close(fd);
  if (!ec) {
    stream.handshake(ssl::stream_base::server, ec);
    if (ec) count(&WebhookServerStats::tls_failures);
  }
  beast::flat_buffer buffer;
  while (!ec && !stopping_) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(options_.body_limit);
    http::read_header(stream, buffer, parser, ec);
    if (ec == http::error::body_limit) {
      // Beast checks Content-Length against the limit as the header completes: refused on the
      // header alone, the body unread.
      refuse(stream, http::status::payload_too_large, parser.get().version(),
             fmt::format("request body over the limit of {} bytes\n", options_.body_limit), false);
      break;
    }
    if (ec) {
      if (isParseError(ec)) refuse(stream, http::status::bad_request, 11, "bad request\n", false);
      break;
    }
    const auto& header = parser.get();
    const unsigned version = header.version();
    const std::string_view target(header.target().data(), header.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    // (1) Refused on the header alone: the body (if any) is never read, and the connection is
    // closed since its unread bytes would be taken for the next request.
    if (path != options_.path) {
      refuse(stream, http::status::not_found, version, "not found\n", false);
      break;
    }
    if (header.method() != http::verb::post) {
      refuse(stream, http::status::method_not_allowed, version, "method not allowed\n", false,
             "POST");
      break;
    }
    if (const auto length = parser.content_length(); length && *length > options_.body_limit) {
      refuse(stream, http::status::payload_too_large, version,
             fmt::format("request body of {} bytes is over the limit of {} bytes\n", *length,
                         options_.body_limit),
             false);
      break;
    }
    // (2) The body, bounded by body_limit (a chunked one too).
    http::read(stream, buffer, parser, ec);
    if (ec) {
      if (ec == http::error::body_limit) {
        refuse(stream, http::status::payload_too_large, version,
               fmt::format("request body over the limit of {} bytes\n", options_.body_limit),
               false);
      } else if (isParseError(ec)) {
        refuse(stream, http::status::bad_request, version, "bad request\n", false);
      }
      break;
    }
    const auto& req = parser.get();
    http::response<http::string_body> res{http::status::ok, version};
    res.set(http::field::server, "ekco");
    res.set(http::field::content_type, "application/json");
    try {
      res.body() = options_.review(req.body());
    } catch (const std::exception& e) {
      res.result(http::status::internal_server_error);
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = fmt::format("internal error: {}\n", e.what());
    }
    count(&WebhookServerStats::reviews);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    http::write(stream, res, ec);
    if (ec || !res.keep_alive()) break;
    setDeadline(conn, options_.idle_timeout);
  }
  // No TLS close_notify exchange: it waits for the peer's, and a client gone quiet would hold
  // the thread until the deadline. Our last answer is complete (Content-Length) without it.
  boost::system::error_code ignored;
  {
    std::lock_guard lock(conns_mu_);
    conn->fd = -1;
  }
  stream.next_layer().close(ignored);
  conn->done = true;
  const char byte = 'c';
  [[maybe_unused]] const ssize_t written = ::write(wake_write_.get(), &byte, 1);
}

void WebhookServer::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_ || !started_) return;
  stopped_ = true;
  stopping_ = true;
  const char byte = 's';
  [[maybe_unused]] const ssize_t written = ::write(wake_write_.get(), &byte, 1);
  if (accept_thread_.joinable()) accept_thread_.join();
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

WebhookServer::WebhookServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WebhookServer::~WebhookServer() { stop(); }

Result<std::unique_ptr<WebhookServer>> WebhookServer::start(WebhookServerOptions options,
                                                            const TlsCredentials& credentials) {
  if (!options.review) {
    return Error("the webhook server needs a review handler", ErrorCode::kInvalidArgument);
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  if (auto started = impl->start(credentials); !started) {
    return std::move(started).error().wrap("webhook server");
  }
  return std::unique_ptr<WebhookServer>(new WebhookServer(std::move(impl)));
}

base::Status WebhookServer::setCredentials(const TlsCredentials& credentials) {
  return impl_->setCredentials(credentials);
}
int WebhookServer::port() const { return impl_->port(); }
WebhookServerStats WebhookServer::stats() const { return impl_->stats(); }
void WebhookServer::stop() { impl_->stop(); }

}  // namespace ekco::agent
