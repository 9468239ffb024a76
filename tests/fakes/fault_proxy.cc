#include "tests/fakes/fault_proxy.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <thread>

// One thread per connection, blocking sockets with poll() before each read so every loop sees
// a change of the fault (and stop()) within kTick.

namespace ekco::fakes {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTick{20};
constexpr std::size_t kMaxRequestHead = 64 * 1024;
constexpr std::size_t kMaxRequestBody = 8 * 1024 * 1024;
constexpr std::size_t kEndlessChunk = 64 * 1024;

enum class Io { kData, kTimeout, kClosed };

// Reads what `ssl` has (waiting up to `wait` for the socket) and appends it to `out`.
Io readSome(SSL* ssl, int fd, std::string& out, milliseconds wait) {
  if (SSL_pending(ssl) == 0) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int r = ::poll(&p, 1, static_cast<int>(wait.count()));
    if (r == 0 || (r < 0 && errno == EINTR)) return Io::kTimeout;
    if (r < 0) return Io::kClosed;
  }
  char buf[16384];
  const int n = SSL_read(ssl, buf, sizeof buf);
  if (n > 0) {
    out.append(buf, static_cast<std::size_t>(n));
    return Io::kData;
  }
  const int err = SSL_get_error(ssl, n);
  return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? Io::kTimeout : Io::kClosed;
}

bool writeAll(SSL* ssl, std::string_view data) {
  while (!data.empty()) {
    const int n = SSL_write(ssl, data.data(), static_cast<int>(data.size()));
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Blocking sockets, but never blocked for long: a stuck peer is dropped after 10 s.
void boundSocket(int fd) {
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// The next close() of `fd` sends an RST instead of a FIN.
void armReset(int fd) {
  linger l{.l_onoff = 1, .l_linger = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

std::string opensslError(std::string_view what) {
  const unsigned long code = ERR_get_error();
  char buf[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, buf, sizeof buf);
  return fmt::format("fault proxy: {}: {}", what, buf);
}

bool iequalsPrefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

std::string statusResponse(int code, std::string_view reason, std::string_view message) {
  const std::string body = fmt::format(
      R"({{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"{}",)"
      R"("reason":"{}","details":{{"retryAfterSeconds":1}},"code":{}}})",
      message, reason, code);
  const char* text = code == 429 ? "Too Many Requests" : "Internal Server Error";
  if (code == 502) text = "Bad Gateway";
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
      "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
      code, text, body.size(), body);
}

}  // namespace

std::string describeFault(const Fault& fault) {
  switch (fault.mode) {
    case FaultMode::kPass:
      return "pass";
    case FaultMode::kRefuse:
      return "refuse";
    case FaultMode::kHang:
      return "hang";
    case FaultMode::kSlow:
      return fmt::format("slow {}ms", fault.latency.count());
    case FaultMode::kReset:
      return "reset";
    case FaultMode::k429:
      return fmt::format("429 @{:.0f}%", fault.rate * 100);
    case FaultMode::k500:
      return fmt::format("500 @{:.0f}%", fault.rate * 100);
    case FaultMode::kTruncate:
      return "truncated body";
    case FaultMode::kEndlessLine:
      return "endless line";
  }
  return "?";
}

class FaultProxy::Impl {
 public:
  explicit Impl(FaultProxyOptions options) : options_(std::move(options)) {}
  ~Impl() {
    stop();
    if (server_ctx_ != nullptr) SSL_CTX_free(server_ctx_);
    if (client_ctx_ != nullptr) SSL_CTX_free(client_ctx_);
  }

  base::Status start();
  void stop();

  std::uint16_t port_ = 0;
  mutable std::mutex mu_;  // fault_, share_, counts_
  Fault fault_{};
  double share_ = 0;
  std::map<std::int64_t, std::int64_t> counts_;
  std::int64_t total_ = 0;
  const Clock::time_point started_ = Clock::now();

  Fault fault() const {
    std::lock_guard lock(mu_);
    return fault_;
  }

  void count() {
    std::lock_guard lock(mu_);
    ++total_;
    ++counts_[std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started_).count()];
  }

 private:
  struct Conn {
    std::atomic<int> down_fd{-1};
    std::atomic<int> up_fd{-1};
    std::atomic<bool> done{false};
    std::mutex fd_mu;  // held while an fd is closed, and while stop() shuts it down
    std::thread thread;
  };

  void acceptLoop();
  void serve(Conn& conn);
  // What the connection ends with.
  enum class End { kClose, kReset, kAbort };
  End handle(Conn& conn, SSL* down, int down_fd);
  End pump(SSL* down, int down_fd, SSL* up, int up_fd, bool is_watch);
  End endless(SSL* down);
  bool takeShare(double rate) {
    std::lock_guard lock(mu_);
    share_ += rate;
    if (share_ >= 1.0 - 1e-9) {
      share_ -= 1.0;
      return true;
    }
    return false;
  }
  void sleepFor(milliseconds d) const {
    const auto until = Clock::now() + d;
    while (!stopping_ && Clock::now() < until) {
      std::this_thread::sleep_for(std::min<Clock::duration>(kTick, until - Clock::now()));
    }
  }
  int connectUpstream();

  FaultProxyOptions options_;
  SSL_CTX* server_ctx_ = nullptr;
  SSL_CTX* client_ctx_ = nullptr;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex conns_mu_;
  std::list<std::unique_ptr<Conn>> conns_;
  std::mutex stop_mu_;
  bool stopped_ = false;
};

base::Status FaultProxy::Impl::start() {
  // OpenSSL writes to the sockets with write(2): a client that went away must not end the test
  // process with SIGPIPE.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
  server_ctx_ = SSL_CTX_new(TLS_server_method());
  client_ctx_ = SSL_CTX_new(TLS_client_method());
  if (server_ctx_ == nullptr || client_ctx_ == nullptr) {
    return base::Error(opensslError("SSL_CTX_new"), base::ErrorCode::kIo);
  }
  {
    BIO* bio =
        BIO_new_mem_buf(options_.cert_pem.data(), static_cast<int>(options_.cert_pem.size()));
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    bio = BIO_new_mem_buf(options_.key_pem.data(), static_cast<int>(options_.key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    const bool ok = cert != nullptr && key != nullptr &&
                    SSL_CTX_use_certificate(server_ctx_, cert) == 1 &&
                    SSL_CTX_use_PrivateKey(server_ctx_, key) == 1;
    X509_free(cert);
    EVP_PKEY_free(key);
    if (!ok) return base::Error(opensslError("the serving certificate"), base::ErrorCode::kIo);
  }
  {
    BIO* bio = BIO_new_mem_buf(options_.upstream_ca_pem.data(),
                               static_cast<int>(options_.upstream_ca_pem.size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    const bool ok =
        ca != nullptr && X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx_), ca) == 1;
    X509_free(ca);
    if (!ok) return base::Error(opensslError("the upstream CA"), base::ErrorCode::kIo);
    SSL_CTX_set_verify(client_ctx_, SSL_VERIFY_PEER, nullptr);
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return base::errnoError("fault proxy: socket", errno);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return base::errnoError("fault proxy: listen on 127.0.0.1", errno);
  }
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { acceptLoop(); });
  return base::ok();
}

void FaultProxy::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard lock(conns_mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    std::lock_guard lock(c->fd_mu);
    for (const std::atomic<int>* fd : {&c->down_fd, &c->up_fd}) {
      if (const int f = fd->load(); f >= 0) ::shutdown(f, SHUT_RDWR);
    }
  }
  for (auto& c : conns) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void FaultProxy::Impl::acceptLoop() {
  while (!stopping_) {
    pollfd p{.fd = listen_fd_, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, static_cast<int>(kTick.count())) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (fault().mode == FaultMode::kRefuse) {
      count();
      armReset(fd);
      ::close(fd);
      continue;
    }
    boundSocket(fd);
    std::lock_guard lock(conns_mu_);
    conns_.remove_if([](const std::unique_ptr<Conn>& c) {
      if (!c->done) return false;
      c->thread.join();
      return true;
    });
    auto conn = std::make_unique<Conn>();
    conn->down_fd = fd;
    Conn* raw = conn.get();
    conn->thread = std::thread([this, raw] { serve(*raw); });
    conns_.push_back(std::move(conn));
  }
}

int FaultProxy::Impl::connectUpstream() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  boundSocket(fd);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(options_.upstream_port);
  if (::inet_pton(AF_INET, options_.upstream_host.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void FaultProxy::Impl::serve(Conn& conn) {
  const int fd = conn.down_fd;
  SSL* down = SSL_new(server_ctx_);
  End end = End::kAbort;
  if (down != nullptr && SSL_set_fd(down, fd) == 1 && SSL_accept(down) == 1) {
    end = handle(conn, down, fd);
  }
  if (end == End::kClose) SSL_shutdown(down);
  if (end == End::kReset) armReset(fd);
  if (down != nullptr) SSL_free(down);
  {
    std::lock_guard lock(conn.fd_mu);
    conn.down_fd = -1;
    ::close(fd);
  }
  conn.done = true;
}

FaultProxy::Impl::End FaultProxy::Impl::handle(Conn& conn, SSL* down, int down_fd) {
  // The request head.
  std::string request;
  std::size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    if (stopping_) return End::kAbort;
    if (fault().mode == FaultMode::kRefuse) return End::kReset;
    const Io io = readSome(down, down_fd, request, kTick);
    if (io == Io::kClosed) return End::kAbort;
    head_end = request.find("\r\n\r\n");
    if (head_end == std::string::npos && request.size() > kMaxRequestHead) return End::kAbort;
  }
  count();
  // Request line and headers; the body by Content-Length.
  std::string head;
  std::size_t content_length = 0;
  bool is_watch = false;
  {
    std::size_t pos = 0;
    bool first = true;
    while (pos < head_end) {
      std::size_t eol = request.find("\r\n", pos);
      const std::string_view line(request.data() + pos, eol - pos);
      pos = eol + 2;
      if (first) {
        first = false;
        const std::size_t q = line.find('?');
        if (q != std::string_view::npos) {
          const std::string_view query = line.substr(q);
          is_watch = query.find("watch=true") != std::string_view::npos ||
                     query.find("watch=1") != std::string_view::npos;
        }
      } else if (iequalsPrefix(line, "content-length:")) {
        content_length = std::strtoull(std::string(line.substr(15)).c_str(), nullptr, 10);
      } else if (iequalsPrefix(line, "connection:") || iequalsPrefix(line, "keep-alive:")) {
        continue;  // replaced below
      }
      head.append(line).append("\r\n");
    }
    head.append("Connection: close\r\n\r\n");
  }
  if (content_length > kMaxRequestBody) return End::kAbort;
  std::string body = request.substr(head_end + 4);
  while (body.size() < content_length) {
    if (stopping_) return End::kAbort;
    if (readSome(down, down_fd, body, kTick) == Io::kClosed) return End::kAbort;
  }

  const Fault f = fault();
  switch (f.mode) {
    case FaultMode::kRefuse:
      return End::kReset;
    case FaultMode::kHang:
      while (!stopping_ && fault().mode == FaultMode::kHang) sleepFor(kTick);
      return End::kAbort;  // closed without an answer
    case FaultMode::k429:
    case FaultMode::k500:
      if (takeShare(f.rate)) {
        const bool too_many = f.mode == FaultMode::k429;
        const std::string reply =
            too_many ? statusResponse(429, "TooManyRequests", "fault proxy: too many requests")
                     : statusResponse(500, "InternalError", "fault proxy: internal error");
        return writeAll(down, reply) ? End::kClose : End::kAbort;
      }
      break;
    case FaultMode::kEndlessLine:
      if (is_watch) return endless(down);
      break;
    case FaultMode::kSlow:
      sleepFor(f.latency);
      break;
    default:
      break;
  }

  const int up_fd = connectUpstream();
  if (up_fd < 0) {
    return writeAll(down, statusResponse(502, "InternalError", "fault proxy: upstream down"))
               ? End::kClose
               : End::kAbort;
  }
  conn.up_fd = up_fd;
  SSL* up = SSL_new(client_ctx_);
  End end = End::kAbort;
  if (up != nullptr && SSL_set_fd(up, up_fd) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(up), options_.upstream_host.c_str());
    if (SSL_connect(up) == 1 && writeAll(up, head) &&
        writeAll(up, body.substr(0, content_length))) {
      end = pump(down, down_fd, up, up_fd, is_watch);
    } else {
      end = writeAll(down, statusResponse(502, "InternalError", "fault proxy: upstream failed"))
                ? End::kClose
                : End::kAbort;
    }
  }
  if (up != nullptr) SSL_free(up);
  std::lock_guard lock(conn.fd_mu);
  conn.up_fd = -1;
  ::close(up_fd);
  return end;
}

FaultProxy::Impl::End FaultProxy::Impl::pump(SSL* down, int down_fd, SSL* up, int up_fd,
                                             bool is_watch) {
  std::string pending;  // read from the upstream, not forwarded yet
  bool head_sent = false;
  for (;;) {
    if (stopping_) return End::kAbort;
    const Fault f = fault();
    switch (f.mode) {
      case FaultMode::kRefuse:
        return End::kReset;
      case FaultMode::kHang:
        while (!stopping_ && fault().mode == FaultMode::kHang) sleepFor(kTick);
        return End::kAbort;
      case FaultMode::kEndlessLine:
        if (is_watch) return End::kClose;  // its client comes back for the endless line
        break;
      case FaultMode::kReset:
      case FaultMode::kTruncate:
        if (head_sent) return f.mode == FaultMode::kReset ? End::kReset : End::kClose;
        break;
      default:
        break;
    }
    // Wait for the upstream; a client that closes or sends anything more is gone.
    if (SSL_pending(up) == 0) {
      pollfd p[2] = {{.fd = up_fd, .events = POLLIN, .revents = 0},
                     {.fd = down_fd, .events = POLLIN, .revents = 0}};
      const int r = ::poll(p, 2, static_cast<int>(kTick.count()));
      if (r < 0 && errno != EINTR) return End::kAbort;
      if (r <= 0) continue;
      if (p[1].revents != 0) return End::kAbort;
      if (p[0].revents == 0) continue;
    }
    const Io io = readSome(up, up_fd, pending, milliseconds(0));
    if (io == Io::kTimeout) continue;
    if (io == Io::kClosed) {
      if (!pending.empty() && !writeAll(down, pending)) return End::kAbort;
      return End::kClose;
    }
    if (!head_sent) {
      const std::size_t head_end = pending.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      const std::size_t body = pending.size() - (head_end + 4);
      if ((f.mode == FaultMode::kReset || f.mode == FaultMode::kTruncate)) {
        if (body == 0) continue;  // cut inside the body, not at its start
        // The header and half of the first body bytes, then the cut.
        writeAll(down, std::string_view(pending).substr(0, head_end + 4 + body / 2));
        if (f.mode == FaultMode::kTruncate) return End::kClose;
        // Let the client read that much first: an RST makes the kernel drop what it holds.
        sleepFor(milliseconds(100));
        return End::kReset;
      }
    }
    if (f.mode == FaultMode::kSlow) sleepFor(f.latency);
    if (!writeAll(down, pending)) return End::kAbort;
    pending.clear();
    head_sent = true;
  }
}

FaultProxy::Impl::End FaultProxy::Impl::endless(SSL* down) {
  const std::string start = R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":")";
  std::string out =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
      "Connection: close\r\n\r\n";
  out += fmt::format("{:x}\r\n{}\r\n", start.size(), start);
  if (!writeAll(down, out)) return End::kAbort;
  const std::string chunk =
      fmt::format("{:x}\r\n{}\r\n", kEndlessChunk, std::string(kEndlessChunk, 'x'));
  // About 12 MiB/s: enough to fill any line bound within seconds, without burning a core.
  while (!stopping_ && fault().mode == FaultMode::kEndlessLine) {
    if (!writeAll(down, chunk)) return End::kAbort;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return End::kAbort;
}

FaultProxy::FaultProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FaultProxy::~FaultProxy() { stop(); }

base::Result<std::unique_ptr<FaultProxy>> FaultProxy::start(FaultProxyOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  EKCO_TRY(impl->start());
  return std::unique_ptr<FaultProxy>(new FaultProxy(std::move(impl)));
}

std::uint16_t FaultProxy::port() const { return impl_->port_; }
std::string FaultProxy::url() const { return "https://127.0.0.1:" + std::to_string(port()); }

void FaultProxy::setFault(const Fault& fault) {
  std::lock_guard lock(impl_->mu_);
  impl_->fault_ = fault;
  impl_->share_ = 0;
}
Fault FaultProxy::fault() const { return impl_->fault(); }

std::int64_t FaultProxy::requests() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->total_;
}

std::int64_t FaultProxy::peakPerSecond(Clock::time_point from, Clock::time_point to) const {
  using std::chrono::duration_cast;
  using std::chrono::seconds;
  const auto first = duration_cast<seconds>(from - impl_->started_).count();
  const auto last = duration_cast<seconds>(to - impl_->started_).count();
  std::lock_guard lock(impl_->mu_);
  std::int64_t peak = 0;
  for (auto it = impl_->counts_.lower_bound(first); it != impl_->counts_.end() && it->first <= last;
       ++it) {
    peak = std::max(peak, it->second);
  }
  return peak;
}

void FaultProxy::stop() { impl_->stop(); }

}  // namespace ekco::fakes
