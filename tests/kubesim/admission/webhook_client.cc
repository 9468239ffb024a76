// The HTTPS client kubesim calls admission webhooks with (Boost.Beast over OpenSSL), with the
// errors worded as kube-apiserver's Go client words them.
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "tests/kubesim/admission/admission_webhooks.h"

namespace ekco::kubesim::webhooks {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

bool isIp(const std::string& host) {
  boost::system::error_code ec;
  (void)net::ip::make_address(host, ec);
  return !ec;
}

// crypto/x509's words for a verification failure.
std::string verifyError(long result, const std::string& name) {
  switch (result) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return "tls: failed to verify certificate: x509: certificate signed by unknown authority";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return "tls: failed to verify certificate: x509: certificate is not valid for " + name;
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "tls: failed to verify certificate: x509: certificate has expired or is not yet "
             "valid";
    default:
      return std::string("tls: failed to verify certificate: ") +
             X509_verify_cert_error_string(result);
  }
}

}  // namespace

base::Result<std::string> post(const Target& t, const std::string& body) {
  net::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (!t.ca_pem.empty()) {
    ctx.add_certificate_authority(net::buffer(t.ca_pem), ec);
    if (ec) return base::Error("x509: the caBundle holds no usable PEM certificate");
  } else {
    ctx.set_default_verify_paths(ec);
  }
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  SSL* ssl_handle = stream.native_handle();
  if (isIp(t.server_name)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle), t.server_name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_handle, t.server_name.c_str());
    SSL_set1_host(ssl_handle, t.server_name.c_str());
  }
  tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(t.host, t.port, ec);
  if (ec) return base::Error("dial tcp: lookup " + t.host + ": " + ec.message());

  http::request<http::string_body> req{http::verb::post, t.target, 11};
  req.set(http::field::host, t.server_name + ":" + t.port);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "application/json, */*");
  req.set(http::field::user_agent, "kube-apiserver-admission");
  req.body() = body;
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(16 * 1024 * 1024);

  // One deadline for dial, handshake, request and answer, as the request context's timeout.
  std::string failure;
  bool timed_out = false;
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(t.timeout);
  const std::string address = endpoints.begin()->endpoint().address().to_string() + ":" + t.port;
  auto fail = [&](const boost::system::error_code& e, const std::string& what) {
    if (e == beast::error::timeout) {
      timed_out = true;
    } else if (failure.empty()) {
      failure = what;
    }
  };
  lowest.async_connect(endpoints, [&](boost::system::error_code e, const tcp::endpoint&) {
    if (e) {
      std::string why = e == net::error::connection_refused ? "connect: connection refused"
                                                            : "connect: " + e.message();
      return fail(e, "dial tcp " + address + ": " + why);
    }
    stream.async_handshake(ssl::stream_base::client, [&](boost::system::error_code h) {
      if (h) {
        const long verify = SSL_get_verify_result(ssl_handle);
        return fail(h, verify != X509_V_OK ? verifyError(verify, t.server_name)
                                           : "tls: handshake failure: " + h.message());
      }
      http::async_write(stream, req, [&](boost::system::error_code w, std::size_t) {
        if (w) return fail(w, "write: " + w.message());
        http::async_read(stream, buffer, parser, [&](boost::system::error_code r, std::size_t) {
          if (r) return fail(r, "read: " + r.message());
        });
      });
    });
  });
  ioc.run();
  if (timed_out) return base::Error("context deadline exceeded");
  if (!failure.empty()) return base::Error(failure);
  const auto& res = parser.get();
  const unsigned code = res.result_int();
  if (code < 200 || code > 299) {
    return base::Error("an error on the server (\"" + res.body().substr(0, 200) +
                       "\") has prevented the request from succeeding (HTTP " +
                       std::to_string(code) + ")");
  }
  return res.body();
}

}  // namespace ekco::kubesim::webhooks
