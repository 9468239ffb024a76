#include "kube/transport/curl_transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "base/strings.h"

namespace ekco::kube {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

void globalInit() {
  // curl_global_init is not thread-safe and must run once before any other call.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Collects the response; in streaming mode hands 2xx body chunks to the handler instead.
struct Exchange {
  explicit Exchange(base::MemoryBudget* budget = nullptr) : share(budget) {}

  HttpResponse response;
  const ChunkHandler* on_chunk = nullptr;
  const std::function<void(int)>* on_headers = nullptr;
  bool stopped_by_handler = false;
  std::size_t max_body = 0;  // collected body bound; 0 = none
  bool too_large = false;
  // The collected body's part of the transport's budget, held while it is received.
  base::BudgetShare share;
  bool over_budget = false;
};

size_t onHeader(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) {
    // The end of a header block. A 1xx block is followed by the real one.
    const int status = ex->response.status;
    if (status >= 200 && ex->on_headers != nullptr && *ex->on_headers) (*ex->on_headers)(status);
    return n;
  }
  if (line.rfind("HTTP/", 0) == 0) {
    // A new status line (after 100 Continue or a redirect): start over.
    ex->response.headers.clear();
    // "HTTP/1.1 200 OK", "HTTP/2 200": the three digits after the first space (0 when absent).
    const auto space = line.find(' ');
    int status = 0;
    if (space != std::string_view::npos) {
      const std::string_view rest = line.substr(space + 1);
      std::from_chars(rest.data(), rest.data() + rest.size(), status);
    }
    ex->response.status = status;
    // The reason phrase after the code ("Internal Server Error"); HTTP/2 has none.
    const auto space2 = space == std::string_view::npos ? space : line.find(' ', space + 1);
    ex->response.reason = space2 == std::string_view::npos
                              ? std::string()
                              : std::string(base::trimSpace(line.substr(space2 + 1)));
    return n;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  ex->response.headers[name] = std::string(value);
  return n;
}

int httpVersion(CURL* easy) {
  long version = 0;
  curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version);
  switch (version) {
    case CURL_HTTP_VERSION_1_0:
      return 10;
    case CURL_HTTP_VERSION_1_1:
      return 11;
    case CURL_HTTP_VERSION_2_0:
      return 20;
    default:
      return 0;
  }
}

size_t onBody(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t n = size * count;
  const bool ok = ex->response.status >= 200 && ex->response.status <= 299;
  if (ex->on_chunk != nullptr && ok) {
    if (!(*ex->on_chunk)(std::string_view(data, n))) {
      ex->stopped_by_handler = true;
      return 0;  // CURLE_WRITE_ERROR, recognised by stopped_by_handler
    }
    return n;
  }
  if (ex->max_body != 0 && ex->response.body.size() + n > ex->max_body) {
    ex->too_large = true;
    return 0;  // CURLE_WRITE_ERROR, recognised by too_large
  }
  if (!base::appendWithin(ex->response.body, std::string_view(data, n), ex->share)) {
    ex->over_budget = true;
    return 0;  // CURLE_WRITE_ERROR, recognised by over_budget
  }
  return n;
}

// A response body over the transport's bound: the call fails and the partial body is dropped.
Error tooLarge(const std::string& url, std::size_t max_bytes) {
  return Error("request " + url + ": the response is larger than " + base::describeBytes(max_bytes),
               ErrorCode::kIo);
}

// The bound of one collected body: the request's own when it is smaller than the transport's.
std::size_t maxBody(const HttpRequest& request, const CurlTransportOptions& options) {
  if (request.max_body_bytes == 0) return options.max_response_bytes;
  return std::min(request.max_body_bytes, options.max_response_bytes);
}

// The process's buffers are full (base/memory_budget.h): the call fails, and is retried later
// like any other broken transfer.
Error overBudget(const std::string& url, const base::MemoryBudget& budget) {
  return Error(fmt::format("request {}: {} cannot hold the response; dropped it", url,
                           base::describeBufferBudget(budget)),
               ErrorCode::kIo);
}

// The system trust for a transfer without a CA of its own (kube/transport/system_trust.h): CAINFO
// is the chosen bundle. CAPATH is cleared: Debian's libcurl also loads its built-in CA directory
// /etc/ssl/certs, which (a) on the RHEL family is a symlink to /etc/pki/tls/certs, a directory
// of bundles without OpenSSL's <hash>.0 names, so it adds nothing there; (b) on Debian and
// Ubuntu holds the certificates ca-certificates.crt holds (update-ca-certificates writes both);
// (c) would trust more than SSL_CERT_FILE names, and more than the bundle the log and
// `ekco status` report. With nothing found, libcurl keeps its built-in defaults and the
// transfer fails as it would have, its error naming the search (transferError).
void useSystemTrust(CURL* easy, const SystemTrust& trust) {
  if (trust.ca_file.empty()) return;
  curl_easy_setopt(easy, CURLOPT_CAINFO, trust.ca_file.c_str());  // copied by libcurl
  curl_easy_setopt(easy, CURLOPT_CAPATH, nullptr);
  // An https:// proxy (HTTPS_PROXY) is verified against the same bundle, not Debian's path.
  curl_easy_setopt(easy, CURLOPT_PROXY_CAINFO, trust.ca_file.c_str());
  curl_easy_setopt(easy, CURLOPT_PROXY_CAPATH, nullptr);
}

// A transfer with a CA of its own (a kubeconfig's certificate-authority-data, etcd's ca.crt)
// trusts that CA alone, as kubectl does: libcurl's OpenSSL backend loads its built-in CA file
// and directory (Debian's /etc/ssl/certs/ca-certificates.crt and /etc/ssl/certs) besides a
// CAINFO blob, which on Debian and Ubuntu hosts would let every public CA vouch for the API
// server. Both are cleared.
void useOwnCa(CURL* easy, const std::string& pem) {
  curl_blob ca{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &ca);
  curl_easy_setopt(easy, CURLOPT_CAINFO, nullptr);
  curl_easy_setopt(easy, CURLOPT_CAPATH, nullptr);
}

// The transport Error for a failed transfer (see HttpTransport for the codes). `system_trust`:
// what the transfer trusted when it had no CA of its own (null when it had one, or did not
// verify), named when the server's certificate did not verify or the bundle could not be read.
Error transferError(CURL* easy, CURLcode rc, const char* errbuf, const std::string& url,
                    const SystemTrust* system_trust) {
  std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  std::string message = "request " + url + ": " + detail;
  if (system_trust != nullptr &&
      (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE)) {
    message += " (system CA bundle: " + describeSystemTrust(*system_trust) + ")";
  }
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
      return Error(std::move(message), ErrorCode::kUnavailable);
    case CURLE_OPERATION_TIMEDOUT: {
      // No transfer started: the connect (or TLS handshake) timed out, nothing was sent.
      curl_off_t pretransfer = 0;
      curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
      return Error(std::move(message),
                   pretransfer == 0 ? ErrorCode::kUnavailable : ErrorCode::kTimeout);
    }
    default:
      return Error(std::move(message), ErrorCode::kIo);
  }
}

// "https://host:port/..." → host ("[::1]" kept bracketed) and port.
bool splitServer(const std::string& server, std::string& scheme, std::string& host,
                 std::string& port) {
  const auto sep = server.find("://");
  if (sep == std::string::npos) return false;
  scheme = server.substr(0, sep);
  std::string rest = server.substr(sep + 3);
  rest = rest.substr(0, rest.find('/'));
  std::string::size_type port_colon = std::string::npos;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) return false;
    if (close + 1 < rest.size() && rest[close + 1] == ':') port_colon = close + 1;
  } else {
    port_colon = rest.find(':');
  }
  host = rest.substr(0, port_colon);
  port = port_colon == std::string::npos ? (scheme == "https" ? "443" : "80")
                                         : rest.substr(port_colon + 1);
  return !host.empty() && !port.empty();
}

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

Slist requestHeaders(const HttpRequest& request, const std::string& token) {
  Slist headers;
  auto add = [&headers](const std::string& line) {
    curl_slist* next = curl_slist_append(headers.get(), line.c_str());
    if (next != nullptr) {
      (void)headers.release();  // curl_slist_append returned the same list, now longer
      headers.reset(next);
    }
  };
  for (const auto& [name, value] : request.headers) add(name + ": " + value);
  add("Expect:");  // no "100-continue" round trip before bodies
  if (!token.empty()) add("Authorization: Bearer " + token);
  return headers;
}

Slist connectTo(const std::string& entry) {
  return Slist(entry.empty() ? nullptr : curl_slist_append(nullptr, entry.c_str()));
}

}  // namespace

Result<std::unique_ptr<CurlTransport>> CurlTransport::create(Connection connection,
                                                             const hostfs::HostFs* token_fs,
                                                             const base::Clock& clock,
                                                             CurlTransportOptions options) {
  globalInit();
  if (!options.system_trust) options.system_trust = processSystemTrust();
  Target target;
  std::string scheme, host, port;
  if (!splitServer(connection.server, scheme, host, port)) {
    return Error("kube transport: server \"" + connection.server + "\" is not a URL",
                 ErrorCode::kInvalidArgument);
  }
  if (!connection.token_file.empty() && token_fs == nullptr) {
    return Error("kube transport: token_file set without a filesystem to read it",
                 ErrorCode::kInvalidArgument);
  }
  if (connection.tls_server_name.empty()) {
    target.url_prefix = connection.server;
  } else {
    target.url_prefix = scheme + "://" + connection.tls_server_name + ":" + port;
    target.connect_to = connection.tls_server_name + ":" + port + ":" + host + ":" + port;
  }
  return std::unique_ptr<CurlTransport>(
      new CurlTransport(std::move(connection), std::move(target), token_fs, clock, options));
}

CurlTransport::CurlTransport(Connection connection, Target target, const hostfs::HostFs* token_fs,
                             const base::Clock& clock, CurlTransportOptions options)
    : connection_(std::move(connection)),
      target_(std::move(target)),
      options_(std::move(options)),
      budget_(options_.budget != nullptr ? options_.budget : &base::processBufferBudget()),
      token_(connection_.token, connection_.token_file, token_fs, clock,
             connection_.token_refresh) {}

CurlTransport::~CurlTransport() {
  for (void* handle : idle_) curl_easy_cleanup(static_cast<CURL*>(handle));
}

void* CurlTransport::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      void* handle = idle_.back();
      idle_.pop_back();
      return handle;
    }
  }
  return curl_easy_init();
}

void CurlTransport::release(void* handle) {
  {
    std::lock_guard lock(mu_);
    if (idle_.size() < options_.max_idle_handles) {
      idle_.push_back(handle);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

namespace {

// What a connection trusts when it has no CA of its own; null when it has one or is insecure.
const SystemTrust* systemTrustFor(const Connection& conn, const CurlTransportOptions& options) {
  if (conn.insecure_skip_tls_verify || !conn.ca_pem.empty()) return nullptr;
  return &*options.system_trust;  // set by create()
}

// Sets every option of one exchange on a (reset) easy handle. `headers` must outlive the call.
// `system_trust`: systemTrustFor(conn).
void configure(CURL* easy, const Connection& conn, const std::string& url,
               curl_slist* connect_to_list, const HttpRequest& request, curl_slist* headers,
               Exchange* exchange, char* errbuf, std::chrono::milliseconds connect_timeout,
               const std::string& user_agent, const SystemTrust* system_trust) {
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");  // every encoding curl supports (gzip)
  curl_easy_setopt(easy, CURLOPT_USERAGENT, user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(connect_timeout, request.timeout).count()));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  if (request.idle_timeout.count() > 0) {
    // libcurl's low-speed check: below 1 byte/s for this many seconds ends the transfer with
    // CURLE_OPERATION_TIMEDOUT. It also covers the wait for the response's headers.
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(
        easy, CURLOPT_LOW_SPEED_TIME,
        static_cast<long>(std::max<std::int64_t>(
            1, std::chrono::ceil<std::chrono::seconds>(request.idle_timeout).count())));
  }
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, onHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, exchange);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, onBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, exchange);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  if (connect_to_list != nullptr) curl_easy_setopt(easy, CURLOPT_CONNECT_TO, connect_to_list);

  // TLS. The blobs are copied by libcurl.
  if (conn.insecure_skip_tls_verify) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (!conn.ca_pem.empty()) {
    useOwnCa(easy, conn.ca_pem);
  } else if (system_trust != nullptr) {
    useSystemTrust(easy, *system_trust);
  }
  if (!conn.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(conn.client_cert_pem.data()), conn.client_cert_pem.size(),
                   CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(conn.client_key_pem.data()), conn.client_key_pem.size(),
                  CURL_BLOB_COPY};
    curl_easy_setopt(easy, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(easy, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
  }

  // Method and body. POSTFIELDS is not copied: the request outlives the transfer.
  if (request.method == "GET") {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
        request.method == "PATCH") {
      curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
    }
  }
}

}  // namespace

Result<HttpResponse> CurlTransport::send(const HttpRequest& request) {
  CURL* easy = static_cast<CURL*>(acquire());
  if (easy == nullptr) return Error("kube transport: curl_easy_init failed", ErrorCode::kIo);
  curl_easy_reset(easy);

  const std::string url = target_.url_prefix + request.target;
  Slist headers = requestHeaders(request, token_.current());
  Slist connect_to = connectTo(target_.connect_to);

  Exchange exchange(budget_);
  exchange.max_body = maxBody(request, options_);
  char errbuf[CURL_ERROR_SIZE] = {0};
  const SystemTrust* system_trust = systemTrustFor(connection_, options_);
  configure(easy, connection_, url, connect_to.get(), request, headers.get(), &exchange, errbuf,
            options_.connect_timeout, options_.user_agent, system_trust);
  const CURLcode rc = curl_easy_perform(easy);
  long connects = 0;
  curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
  connections_opened_ += static_cast<std::uint64_t>(std::max(0L, connects));
  exchange.response.http_version = httpVersion(easy);
  Result<HttpResponse> result =
      rc == CURLE_OK ? Result<HttpResponse>(std::move(exchange.response))
                     : Result<HttpResponse>(transferError(easy, rc, errbuf, url, system_trust));
  if (exchange.too_large) result = tooLarge(url, exchange.max_body);
  if (exchange.over_budget) result = overBudget(url, *budget_);
  // The options point at this call's buffers; clear them before the handle is reused.
  curl_easy_reset(easy);
  release(easy);
  return result;
}

Result<HttpResponse> CurlTransport::stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                           CancelToken& cancel) {
  struct EasyDeleter {
    void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
  };
  struct MultiDeleter {
    void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
  };
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  std::unique_ptr<CURLM, MultiDeleter> multi(curl_multi_init());
  if (!easy || !multi) return Error("kube transport: curl init failed", ErrorCode::kIo);

  const std::string url = target_.url_prefix + request.target;
  Slist headers = requestHeaders(request, token_.current());
  Slist connect_to = connectTo(target_.connect_to);

  Exchange exchange(budget_);
  exchange.on_chunk = &on_chunk;
  exchange.max_body = maxBody(request, options_);
  exchange.on_headers = &request.on_headers;
  char errbuf[CURL_ERROR_SIZE] = {0};
  const SystemTrust* system_trust = systemTrustFor(connection_, options_);
  configure(easy.get(), connection_, url, connect_to.get(), request, headers.get(), &exchange,
            errbuf, options_.connect_timeout, options_.user_agent, system_trust);
  curl_multi_add_handle(multi.get(), easy.get());
  CURLM* raw_multi = multi.get();
  cancel.setWaker([raw_multi] { curl_multi_wakeup(raw_multi); });

  CURLcode rc = CURLE_OK;
  bool cancelled = false;
  int running = 1;
  while (running > 0) {
    if (cancel.cancelled()) {
      cancelled = true;
      break;
    }
    if (curl_multi_perform(raw_multi, &running) != CURLM_OK) break;
    if (running == 0) break;
    // curl enforces request.timeout itself; the poll only bounds how long we sleep.
    curl_multi_poll(raw_multi, nullptr, 0, 1000, nullptr);
  }
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(raw_multi, &queued)) {
    if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
  }
  cancel.setWaker({});
  long connects = 0;
  curl_easy_getinfo(easy.get(), CURLINFO_NUM_CONNECTS, &connects);
  connections_opened_ += static_cast<std::uint64_t>(std::max(0L, connects));
  exchange.response.http_version = httpVersion(easy.get());
  curl_multi_remove_handle(raw_multi, easy.get());

  if (cancelled) return Error("request " + url + ": cancelled", ErrorCode::kCancelled);
  if (exchange.too_large) return tooLarge(url, exchange.max_body);
  if (exchange.over_budget) return overBudget(url, *budget_);
  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && exchange.stopped_by_handler)) {
    return std::move(exchange.response);
  }
  if (rc == CURLE_OPERATION_TIMEDOUT && request.idle_timeout.count() > 0 &&
      std::string_view(errbuf).find("too slow") != std::string_view::npos) {
    return Error(
        "request " + url + ": no data for " +
            std::to_string(std::chrono::ceil<std::chrono::seconds>(request.idle_timeout).count()) +
            " s (a silent stream)",
        ErrorCode::kTimeout);
  }
  return transferError(easy.get(), rc, errbuf, url, system_trust);
}

// ---------------------------------------------------------------------------------------------
// fetchUrl

namespace {

bool hasScheme(std::string_view url, std::string_view scheme) {
  return url.size() >= scheme.size() && base::asciiLower(url.substr(0, scheme.size())) == scheme;
}

// Why `url` may not be fetched next ("" when it may). `on_tls`: an earlier hop was https.
std::string refusal(std::string_view url, bool allow_http, bool on_tls) {
  if (on_tls && !hasScheme(url, "https://")) {
    return "refusing to leave https for plain http (a downgrade)";
  }
  return urlProblem(url, allow_http);
}

bool isRedirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// One hop: the request to `url` without following redirects. `location` gets the absolute URL
// a 3xx points at (libcurl resolves a relative Location), "" when none.
Result<HttpResponse> fetchOnce(const UrlFetchRequest& request, const std::string& url,
                               std::chrono::milliseconds timeout, std::string& location) {
  struct EasyDeleter {
    void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
  };
  std::unique_ptr<CURL, EasyDeleter> owned(curl_easy_init());
  if (!owned) return Error("fetch " + url + ": curl_easy_init failed", ErrorCode::kIo);
  CURL* easy = owned.get();
  Exchange exchange;
  exchange.max_body = request.max_body_bytes;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, request.allow_http ? "https,http" : "https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, request.user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(request.connect_timeout, timeout).count()));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, onHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, onBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &exchange);
  const SystemTrust* system_trust = nullptr;
  if (!request.ca_pem.empty()) {
    useOwnCa(easy, request.ca_pem);
  } else {
    system_trust = request.system_trust ? &*request.system_trust : &processSystemTrust();
    useSystemTrust(easy, *system_trust);
  }
  if (request.head) {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE,
                     static_cast<curl_off_t>(request.max_body_bytes));
  }
  const CURLcode rc = curl_easy_perform(easy);
  if (exchange.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
    return Error(
        fmt::format("fetch {}: the response is larger than {} bytes", url, request.max_body_bytes),
        ErrorCode::kInvalidArgument);
  }
  if (rc != CURLE_OK) return transferError(easy, rc, errbuf, url, system_trust);
  exchange.response.http_version = httpVersion(easy);
  char* redirect = nullptr;
  curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &redirect);
  location = redirect != nullptr ? redirect : "";
  return std::move(exchange.response);
}

}  // namespace

Result<HttpResponse> fetchUrl(const UrlFetchRequest& request, const base::Clock& clock) {
  globalInit();
  const base::MonoTime deadline = clock.monoNow() + request.timeout;
  std::string url = request.url;
  bool on_tls = false;
  for (int hop = 0;; ++hop) {
    if (std::string why = refusal(url, request.allow_http, on_tls); !why.empty()) {
      return Error(hop == 0 ? fmt::format("fetch {}: {}", base::quoteForMessage(url), why)
                            : fmt::format("fetch {}: redirected to {}: {}", request.url,
                                          base::quoteForMessage(url), why),
                   ErrorCode::kInvalidArgument);
    }
    on_tls = on_tls || hasScheme(url, "https://");
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.monoNow());
    if (left.count() <= 0) {
      return Error(
          fmt::format("fetch {}: timed out after {} ms", request.url, request.timeout.count()),
          ErrorCode::kTimeout);
    }
    std::string location;
    auto response = fetchOnce(request, url, left, location);
    if (!response || !isRedirect(response->status) || location.empty()) return response;
    if (hop >= request.max_redirects) {
      return Error(
          fmt::format("fetch {}: more than {} redirects", request.url, request.max_redirects),
          ErrorCode::kInvalidArgument);
    }
    url = std::move(location);
  }
}

std::string urlProblem(std::string_view url, bool allow_http, std::string_view http_opt_in) {
  for (const char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return "a URL has no whitespace or control characters";
  }
  const bool https = hasScheme(url, "https://");
  if (!https && !hasScheme(url, "http://")) return "want an http:// or https:// URL";
  struct UrlDeleter {
    void operator()(CURLU* u) const { curl_url_cleanup(u); }
  };
  std::unique_ptr<CURLU, UrlDeleter> parsed(curl_url());
  if (!parsed) return "cannot parse the URL (out of memory)";
  const std::string text(url);
  if (const CURLUcode rc = curl_url_set(parsed.get(), CURLUPART_URL, text.c_str(), 0);
      rc != CURLUE_OK) {
    if (rc == CURLUE_NO_HOST) return "the URL has no host";
    return std::string("not a valid URL: ") + curl_url_strerror(rc);
  }
  char* host = nullptr;
  const bool has_host = curl_url_get(parsed.get(), CURLUPART_HOST, &host, 0) == CURLUE_OK &&
                        host != nullptr && host[0] != '\0';
  curl_free(host);
  if (!has_host) return "the URL has no host";
  if (!https && !allow_http) {
    std::string why = "plain http:// is not allowed (no TLS: nothing fetched over it is verified)";
    if (!http_opt_in.empty()) why += "; use https://, or " + std::string(http_opt_in);
    return why;
  }
  return "";
}

std::string curlVersion() { return curl_version_info(CURLVERSION_NOW)->version; }

}  // namespace ekco::kube
