#include "agent/features/webhook/webhook_server.h"

#include "agent/features/webhook/webhook_request.h"
#include "agent/serve/connection_loop.h"
#include "agent/serve/listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

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

// One connection: TLS, then HTTP requests (webhook_request.h), over the shared server loop.
class TlsSession final : public Session {
 public:
  using Stream = ssl::stream<Tcp::socket>;

  TlsSession(WebhookServer::Impl& server, int fd, int family, std::shared_ptr<ssl::context> ctx)
      : server_(server), fd_(fd), family_(family), ctx_(std::move(ctx)) {}
  ~TlsSession() override {
    if (stream_) {
      stream_.reset();  // the socket owns the descriptor
    } else {
      ::close(fd_);
    }
  }
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  Outcome serve(Context& context) override;

 private:
  // Bytes already read from the socket: in the HTTP buffer, decrypted in OpenSSL, or still in
  // the BIO that Asio feeds it from. Polling the socket would not see them.
  bool buffered() {
    SSL* ssl = stream_->native_handle();
    return buffer_.size() > 0 || SSL_pending(ssl) > 0 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0;
  }

  WebhookServer::Impl& server_;
  int fd_;
  int family_;
  std::shared_ptr<ssl::context> ctx_;  // until the handshake
  std::unique_ptr<Stream> stream_{};
  beast::flat_buffer buffer_{};
};

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
    if (loop_) {
      const ConnectionLoopStats loop = loop_->stats();
      out.evicted = loop.evicted;
      out.timed_out = loop.timed_out;
    }
    std::tie(out.reserved, out.reserved_peak) = budget_.usedAndPeak();
    return out;
  }

  void count(std::uint64_t WebhookServerStats::*field) {
    std::lock_guard lock(stats_mu_);
    ++(stats_.*field);
  }

  WebhookServerOptions options_;
  webhook_detail::ByteBudget budget_;
  net::io_context ioc_;  // never run: the sockets only do blocking I/O

 private:
  int port_ = 0;
  mutable std::mutex ctx_mu_;
  std::shared_ptr<ssl::context> ctx_;
  std::unique_ptr<ConnectionLoop> loop_;
  mutable std::mutex stats_mu_;
  WebhookServerStats stats_;
};

Session::Outcome TlsSession::serve(Context& context) {
  const WebhookServerOptions& options = server_.options_;
  boost::system::error_code ec;
  if (!stream_) {
    // (1) The first byte has arrived: the TLS handshake, within handshake_timeout.
    server_.count(&WebhookServerStats::connections);
    auto stream = std::make_unique<Stream>(server_.ioc_, *ctx_);
    stream->next_layer().assign(family_ == AF_INET6 ? Tcp::v6() : Tcp::v4(), fd_, ec);
    if (ec) return Outcome::kClose;  // not adopted: the destructor closes the descriptor
    stream_ = std::move(stream);
    stream_->handshake(ssl::stream_base::server, ec);
    if (ec) {
      server_.count(&WebhookServerStats::tls_failures);
      return Outcome::kClose;
    }
    ctx_.reset();
    // (2) The first request within request_timeout: read now if it came with the handshake's
    // last flight, else waited for in the loop.
    context.setDeadline(options.request_timeout);
    if (!buffered()) return Outcome::kIdle;
  }
  // (3) Requests until nothing more is buffered; then the next one is waited for in the loop.
  for (;;) {
    if (context.stopping()) return Outcome::kClose;
    const webhook_detail::Served served = webhook_detail::serveRequest(
        *stream_, buffer_, options, server_.budget_, [this](auto field) { server_.count(field); },
        ec);
    if (served == webhook_detail::Served::kClose || ec) return Outcome::kClose;
    if (!buffered()) break;
    context.setDeadline(options.request_timeout);
  }
  buffer_.shrink_to_fit();
  context.setDeadline(options.idle_timeout);
  return Outcome::kIdle;
}

base::Status WebhookServer::Impl::start(const TlsCredentials& credentials) {
  auto ctx = tlsContext(credentials);
  EKCO_TRY(ctx);
  ctx_ = std::move(*ctx);
  auto fd = listenTcp(options_.address, options_.port);
  EKCO_TRY(fd);
  port_ = boundPort(fd->get());
  int family = AF_INET6;
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (::getsockname(fd->get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0) {
    family = bound.ss_family;
  }
  std::vector<Listener> listeners;
  listeners.push_back(Listener{.fd = std::move(*fd),
                               .max_connections = options_.max_connections,
                               .evict_when_full = true,
                               .workers = options_.workers});
  auto loop = ConnectionLoop::start(ConnectionLoopOptions{
      .name = "webhook",
      .listeners = std::move(listeners),
      .open = [this, family](const Accepted& accepted) -> std::unique_ptr<Session> {
        std::shared_ptr<ssl::context> current;
        {
          std::lock_guard lock(ctx_mu_);
          current = ctx_;
        }
        return std::make_unique<TlsSession>(*this, accepted.fd, family, std::move(current));
      },
      .first_byte_timeout = options_.handshake_timeout,
      .request_timeout = options_.request_timeout,
      .max_kept_alive = options_.max_kept_alive,
      .per_source_workers = options_.per_source_workers});
  EKCO_TRY(loop);
  loop_ = std::move(*loop);
  return base::ok();
}

base::Status WebhookServer::Impl::setCredentials(const TlsCredentials& credentials) {
  auto ctx = tlsContext(credentials);
  EKCO_TRY(ctx);
  std::lock_guard lock(ctx_mu_);
  ctx_ = std::move(*ctx);
  return base::ok();
}

void WebhookServer::Impl::stop() {
  // A worker waiting for room in the budget gives up first.
  budget_.stop();
  if (loop_) loop_->stop();
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
