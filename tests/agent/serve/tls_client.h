// A small HTTPS/1.1 client for the webhook server's tests and its benchmark
// (bench/webhook_bench.cc): one kept-alive TLS connection that verifies the server's chain
// against a CA (PEM) and its certificate against a DNS name, as the kube-apiserver does when it
// calls a webhook through a Service (ServerName ekco.kurl.svc). Throws std::runtime_error on any
// failure (tests and benchmarks only).
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace ekco::testing {

struct HttpAnswer {
  int status = 0;
  std::string body{};
  std::string connection{};  // the Connection header
};

class TlsClient {
 public:
  // Connects to 127.0.0.1:port (from `source`, another loopback address, when given) and
  // completes the handshake, verifying the chain against `ca_pem` and the certificate against
  // `server_name`.
  TlsClient(int port, const std::string& ca_pem, const std::string& server_name,
            const std::string& source = "")
      : ctx_(boost::asio::ssl::context::tls_client), stream_(ioc_, ctx_) {
    ctx_.add_certificate_authority(boost::asio::buffer(ca_pem));
    stream_.set_verify_mode(boost::asio::ssl::verify_peer);
    stream_.set_verify_callback(boost::asio::ssl::host_name_verification(server_name));
    if (SSL_set_tlsext_host_name(stream_.native_handle(), server_name.c_str()) != 1) {
      throw std::runtime_error("SNI");
    }
    boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"),
                                      static_cast<unsigned short>(port));
    if (!source.empty()) {
      stream_.next_layer().open(boost::asio::ip::tcp::v4());
      stream_.next_layer().bind({boost::asio::ip::make_address(source), 0});
    }
    stream_.next_layer().connect(ep);
    stream_.handshake(boost::asio::ssl::stream_base::client);
  }

  // One request on the kept-alive connection.
  HttpAnswer post(std::string_view target, std::string body, std::string_view method = "POST") {
    namespace http = boost::beast::http;
    http::request<http::string_body> req;
    req.method_string(std::string(method));
    req.target(std::string(target));
    req.version(11);
    req.set(http::field::host, "ekco.kurl.svc");
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.keep_alive(true);
    req.prepare_payload();
    http::write(stream_, req);
    return read();
  }

  // Raw bytes (a request written by hand: a header alone, a lie about Content-Length).
  void send(std::string_view bytes) { boost::asio::write(stream_, boost::asio::buffer(bytes)); }

  HttpAnswer read() {
    namespace http = boost::beast::http;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::read(stream_, buffer_, parser);
    HttpAnswer a;
    a.status = static_cast<int>(parser.get().result_int());
    a.body = parser.get().body();
    a.connection = std::string(parser.get()[http::field::connection]);
    return a;
  }

  // The serial of the certificate the server presented (hex).
  std::string peerSerial() {
    X509* cert = SSL_get1_peer_certificate(stream_.native_handle());
    if (cert == nullptr) return {};
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), nullptr);
    char* hex = BN_bn2hex(bn);
    std::string out(hex);
    OPENSSL_free(hex);
    BN_free(bn);
    X509_free(cert);
    return out;
  }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ssl::context ctx_;
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream_;
  boost::beast::flat_buffer buffer_;
};

}  // namespace ekco::testing
