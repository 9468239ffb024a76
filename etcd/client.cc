#include "etcd/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "kube/decode/json_depth.h"
#include "kube/decode/json_fields.h"
#include "kube/errors.h"
#include "kube/transport/curl_transport.h"

namespace ekco::etcd {

using base::Error;
using base::ErrorCode;
using base::Result;
using base::Status;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Certificates

Result<ClientOptions> loadClientCertificates(const hostfs::HostFs& fs,
                                             const std::string& certificates_dir) {
  std::string dir = certificates_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string etcd_dir = (dir == "/" ? std::string() : dir) + "/etcd/";
  ClientOptions options;
  const std::pair<const char*, std::string*> files[] = {
      {"ca.crt", &options.ca_pem},
      {"healthcheck-client.crt", &options.cert_pem},
      {"healthcheck-client.key", &options.key_pem},
  };
  for (const auto& [name, out] : files) {
    const std::string path = etcd_dir + name;
    auto content = fs.read(path);
    if (!content) return std::move(content).error().wrap("etcd client certificates");
    if (content->find("-----BEGIN ") == std::string::npos) {
      return Error("etcd client certificates: " + path + ": no PEM block", ErrorCode::kParse);
    }
    *out = std::move(*content);
  }
  return options;
}

// ---------------------------------------------------------------------------------------------
// Transport

TransportFactory curlTransportFactory() {
  return [](const std::string& base_url,
            const ClientOptions& options) -> Result<std::unique_ptr<kube::HttpTransport>> {
    // CurlTransport wants a clock for bearer-token refresh, which etcd does not use.
    static const base::SystemClock clock;
    kube::Connection connection;
    connection.server = base_url;
    connection.ca_pem = options.ca_pem;
    connection.client_cert_pem = options.cert_pem;
    connection.client_key_pem = options.key_pem;
    connection.source = "etcd " + base_url;
    kube::CurlTransportOptions transport_options;
    transport_options.connect_timeout = options.timeout;
    transport_options.max_idle_handles = 2;
    auto transport =
        kube::CurlTransport::create(std::move(connection), nullptr, clock, transport_options);
    if (!transport) return std::move(transport).error();
    return std::unique_ptr<kube::HttpTransport>(std::move(*transport));
  };
}

namespace {

// ---------------------------------------------------------------------------------------------
// Answers

// A short printable excerpt of a body that is not the JSON we expect.
std::string excerpt(std::string_view body) {
  std::string out;
  for (char c : body.substr(0, 200)) {
    out += (c >= 0x20 && c < 0x7f) ? c : ' ';
  }
  if (body.size() > 200) out += "...";
  return out.empty() ? "empty body" : "\"" + out + "\"";
}

ErrorCode codeForGrpc(int code) {
  switch (code) {
    case 1:
      return ErrorCode::kCancelled;
    case 3:
    case 11:  // OutOfRange
      return ErrorCode::kInvalidArgument;
    case 4:
      return ErrorCode::kTimeout;
    case 5:
      return ErrorCode::kNotFound;
    case 6:
      return ErrorCode::kAlreadyExists;
    case 7:
      return ErrorCode::kPermissionDenied;
    case 8:
      return ErrorCode::kTooManyRequests;
    case 9:   // FailedPrecondition
    case 10:  // Aborted
      return ErrorCode::kConflict;
    case 14:
      return ErrorCode::kUnavailable;
    case 16:
      return ErrorCode::kUnauthenticated;
    default:
      return ErrorCode::kUnknown;
  }
}

// A non-2xx answer as an Error:
// "etcdserver: member not found (HTTP 404, code 5 from https://10.0.0.1:2379)". The gateway
// answers {"error": ..., "message": ..., "code": <gRPC code>}.
Error httpError(const kube::HttpResponse& response, const std::string& endpoint) {
  std::string text;
  int grpc = -1;
  const json body = json::parse(response.body, nullptr, false);
  if (!body.is_discarded() && body.is_object()) {
    for (const char* key : {"error", "message"}) {
      const auto it = body.find(key);
      if (it != body.end() && it->is_string() && !it->get<std::string>().empty()) {
        text = it->get<std::string>();
        break;
      }
    }
    const auto code = body.find("code");
    if (code != body.end() && code->is_number_integer()) grpc = code->get<int>();
  }
  if (text.empty()) {
    text = excerpt(response.body);
  } else {
    // One line without terminal escapes: every control character (not only line breaks)
    // becomes a space, as excerpt() does.
    std::replace_if(
        text.begin(), text.end(),
        [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }, ' ');
  }
  ErrorCode code = grpc >= 0 ? codeForGrpc(grpc) : ErrorCode::kUnknown;
  // Without a gRPC code, the HTTP status, mapped as for the Kubernetes API (one mapping).
  if (code == ErrorCode::kUnknown) code = kube::errorCodeFor(response.status);
  if (text.find("unhealthy cluster") != std::string::npos) code = ErrorCode::kUnavailable;
  if (text.find("member not found") != std::string::npos) code = ErrorCode::kNotFound;
  std::string detail = fmt::format("HTTP {}", response.status);
  if (grpc >= 0) detail += fmt::format(", code {}", grpc);
  detail += " from " + endpoint;
  return Error(text + " (" + detail + ")", code);
}

// A JSON value shown in a message: ASCII only (nlohmann's dump escapes the C0 controls but
// keeps DEL and other bytes unless asked), at most 200 bytes.
std::string shown(const json& value) {
  std::string text = kube::jsonDump(value, -1, /*ascii=*/true);
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text;
}

Result<std::uint64_t> parseId(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    std::uint64_t id = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return id;
  }
  return Error("ID: expected a decimal uint64, got " + shown(value), ErrorCode::kParse);
}

Result<std::vector<std::string>> parseStrings(const json& member, const char* key) {
  std::vector<std::string> out;
  const auto it = member.find(key);
  if (it == member.end() || it->is_null()) return out;
  if (!it->is_array()) return Error(std::string(key) + ": expected an array", ErrorCode::kParse);
  for (const auto& v : *it) {
    if (!v.is_string()) {
      return Error(std::string(key) + ": expected strings, got " + shown(v), ErrorCode::kParse);
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::vector<Member>> parseMembers(const std::string& text) {
  // A malformed ID or URL is dumped into the error, which recurses once per level
  // (kube/decode/json_depth.h).
  if (kube::jsonNestedDeeperThan(text)) {
    return Error(
        "answer is JSON nested deeper than " + std::to_string(kube::kMaxJsonDepth) + " levels",
        ErrorCode::kParse);
  }
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Error("answer is not a JSON object: " + excerpt(text), ErrorCode::kParse);
  }
  std::vector<Member> members;
  const auto list = body.find("members");
  if (list == body.end() || list->is_null()) return members;  // omitted when empty
  if (!list->is_array()) return Error("members: expected an array", ErrorCode::kParse);
  for (const auto& item : *list) {
    if (!item.is_object()) return Error("members: expected objects", ErrorCode::kParse);
    Member m;
    const auto id = item.find("ID");
    if (id == item.end()) return Error("member without ID", ErrorCode::kParse);
    auto parsed = parseId(*id);
    if (!parsed) return std::move(parsed).error().wrap("member");
    m.id = *parsed;
    const auto name = item.find("name");
    if (name != item.end() && name->is_string()) m.name = name->get<std::string>();
    auto peers = parseStrings(item, "peerURLs");
    if (!peers) return std::move(peers).error().wrap("member " + formatMemberId(m.id));
    m.peer_urls = std::move(*peers);
    auto clients = parseStrings(item, "clientURLs");
    if (!clients) return std::move(clients).error().wrap("member " + formatMemberId(m.id));
    m.client_urls = std::move(*clients);
    const auto learner = item.find("isLearner");
    if (learner != item.end() && learner->is_boolean()) m.learner = learner->get<bool>();
    members.push_back(std::move(m));
  }
  return members;
}

std::string trimSlash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// ---------------------------------------------------------------------------------------------
// The client

class GatewayClient final : public EtcdClient {
 public:
  GatewayClient(ClientOptions options, TransportFactory factory)
      : options_(std::move(options)), factory_(std::move(factory)) {
    for (auto& e : options_.endpoints) e = trimSlash(e);
  }

  Result<std::vector<Member>> listMembers() override {
    auto answer = call("/v3/cluster/member/list", "{}", /*idempotent=*/true);
    if (!answer) return std::move(answer).error().wrap("list etcd members");
    auto members = parseMembers(answer->body);
    if (!members) {
      return std::move(members).error().wrap("list etcd members via " + answer->endpoint);
    }
    return members;
  }

  Status removeMember(std::uint64_t id) override {
    const std::string body = fmt::format(R"({{"ID":"{}"}})", id);
    auto answer = call("/v3/cluster/member/remove", body, /*idempotent=*/false);
    if (!answer) return std::move(answer).error().wrap("remove etcd member " + formatMemberId(id));
    return base::ok();
  }

  Result<bool> memberHealthy(const Member& member) override {
    for (const auto& raw : member.client_urls) {
      const std::string url = trimSlash(raw);
      auto transport = transportFor(url);
      if (!transport) continue;  // a client URL we cannot even address answers nothing
      kube::HttpRequest request;
      request.method = "GET";
      request.target = "/health";
      request.timeout = options_.health_timeout;
      auto response = (*transport)->send(request);
      if (!response || response->status != 200) continue;
      const json body = json::parse(response->body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) continue;
      const auto health = body.find("health");
      if (health == body.end()) continue;
      if ((health->is_string() && health->get<std::string>() == "true") ||
          (health->is_boolean() && health->get<bool>())) {
        return true;
      }
    }
    return false;
  }

 private:
  struct Answer {
    std::string endpoint{};
    std::string body{};
  };

  Result<std::shared_ptr<kube::HttpTransport>> transportFor(const std::string& base_url) {
    std::lock_guard lock(mu_);
    auto it = transports_.find(base_url);
    if (it != transports_.end()) return it->second;
    auto made = factory_(base_url, options_);
    if (!made) return std::move(made).error();
    std::shared_ptr<kube::HttpTransport> shared(std::move(*made));
    transports_.emplace(base_url, shared);
    return shared;
  }

  // POSTs `body` to `path` on the endpoints in turn, starting with the one that answered last.
  // The next endpoint is tried after a transport failure (any, when idempotent; only one that
  // provably never reached the server, otherwise) or, when idempotent, a 5xx that is not etcd's
  // own verdict on the cluster.
  Result<Answer> call(const std::string& path, const std::string& body, bool idempotent) {
    const std::size_t n = options_.endpoints.size();
    if (n == 0) return Error("no etcd endpoints configured", ErrorCode::kInvalidArgument);
    const std::size_t first = preferred_.load() % n;
    std::string failures;
    Error last;
    std::size_t attempts = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t index = (first + i) % n;
      const std::string& endpoint = options_.endpoints[index];
      ++attempts;
      auto transport = transportFor(endpoint);
      if (!transport) {
        last = std::move(transport).error();
        failures += (failures.empty() ? "" : "; ") + endpoint + ": " + last.message();
        continue;
      }
      kube::HttpRequest request;
      request.method = "POST";
      request.target = path;
      request.headers = {{"Content-Type", "application/json"}};
      request.body = body;
      request.timeout = options_.timeout;
      auto response = (*transport)->send(request);
      if (!response) {
        last = std::move(response).error();
        failures += (failures.empty() ? "" : "; ") + last.message();
        if (idempotent || last.code() == ErrorCode::kUnavailable) continue;
        break;
      }
      if (response->status >= 200 && response->status <= 299) {
        preferred_.store(index);
        return Answer{endpoint, std::move(response->body)};
      }
      Error error = httpError(*response, endpoint);
      const bool verdict = error.code() == ErrorCode::kNotFound ||
                           error.message().find("etcdserver:") != std::string::npos;
      if (idempotent && response->status >= 500 && !verdict) {
        last = std::move(error);
        failures += (failures.empty() ? "" : "; ") + last.message();
        continue;
      }
      preferred_.store(index);
      return error;
    }
    if (attempts == 1) return last;
    return Error(fmt::format("no endpoint answered: {}", failures), last.code());
  }

  ClientOptions options_;
  TransportFactory factory_;
  std::atomic<std::size_t> preferred_{0};
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<kube::HttpTransport>> transports_;  // guarded by mu_
};

}  // namespace

std::unique_ptr<EtcdClient> makeEtcdClient(ClientOptions options, TransportFactory factory) {
  return std::make_unique<GatewayClient>(std::move(options), std::move(factory));
}

}  // namespace ekco::etcd
