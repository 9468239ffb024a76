#include "tests/kubesim/api_tests/test_client.h"

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ekco::kubesim::testing {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;

struct TestClient::Impl {
  std::uint16_t port = 0;
  net::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  std::string authorization{};  // "Bearer TOKEN" or ""
  std::string accept = "application/json";

  std::unique_ptr<ssl::stream<tcp::socket>> connect() {
    auto stream = std::make_unique<ssl::stream<tcp::socket>>(ioc, ctx);
    stream->next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    SSL_set_tlsext_host_name(stream->native_handle(), "localhost");
    stream->set_verify_callback(ssl::host_name_verification("127.0.0.1"));
    stream->handshake(ssl::stream_base::client);
    return stream;
  }
};

TestClient::TestClient(const Server& server) : impl_(std::make_unique<Impl>()) {
  impl_->port = server.port();
  impl_->ctx.add_certificate_authority(net::buffer(server.caPem()));
  impl_->ctx.set_verify_mode(ssl::verify_peer);
  impl_->ctx.use_certificate_chain(net::buffer(server.clientCertPem()));
  impl_->ctx.use_private_key(net::buffer(server.clientKeyPem()), ssl::context::pem);
}

TestClient::TestClient(const Server& server, const std::string& bearer_token)
    : impl_(std::make_unique<Impl>()) {
  impl_->port = server.port();
  impl_->ctx.add_certificate_authority(net::buffer(server.caPem()));
  impl_->ctx.set_verify_mode(ssl::verify_peer);
  impl_->authorization = "Bearer " + bearer_token;
}

TestClient::~TestClient() = default;

void TestClient::setAccept(std::string accept) { impl_->accept = std::move(accept); }

HttpResponse TestClient::request(const std::string& method, const std::string& target,
                                 const std::string& body, const std::string& content_type) {
  auto stream = impl_->connect();
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::accept, impl_->accept);
  if (!impl_->authorization.empty()) req.set(http::field::authorization, impl_->authorization);
  if (!body.empty()) {
    req.set(http::field::content_type, content_type);
    req.body() = body;
  }
  req.keep_alive(false);
  req.prepare_payload();
  http::write(*stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256u << 20);
  http::read(*stream, buffer, parser);
  auto res = parser.release();
  boost::system::error_code ec;
  stream->shutdown(ec);
  return HttpResponse{.status = static_cast<int>(res.result_int()),
                      .body = res.body(),
                      .content_type = std::string(res[http::field::content_type]),
                      .retry_after = std::string(res[http::field::retry_after])};
}

std::vector<json> TestClient::watch(const std::string& target,
                                    const std::function<bool(const std::vector<json>&)>& done,
                                    std::chrono::milliseconds timeout,
                                    const std::function<void()>& on_open) {
  auto stream = impl_->connect();
  // A watchdog ends the read at the timeout by shutting the socket down.
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  int fd = stream->next_layer().native_handle();
  std::thread watchdog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return finished; })) ::shutdown(fd, SHUT_RDWR);
  });
  std::vector<json> events;
  try {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::accept, impl_->accept);
    if (!impl_->authorization.empty()) req.set(http::field::authorization, impl_->authorization);
    http::write(*stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    http::read_header(*stream, buffer, parser);
    if (on_open) on_open();
    std::size_t consumed = 0;
    while (!parser.is_done()) {
      http::read_some(*stream, buffer, parser);
      std::string& body = parser.get().body();
      std::size_t nl;
      while ((nl = body.find('\n', consumed)) != std::string::npos) {
        events.push_back(json::parse(body.substr(consumed, nl - consumed), nullptr, false));
        consumed = nl + 1;
      }
      if (done && done(events)) break;
    }
  } catch (const std::exception&) {
    // Timeout or the server closed the stream.
  }
  {
    std::lock_guard lock(mu);
    finished = true;
  }
  cv.notify_all();
  watchdog.join();
  return events;
}

ExecResult TestClient::exec(const std::string& target, const std::string& protocol) {
  auto stream = impl_->connect();
  websocket::stream<ssl::stream<tcp::socket>&> ws(*stream);
  const std::string authorization = impl_->authorization;
  ws.set_option(
      websocket::stream_base::decorator([protocol, authorization](websocket::request_type& req) {
        req.set(http::field::sec_websocket_protocol, protocol);
        if (!authorization.empty()) req.set(http::field::authorization, authorization);
      }));
  websocket::response_type res;
  ws.handshake(res, "127.0.0.1", target);
  ExecResult result;
  result.protocol = std::string(res[http::field::sec_websocket_protocol]);
  while (true) {
    beast::flat_buffer buffer;
    boost::system::error_code ec;
    ws.read(buffer, ec);
    if (ec) break;
    std::string frame = beast::buffers_to_string(buffer.data());
    if (frame.empty()) continue;
    std::string data = frame.substr(1);
    if (frame[0] == 1) result.stdout_data += data;
    if (frame[0] == 2) result.stderr_data += data;
    if (frame[0] == 3) result.status = json::parse(data, nullptr, false);
  }
  return result;
}

}  // namespace ekco::kubesim::testing
