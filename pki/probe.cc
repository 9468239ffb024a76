#include "pki/probe.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>

#include <fmt/format.h>

#include "pki/openssl_ptr.h"

namespace ekco::pki {

using base::Error;
using base::ErrorCode;

namespace {

using SslCtxPtr = std::unique_ptr<SSL_CTX, detail::Deleter<SSL_CTX, SSL_CTX_free>>;

enum class Wait { kReady, kTimedOut, kFailed };

// Waits until the BIO's socket is ready for what the last call wanted, or the deadline.
Wait waitReady(BIO* bio, base::MonoTime deadline, const base::Clock& clock) {
  const int fd = static_cast<int>(BIO_get_fd(bio, nullptr));
  if (fd < 0) return Wait::kFailed;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock.monoNow());
  if (left.count() <= 0) return Wait::kTimedOut;
  pollfd p{.fd = fd,
           .events = static_cast<short>((BIO_should_read(bio) ? POLLIN : 0) |
                                        (BIO_should_write(bio) ? POLLOUT : 0)),
           .revents = 0};
  if (p.events == 0) p.events = POLLIN | POLLOUT;
  const int n = ::poll(&p, 1, static_cast<int>(left.count()));
  if (n == 0) return Wait::kTimedOut;
  return n > 0 ? Wait::kReady : Wait::kFailed;
}

}  // namespace

base::Result<Certificate> presentedCertificate(const std::string& host, int port,
                                               std::chrono::milliseconds timeout,
                                               const base::Clock& clock,
                                               const std::string& server_name) {
  const std::string where = fmt::format("TLS to {}:{}", host, port);
  const auto fail = [&](std::string_view what, ErrorCode code = ErrorCode::kUnavailable) {
    std::string message = fmt::format("{}: {}", where, what);
    if (const unsigned long e = ERR_get_error(); e != 0) {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof buf);
      message += fmt::format(" ({})", buf);
    }
    ERR_clear_error();
    return Error(std::move(message), code);
  };
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return fail("cannot create a TLS context", ErrorCode::kIo);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // read only, never trusted
  detail::BioPtr bio(BIO_new_ssl_connect(ctx.get()));
  if (!bio) return fail("cannot create a connection", ErrorCode::kIo);
  const std::string address = host.find(':') != std::string::npos
                                  ? fmt::format("[{}]:{}", host, port)
                                  : fmt::format("{}:{}", host, port);
  BIO_set_conn_hostname(bio.get(), address.c_str());
  BIO_set_nbio(bio.get(), 1);
  SSL* ssl = nullptr;
  BIO_get_ssl(bio.get(), &ssl);
  if (ssl == nullptr) return fail("cannot create a connection", ErrorCode::kIo);
  if (!server_name.empty()) SSL_set_tlsext_host_name(ssl, server_name.c_str());
  const base::MonoTime deadline = clock.monoNow() + timeout;
  while (BIO_do_handshake(bio.get()) <= 0) {
    if (!BIO_should_retry(bio.get())) return fail("handshake failed");
    switch (waitReady(bio.get(), deadline, clock)) {
      case Wait::kReady:
        break;
      case Wait::kTimedOut:
        return fail(fmt::format("no handshake within {}ms", timeout.count()), ErrorCode::kTimeout);
      case Wait::kFailed:
        return fail("connection failed");
    }
  }
  detail::X509Ptr peer(SSL_get1_peer_certificate(ssl));
  if (!peer) return fail("the server presented no certificate");
  detail::BioPtr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509(out.get(), peer.get()) != 1) {
    return fail("cannot encode the certificate", ErrorCode::kIo);
  }
  return parseCertificate(detail::bioText(out.get()), where);
}

}  // namespace ekco::pki
