#include "agent/features/webhook/webhook_server.h"

#include "agent/features/webhook/webhook_request.h"

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
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/clock.h"
#include "base/os/heap.h"
#include "base/os/thread.h"
#include "base/os/unique_fd.h"

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

}  // namespace

std::size_t webhookRequestCost(std::optional<std::size_t> body_bytes, std::size_t body_limit) {
  // The body (Beast's string, sized from Content-Length), then the review's SAX pass: nlohmann's
  // lexer holds the current string twice (its text and its raw token), each grown by doubling,
  // so up to 4x the longest string, plus the copy while the last doubling happens (measured: a
  // 3 MiB string grew a review's peak RSS by 19 MiB under ASan's allocator, ~10 MiB under
  // glibc's); the response is bounded (admission::kMaxImageChanges); the connection's TLS and
  // HTTP buffers are the 64 KiB.
  const std::size_t body = std::min(body_bytes.value_or(body_limit), body_limit);
  return 6 * body + (std::size_t{64} << 10);
}

class WebhookServer::Impl {
 public:
  explicit Impl(WebhookServerOptions options)
      : options_(std::move(options)),
        budget_(options_.memory_budget, options_.memory_budget / 3 * 2) {}
  ~Impl() { stop(); }

  base::Status start(const TlsCredentials& credentials);
  base::Status setCredentials(const TlsCredentials& credentials);
  void stop();
  int port() const { return port_; }
  WebhookServerStats stats() const {
    WebhookServerStats out;
    {
      std::lock_guard lock(stats_mu_);
      out = stats_;
    }
    std::tie(out.reserved, out.reserved_peak) = budget_.usedAndPeak();
    return out;
  }

 private:
  using Stream = ssl::stream<Tcp::socket>;
  enum class State : std::uint8_t {
    kNew,     // accepted, waiting for its first byte (polled)
    kIdle,    // handshake done or answered, waiting for its next request (polled)
    kQueued,  // a byte arrived, waiting for a worker
    kBusy,    // a worker has it
  };
  struct Conn {
    int fd = -1;           // guarded by mu_; -1 once a worker is about to close it
    std::string source{};  // the peer's address bytes (per_source_workers)
    State state = State::kNew;
    base::MonoTime deadline{};
    bool expired = false;
    std::uint64_t order = 0;  // accept order, for eviction
    // The worker's while kBusy, kept in between.
    std::shared_ptr<ssl::context> ctx{};
    std::unique_ptr<Stream> stream{};
    beast::flat_buffer buffer{};
  };
  using ConnPtr = std::shared_ptr<Conn>;
  // What a worker hands back.
  enum class Outcome : std::uint8_t { kClose, kIdle };

  void acceptLoop();
  void acceptNew(base::MonoTime now);
  void dispatch(base::MonoTime now);
  void closeByLoop(const ConnPtr& c);  // a connection the loop owns (not kBusy)
  // Closes what no worker is using: the stream owns the fd once it has adopted it.
  static void closeFd(Conn& c) {
    if (c.stream) {
      c.stream.reset();
    } else if (c.fd >= 0) {
      ::close(c.fd);
    }
    c.fd = -1;
  }
  void limitKeptAlive();
  void workerLoop();
  // Serves `c` until it has nothing buffered; kIdle with its next deadline set, or kClose.
  Outcome serve(Conn& c);
  Outcome serveRequest(Conn& c, boost::system::error_code& ec);
  void setDeadline(Conn& c, std::chrono::milliseconds from_now);
  bool buffered(Conn& c);
  void count(std::uint64_t WebhookServerStats::*field) {
    std::lock_guard lock(stats_mu_);
    ++(stats_.*field);
  }
  void wake() {
    const char byte = 'w';
    [[maybe_unused]] const ssize_t written = ::write(wake_write_.get(), &byte, 1);
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
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool stopped_ = false;
  bool started_ = false;
  mutable std::mutex ctx_mu_;
  std::shared_ptr<ssl::context> ctx_;
  webhook_detail::ByteBudget budget_;

  // The connections, their states, the work queue and the workers' hand-backs.
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::list<ConnPtr> conns_;                           // every open connection
  std::deque<ConnPtr> queued_;                         // kQueued, in arrival order
  std::deque<ConnPtr> work_;                           // dispatched to a worker, not yet taken
  std::vector<std::pair<ConnPtr, Outcome>> returned_;  // handed back by workers
  std::map<std::string, std::size_t> busy_by_source_;
  std::size_t busy_ = 0;  // dispatched or being served
  std::uint64_t accepted_ = 0;

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
  if (::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK) != 0) {
    return base::errnoError("fcntl", errno);
  }
  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return base::errnoError("pipe", errno);
  wake_read_ = base::UniqueFd(pipe_fds[0]);
  wake_write_ = base::UniqueFd(pipe_fds[1]);
  listen_fd_ = std::move(*fd);
  started_ = true;
  for (std::size_t i = 0; i < std::max<std::size_t>(options_.workers, 1); ++i) {
    workers_.push_back(base::startThread("webhook-worker", [this] { workerLoop(); }));
  }
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

void WebhookServer::Impl::setDeadline(Conn& c, std::chrono::milliseconds from_now) {
  // Only ever later than the one the loop may be sleeping towards: when it wakes, it finds this
  // one unexpired and sleeps again.
  std::lock_guard lock(mu_);
  c.deadline = clock_.monoNow() + from_now;
}

void WebhookServer::Impl::closeByLoop(const ConnPtr& c) {
  // Under mu_. The loop owns the connection: no worker touches it.
  closeFd(*c);
  conns_.remove(c);
}

void WebhookServer::Impl::acceptNew(base::MonoTime now) {
  // Under mu_. Accepts what the backlog holds; at max_connections, the connection waiting longest
  // for a byte (kNew first, then kIdle) is closed for each newcomer.
  for (int i = 0; i < 64; ++i) {
    ConnPtr victim;
    if (conns_.size() >= options_.max_connections) {
      for (State want : {State::kNew, State::kIdle}) {
        for (const ConnPtr& c : conns_) {
          if (c->state == want && (!victim || c->order < victim->order)) victim = c;
        }
        if (victim) break;
      }
      if (!victim) return;  // every one is being served or queued: the rest wait in the backlog
    }
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    const int fd =
        ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
    if (fd < 0) return;
    if (victim) {
      closeByLoop(victim);
      count(&WebhookServerStats::evicted);
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto conn = std::make_shared<Conn>();
    conn->fd = fd;
    if (peer.ss_family == AF_INET6) {
      const auto& a = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
      conn->source.assign(reinterpret_cast<const char*>(&a), sizeof(a));
    } else if (peer.ss_family == AF_INET) {
      const auto& a = reinterpret_cast<const sockaddr_in&>(peer).sin_addr;
      conn->source.assign(reinterpret_cast<const char*>(&a), sizeof(a));
    }
    conn->deadline = now + options_.handshake_timeout;
    conn->order = accepted_++;
    {
      std::lock_guard ctx_lock(ctx_mu_);
      conn->ctx = ctx_;
    }
    conns_.push_back(std::move(conn));
  }
}

void WebhookServer::Impl::limitKeptAlive() {
  // Under mu_. A connection between requests keeps its TLS session (~50 KiB with Asio's and
  // OpenSSL's buffers): at most max_kept_alive do, the least recently active closed beyond.
  std::vector<ConnPtr> kept;
  for (const ConnPtr& c : conns_) {
    if (c->stream && (c->state == State::kIdle || c->state == State::kQueued)) kept.push_back(c);
  }
  if (kept.size() <= options_.max_kept_alive) return;
  std::sort(kept.begin(), kept.end(), [](const ConnPtr& a, const ConnPtr& b) {
    // Idle ones first (a queued one has a request coming), the oldest first.
    if ((a->state == State::kIdle) != (b->state == State::kIdle)) return a->state == State::kIdle;
    return a->order < b->order;
  });
  for (std::size_t i = 0; i < kept.size() - options_.max_kept_alive; ++i) {
    const ConnPtr& c = kept[i];
    if (c->state == State::kQueued) queued_.erase(std::find(queued_.begin(), queued_.end(), c));
    closeByLoop(c);
    count(&WebhookServerStats::evicted);
  }
}

void WebhookServer::Impl::dispatch(base::MonoTime now) {
  // Under mu_. Queued connections to free workers, in arrival order, skipping those whose source
  // already has per_source_workers being served.
  const std::size_t workers = std::max<std::size_t>(options_.workers, 1);
  for (auto it = queued_.begin(); it != queued_.end() && busy_ < workers;) {
    ConnPtr c = *it;
    auto source = busy_by_source_.find(c->source);
    if (source != busy_by_source_.end() &&
        source->second >= std::max<std::size_t>(options_.per_source_workers, 1)) {
      ++it;
      continue;
    }
    ++busy_by_source_[c->source];
    ++busy_;
    it = queued_.erase(it);
    c->state = State::kBusy;
    c->deadline = now + (c->stream ? options_.request_timeout : options_.handshake_timeout);
    work_.push_back(std::move(c));
    work_cv_.notify_one();
  }
}

void WebhookServer::Impl::acceptLoop() {
  // One poll over the listener, the wake-up pipe and every connection waiting for a byte; sleeps
  // until one of them is readable or the earliest deadline passes.
  std::vector<pollfd> fds;
  std::vector<ConnPtr> polled;
  while (!stopping_) {
    fds.clear();
    polled.clear();
    int timeout_ms = -1;
    {
      std::lock_guard lock(mu_);
      const base::MonoTime now = clock_.monoNow();
      bool room = conns_.size() < options_.max_connections;
      for (const ConnPtr& c : conns_) {
        if (c->state == State::kNew || c->state == State::kIdle) {
          room = true;  // one can be evicted
          polled.push_back(c);
        }
        if (c->expired) continue;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(c->deadline - now).count();
        const int ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
        timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
      }
      fds.push_back({room ? listen_fd_.get() : -1, POLLIN, 0});
      fds.push_back({wake_read_.get(), POLLIN, 0});
      for (const ConnPtr& c : polled) fds.push_back({c->fd, POLLIN, 0});
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
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
    std::lock_guard lock(mu_);
    const base::MonoTime now = clock_.monoNow();
    // (1) What the workers handed back.
    for (auto& [c, outcome] : returned_) {
      --busy_;
      if (auto source = busy_by_source_.find(c->source);
          source != busy_by_source_.end() && --source->second == 0) {
        busy_by_source_.erase(source);
      }
      if (outcome == Outcome::kClose) {
        closeFd(*c);  // the worker closed the socket
        conns_.remove(c);
      } else {
        c->state = State::kIdle;
        c->expired = false;
        c->order = accepted_++;  // the least recently active go first (acceptNew, limitKeptAlive)
      }
    }
    returned_.clear();
    limitKeptAlive();
    // (2) Connections with a byte to read are queued for a worker (a closed one too: the worker
    // finds out).
    for (std::size_t i = 0; n > 0 && i < polled.size(); ++i) {
      const ConnPtr& c = polled[i];
      if ((fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) == 0 || c->fd < 0) continue;
      if (c->state != State::kNew && c->state != State::kIdle) continue;
      c->state = State::kQueued;
      c->deadline = now + options_.request_timeout;
      queued_.push_back(c);
    }
    // (3) Deadlines: a connection waiting is closed; one being served is shut down (its worker's
    // blocking read or write returns).
    for (auto it = conns_.begin(); it != conns_.end();) {
      ConnPtr c = *it++;
      if (c->expired || c->deadline > now || c->fd < 0) continue;
      count(&WebhookServerStats::timed_out);
      if (c->state == State::kBusy) {
        c->expired = true;
        ::shutdown(c->fd, SHUT_RDWR);
        continue;
      }
      if (c->state == State::kQueued) queued_.erase(std::find(queued_.begin(), queued_.end(), c));
      closeByLoop(c);
    }
    // (4) Newcomers, then work for the free workers.
    if (n > 0 && (fds[0].revents & POLLIN) != 0) acceptNew(now);
    dispatch(now);
  }
}

void WebhookServer::Impl::workerLoop() {
  for (;;) {
    ConnPtr c;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
      if (stopping_) return;
      c = std::move(work_.front());
      work_.pop_front();
    }
    const Outcome outcome = serve(*c);
    if (outcome == Outcome::kClose) {
      boost::system::error_code ignored;
      {
        // Before the fd is closed, so the loop never shuts down a reused fd number.
        std::lock_guard lock(mu_);
        c->fd = -1;
      }
      if (c->stream) {
        c->stream->next_layer().close(ignored);
      }
    }
    {
      std::lock_guard lock(mu_);
      returned_.emplace_back(std::move(c), outcome);
    }
    wake();
  }
}

bool WebhookServer::Impl::buffered(Conn& c) {
  // Bytes already read from the socket: in the HTTP buffer, decrypted in OpenSSL, or still in
  // the BIO that Asio feeds it from. Polling the socket would not see them.
  SSL* ssl = c.stream->native_handle();
  return c.buffer.size() > 0 || SSL_pending(ssl) > 0 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0;
}

WebhookServer::Impl::Outcome WebhookServer::Impl::serve(Conn& c) {
  boost::system::error_code ec;
  if (!c.stream) {
    // (1) The first byte has arrived: the TLS handshake, within handshake_timeout.
    count(&WebhookServerStats::connections);
    c.stream = std::make_unique<Stream>(ioc_, *c.ctx);
    int fd = -1;
    {
      std::lock_guard lock(mu_);
      fd = c.fd;
    }
    c.stream->next_layer().assign(family_ == AF_INET6 ? Tcp::v6() : Tcp::v4(), fd, ec);
    if (ec) {
      // Not adopted: the worker's close would not reach it.
      std::lock_guard lock(mu_);
      ::close(c.fd);
      c.fd = -1;
      c.stream.reset();
      return Outcome::kClose;
    }
    c.stream->handshake(ssl::stream_base::server, ec);
    if (ec) {
      count(&WebhookServerStats::tls_failures);
      return Outcome::kClose;
    }
    c.ctx.reset();
    // (2) The first request within request_timeout: read now if it came with the handshake's
    // last flight, else waited for in the poll loop.
    if (!buffered(c)) {
      setDeadline(c, options_.request_timeout);
      return Outcome::kIdle;
    }
    setDeadline(c, options_.request_timeout);
  }
  // (3) Requests until nothing more is buffered; then the next one is waited for in the loop.
  for (;;) {
    if (stopping_) return Outcome::kClose;
    if (serveRequest(c, ec) == Outcome::kClose || ec) return Outcome::kClose;
    if (!buffered(c)) break;
    setDeadline(c, options_.request_timeout);
  }
  c.buffer.shrink_to_fit();
  setDeadline(c, options_.idle_timeout);
  return Outcome::kIdle;
}

WebhookServer::Impl::Outcome WebhookServer::Impl::serveRequest(Conn& c,
                                                               boost::system::error_code& ec) {
  const webhook_detail::Served served = webhook_detail::serveRequest(
      *c.stream, c.buffer, options_, budget_, [this](auto field) { count(field); }, ec);
  return served == webhook_detail::Served::kKeepAlive ? Outcome::kIdle : Outcome::kClose;
}

void WebhookServer::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_ || !started_) return;
  stopped_ = true;
  stopping_ = true;
  wake();
  if (accept_thread_.joinable()) accept_thread_.join();
  listen_fd_.reset();
  budget_.stop();
  {
    std::lock_guard lock(mu_);
    for (auto& c : conns_) {
      if (c->state == State::kBusy && c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  work_cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  {
    // Every worker has stopped: each connection is closed here, once.
    std::lock_guard lock(mu_);
    for (auto& c : conns_) closeFd(*c);
    conns_.clear();
    queued_.clear();
    work_.clear();
    returned_.clear();
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
