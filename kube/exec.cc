#include "kube/exec.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <charconv>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "kube/errors.h"
#include "kube/resource.h"

namespace ekco::kube {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

using base::Error;
using base::ErrorCode;
using base::Result;

// The channel protocols, newest first. v5 adds a close signal for stdin; both report the exit
// status on the error channel (3) as a metav1.Status.
constexpr const char* kProtocols = "v5.channel.k8s.io, v4.channel.k8s.io";
constexpr unsigned char kStdin = 0;
constexpr unsigned char kStdout = 1;
constexpr unsigned char kStderr = 2;
constexpr unsigned char kError = 3;
constexpr unsigned char kClose = 255;  // v5: {255, channel} closes that channel

struct Endpoint {
  std::string host{};  // without brackets
  std::string port{};
};

Result<Endpoint> parseServer(const std::string& server) {
  constexpr std::string_view kHttps = "https://";
  if (server.rfind(kHttps, 0) != 0) {
    return Error(fmt::format("exec needs an https:// API server, got \"{}\"", server),
                 ErrorCode::kInvalidArgument);
  }
  std::string rest = server.substr(kHttps.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  Endpoint ep;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos) {
      return Error(fmt::format("malformed server address \"{}\"", server),
                   ErrorCode::kInvalidArgument);
    }
    ep.host = rest.substr(1, close - 1);
    ep.port = close + 1 < rest.size() && rest[close + 1] == ':' ? rest.substr(close + 2) : "443";
  } else {
    auto colon = rest.rfind(':');
    ep.host = rest.substr(0, colon);
    ep.port = colon == std::string::npos ? "443" : rest.substr(colon + 1);
  }
  if (ep.host.empty() || ep.port.empty()) {
    return Error(fmt::format("malformed server address \"{}\"", server),
                 ErrorCode::kInvalidArgument);
  }
  return ep;
}

ErrorCode codeForNetError(const beast::error_code& ec) {
  if (ec == beast::error::timeout || ec == net::error::timed_out) return ErrorCode::kTimeout;
  return ErrorCode::kUnavailable;
}

// One exec exchange, driven by callbacks on a private io_context that run() bounds in time.
class Session {
 public:
  Session(net::io_context& ioc, ssl::context& ctx, const ExecRequest& request, Endpoint ep,
          std::string verify_name, std::string token)
      : request_(request),
        ep_(std::move(ep)),
        verify_name_(std::move(verify_name)),
        token_(std::move(token)),
        resolver_(ioc),
        ws_(ioc, ctx) {}

  void start() {
    resolver_.async_resolve(ep_.host, ep_.port,
                            [this](beast::error_code ec, tcp::resolver::results_type results) {
                              if (ec) return fail("resolve " + ep_.host, ec);
                              onResolve(results);
                            });
  }

  // Closes the socket so every pending operation completes with operation_aborted.
  void abort() {
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  bool finished() const { return finished_; }
  const std::optional<Error>& error() const { return error_; }
  ExecResult& result() { return result_; }
  const std::string& status() const { return status_; }
  bool statusSeen() const { return status_seen_; }

 private:
  // What one exec may send back, all channels together (ceph's JSON is a few KiB; a larger
  // answer is a broken or hostile stream). Beast bounds one message at 16 MiB itself.
  static constexpr std::size_t kMaxExecOutputBytes = std::size_t{16} << 20;

  void fail(const std::string& what, const beast::error_code& ec) {
    if (finished_) return;
    finished_ = true;
    error_ = Error(fmt::format("{}: {}", what, ec.message()), codeForNetError(ec));
  }

  void onResolve(const tcp::resolver::results_type& results) {
    beast::get_lowest_layer(ws_).async_connect(
        results, [this](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return fail(fmt::format("connect {}:{}", ep_.host, ep_.port), ec);
          onConnect();
        });
  }

  void onConnect() {
    SSL* ssl = ws_.next_layer().native_handle();
    boost::system::error_code addr_ec;
    (void)net::ip::make_address(verify_name_, addr_ec);
    const bool is_ip = !addr_ec;
    // SNI only for names; the peer check for names and addresses alike.
    if (!is_ip) SSL_set_tlsext_host_name(ssl, verify_name_.c_str());
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, verify_name_.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, verify_name_.c_str(), 0);
    }
    ws_.next_layer().async_handshake(ssl::stream_base::client, [this](beast::error_code ec) {
      if (ec) return fail("TLS handshake with " + ep_.host, ec);
      onTls();
    });
  }

  void onTls() {
    ws_.set_option(websocket::stream_base::decorator([this](websocket::request_type& req) {
      req.set(http::field::sec_websocket_protocol, kProtocols);
      req.set(http::field::user_agent, "ekco");
      if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
    }));
    ws_.binary(true);
    std::string host = ep_.host.find(':') != std::string::npos ? "[" + ep_.host + "]" : ep_.host;
    ws_.async_handshake(response_, host + ":" + ep_.port, execPath(request_),
                        [this](beast::error_code ec) { onUpgrade(ec); });
  }

  void onUpgrade(beast::error_code ec) {
    if (ec) {
      if (finished_) return;
      if (response_.result_int() != 101 && response_.result_int() != 0) {
        // The API refused the upgrade: a Status body says why (pod not found, forbidden).
        finished_ = true;
        HttpResponse r;
        r.status = static_cast<int>(response_.result_int());
        r.body = response_.body();
        error_ = apiError(fmt::format("exec {}/{}", request_.ns, request_.pod), r);
        return;
      }
      return fail("WebSocket upgrade", ec);
    }
    result_.protocol = std::string(response_[http::field::sec_websocket_protocol]);
    if (result_.protocol != "v5.channel.k8s.io" && result_.protocol != "v4.channel.k8s.io") {
      finished_ = true;
      error_ = Error(fmt::format("exec {}/{}: the server chose subprotocol \"{}\"; need "
                                 "v5.channel.k8s.io or v4.channel.k8s.io for the exit status",
                                 request_.ns, request_.pod, result_.protocol),
                     ErrorCode::kUnavailable);
      abort();
      return;
    }
    if (!request_.stdin_data.empty()) {
      stdin_frame_.reserve(request_.stdin_data.size() + 1);
      stdin_frame_.push_back(static_cast<char>(kStdin));
      stdin_frame_ += request_.stdin_data;
      ws_.async_write(net::buffer(stdin_frame_), [this](beast::error_code wec, std::size_t) {
        if (wec) return fail("write stdin", wec);
        if (result_.protocol == "v5.channel.k8s.io") {
          close_frame_ = {static_cast<char>(kClose), static_cast<char>(kStdin)};
          ws_.async_write(net::buffer(close_frame_), [this](beast::error_code cec, std::size_t) {
            if (cec) return fail("close stdin", cec);
          });
        }
      });
    }
    read();
  }

  void read() {
    ws_.async_read(buffer_, [this](beast::error_code ec, std::size_t) {
      if (ec) {
        // The server closes the stream after the status; that ends the exchange normally.
        if (ec == websocket::error::closed || ec == net::error::eof ||
            ec == ssl::error::stream_truncated) {
          finished_ = true;
          return;
        }
        return fail("read exec stream", ec);
      }
      std::string frame = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
      received_ += frame.size();
      if (received_ > kMaxExecOutputBytes) {
        finished_ = true;
        error_ = Error("read exec stream: the command's output is larger than " +
                           base::describeBytes(kMaxExecOutputBytes),
                       ErrorCode::kIo);
        abort();
        return;
      }
      if (!frame.empty()) {
        auto channel = static_cast<unsigned char>(frame[0]);
        std::string_view payload(frame.data() + 1, frame.size() - 1);
        switch (channel) {
          case kStdout:
            result_.stdout_data.append(payload);
            break;
          case kStderr:
            result_.stderr_data.append(payload);
            break;
          case kError:
            status_.append(payload);
            status_seen_ = true;
            break;
          default:
            break;  // resize/close signals from the server: nothing to do
        }
      }
      read();
    });
  }

  const ExecRequest& request_;
  Endpoint ep_;
  std::string verify_name_;
  std::string token_;
  tcp::resolver resolver_;
  websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws_;
  websocket::response_type response_;
  beast::flat_buffer buffer_;
  std::string stdin_frame_;
  std::string close_frame_;
  ExecResult result_;
  std::string status_;
  bool status_seen_ = false;
  std::size_t received_ = 0;  // bytes of every frame read so far
  bool finished_ = false;
  std::optional<Error> error_;
};

Result<std::unique_ptr<ssl::context>> tlsContext(const Connection& c) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  beast::error_code ec;
  if (c.insecure_skip_tls_verify) {
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    ctx->set_verify_mode(ssl::verify_peer);
    if (!c.ca_pem.empty()) {
      ctx->add_certificate_authority(net::buffer(c.ca_pem), ec);
      if (ec)
        return Error("exec: load CA certificate: " + ec.message(), ErrorCode::kInvalidArgument);
    } else {
      ctx->set_default_verify_paths(ec);
    }
  }
  if (!c.client_cert_pem.empty()) {
    ctx->use_certificate_chain(net::buffer(c.client_cert_pem), ec);
    if (ec) {
      return Error("exec: load client certificate: " + ec.message(), ErrorCode::kInvalidArgument);
    }
    ctx->use_private_key(net::buffer(c.client_key_pem), ssl::context::pem, ec);
    if (ec) return Error("exec: load client key: " + ec.message(), ErrorCode::kInvalidArgument);
  }
  return ctx;
}

}  // namespace

std::string execPath(const ExecRequest& r) {
  std::string path =
      fmt::format("/api/v1/namespaces/{}/pods/{}/exec?", percentEncode(r.ns), percentEncode(r.pod));
  for (const std::string& arg : r.command) path += "command=" + percentEncode(arg) + "&";
  if (!r.container.empty()) path += "container=" + percentEncode(r.container) + "&";
  if (!r.stdin_data.empty()) path += "stdin=true&";
  path += "stdout=true&stderr=true";
  return path;
}

Result<int> exitCodeFromStatus(std::string_view status_json) {
  nlohmann::json s = nlohmann::json::parse(status_json, nullptr, /*allow_exceptions=*/false);
  if (!s.is_object()) {
    return Error("exec: the error channel carried no JSON Status", ErrorCode::kParse);
  }
  std::string status = s.value("status", "");
  if (status == "Success") return 0;
  std::string message = s.contains("message") && s["message"].is_string()
                            ? s["message"].get<std::string>()
                            : std::string("command failed");
  if (status == "Failure" && s.value("reason", "") == "NonZeroExitCode") {
    const auto& details = s.contains("details") ? s["details"] : nlohmann::json();
    if (details.is_object() && details.contains("causes") && details["causes"].is_array()) {
      for (const auto& cause : details["causes"]) {
        if (cause.is_object() && cause.value("reason", "") == "ExitCode" &&
            cause.contains("message") && cause["message"].is_string()) {
          const std::string text = cause["message"].get<std::string>();
          int code = 0;
          auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), code);
          if (err == std::errc() && ptr == text.data() + text.size()) return code;
        }
      }
    }
    return Error("exec: NonZeroExitCode without an ExitCode cause: " + message, ErrorCode::kParse);
  }
  if (status == "Failure") {
    // The command never ran (executable not found, container not running, ...).
    return Error("exec: " + message, errorCodeFor(s.value("code", 500), s.value("reason", "")));
  }
  return Error(fmt::format("exec: unexpected status \"{}\" on the error channel", status),
               ErrorCode::kParse);
}

Result<ExecResult> WebSocketExecutor::exec(const ExecRequest& request) {
  const std::string op = fmt::format("exec {}/{}", request.ns, request.pod);
  if (request.ns.empty() || request.pod.empty() || request.command.empty()) {
    return Error(op + ": namespace, pod and command are required", ErrorCode::kInvalidArgument);
  }
  auto ep = parseServer(connection_.server);
  if (!ep) return std::move(ep).error().wrap(op);
  std::string token = connection_.token;
  if (tokens_ != nullptr) {
    token = tokens_->current();
  } else if (!connection_.token_file.empty()) {
    return Error(op + ": the connection's token file needs a TokenSource",
                 ErrorCode::kInvalidArgument);
  }
  auto ctx = tlsContext(connection_);
  if (!ctx) return std::move(ctx).error().wrap(op);

  net::io_context ioc;
  std::string verify_name =
      connection_.tls_server_name.empty() ? ep->host : connection_.tls_server_name;
  Session session(ioc, **ctx, request, *ep, verify_name, token);
  session.start();
  // (1) Bounded run; (2) on timeout abort the socket and drain the cancelled handlers.
  ioc.run_for(request.timeout);
  if (!ioc.stopped()) {
    session.abort();
    ioc.restart();
    ioc.run();
    return Error(fmt::format("{}: no exit status within {} ms", op, request.timeout.count()),
                 ErrorCode::kTimeout);
  }
  if (session.error()) {
    if (session.error()->message().rfind("exec ", 0) == 0) return *session.error();
    return session.error()->wrap(op);
  }
  if (!session.statusSeen()) {
    return Error(op + ": the stream ended without an exit status", ErrorCode::kUnavailable);
  }
  auto code = exitCodeFromStatus(session.status());
  if (!code) return std::move(code).error();
  ExecResult out = std::move(session.result());
  out.exit_code = *code;
  return out;
}

}  // namespace ekco::kube
