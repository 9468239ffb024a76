// kube::fetchUrl (the URL fetch of `ekco upgrade`) against the real OpenSSL: `openssl s_server
// -HTTP` serves files that hold whole HTTP responses (redirects included) over TLS with a
// certificate made here; the system CA bundle both libcurl paths (fetchUrl, CurlTransport) trust
// without a CA of their own; and kube::urlProblem, the one rule config, command and fetch share.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/os/process.h"
#include "hostfs/local_host_fs.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/system_trust.h"
#include "tests/agent/process_support.h"
#include "tests/kube/temp_root.h"

namespace ekco::kube {
namespace {

using ::testing::HasSubstr;
namespace proc = agent::testing;

// An HTTPS file server on 127.0.0.1: each file `name` in dir() is the whole response to
// "GET /name".
class TlsFileServer {
 public:
  TlsFileServer() {
    const std::string d = dir();
    base::SystemClock clock;
    base::BoostProcessRunner runner(clock);
    auto made = runner.run(base::ProcessRequest{
        .argv = {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-subj", "/CN=ekco-test",
                 "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"},
        .working_dir = d});
    EXPECT_TRUE(made && made->success())
        << "openssl req failed: " << (made ? made->stderr_data : made.error().message());
    ca_pem_ = proc::readWholeFile(d + "/cert.pem");
    pid_ = proc::spawnLogged({"/bin/sh", "-c",
                              "cd '" + d +
                                  "' && exec openssl s_server -accept 127.0.0.1:0 -cert "
                                  "cert.pem -key key.pem -HTTP"},
                             d + "/server.log");
    const std::regex accept("ACCEPT 127\\.0\\.0\\.1:([0-9]+)");
    EXPECT_TRUE(proc::eventually(
        [&] {
          std::smatch m;
          const std::string log = proc::readWholeFile(d + "/server.log");
          if (!std::regex_search(log, m, accept)) return false;
          port_ = std::stoi(m[1].str());
          return true;
        },
        std::chrono::seconds(10)))
        << proc::readWholeFile(d + "/server.log");
  }
  ~TlsFileServer() { proc::killAndReap(pid_); }
  TlsFileServer(const TlsFileServer&) = delete;
  TlsFileServer& operator=(const TlsFileServer&) = delete;

  std::string dir() const { return root_.dir(); }
  std::string url(const std::string& name) const {
    return "https://127.0.0.1:" + std::to_string(port_) + "/" + name;
  }
  const std::string& caPem() const { return ca_pem_; }
  void serve(const std::string& name, const std::string& response) const {
    std::ofstream(dir() + "/" + name, std::ios::binary) << response;
  }
  void redirect(const std::string& name, const std::string& location) const {
    serve(name, "HTTP/1.0 302 Found\r\nLocation: " + location + "\r\n\r\n");
  }

 private:
  testing::TempRoot root_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string ca_pem_;
};

class UrlFetch : public ::testing::Test {
 protected:
  UrlFetchRequest get(const std::string& url) const {
    return UrlFetchRequest{
        .url = url, .timeout = std::chrono::seconds(10), .ca_pem = server_.caPem()};
  }

  TlsFileServer server_;
  base::SystemClock clock_;
};

TEST_F(UrlFetch, FollowsRedirectsThatStayOnHttps) {
  server_.serve("installer", "HTTP/1.0 200 OK\r\nX-Kurl-Hash: abc\r\n\r\necho hello\n");
  server_.redirect("hop", "/installer");          // relative
  server_.redirect("start", server_.url("hop"));  // absolute
  auto r = fetchUrl(get(server_.url("start")), clock_);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->reason, "OK");
  EXPECT_EQ(r->header("x-kurl-hash"), "abc");
  EXPECT_EQ(r->body, "echo hello\n");
}

TEST_F(UrlFetch, RefusesARedirectFromHttpsToHttpEvenWhenHttpIsAllowed) {
  server_.redirect("start", "http://127.0.0.1:9/installer");
  for (const bool allow_http : {false, true}) {
    UrlFetchRequest request = get(server_.url("start"));
    request.allow_http = allow_http;
    auto r = fetchUrl(request, clock_);
    ASSERT_FALSE(r) << "allow_http=" << allow_http;
    EXPECT_EQ(r.error().code(), base::ErrorCode::kInvalidArgument);
    EXPECT_THAT(r.error().message(), HasSubstr("redirected to \"http://127.0.0.1:9/installer\""));
    EXPECT_THAT(r.error().message(), HasSubstr("refusing to leave https"));
  }
}

TEST_F(UrlFetch, BoundsRedirectsAndTheBody) {
  server_.redirect("loop", "/loop");
  auto looped = fetchUrl(get(server_.url("loop")), clock_);
  ASSERT_FALSE(looped);
  EXPECT_THAT(looped.error().message(), HasSubstr("more than 10 redirects"));

  server_.serve("big", "HTTP/1.0 200 OK\r\n\r\n" + std::string(5000, 'x'));
  UrlFetchRequest request = get(server_.url("big"));
  request.max_body_bytes = 1000;
  auto big = fetchUrl(request, clock_);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code(), base::ErrorCode::kInvalidArgument);
  EXPECT_THAT(big.error().message(), HasSubstr("larger than 1000 bytes"));
  request.max_body_bytes = 5000;
  auto fits = fetchUrl(request, clock_);
  ASSERT_TRUE(fits) << fits.error().message();
  EXPECT_EQ(fits->body.size(), 5000u);
}

TEST_F(UrlFetch, VerifiesTheServerCertificate) {
  server_.serve("installer", "HTTP/1.0 200 OK\r\n\r\nx");
  UrlFetchRequest request = get(server_.url("installer"));
  request.ca_pem.clear();  // the system trust store does not know the test CA
  auto r = fetchUrl(request, clock_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kUnavailable);
}

// The system trust as this process would choose it with SSL_CERT_FILE=`file` (the real probe
// over the real filesystem).
SystemTrust trustWithSslCertFile(const std::string& file) {
  base::SystemClock clock;
  auto root = hostfs::LocalHostFs::open("/", clock);
  EXPECT_TRUE(root) << root.error().message();
  return chooseSystemTrust({{"SSL_CERT_FILE", file}}, bundleProbe(**root));
}

// Without ca_pem a fetch trusts the chosen system bundle, CURLOPT_CAINFO, not libcurl's built-in
// Debian path: the process's choice does not know the test CA, SSL_CERT_FILE naming the CA's
// file does.
TEST_F(UrlFetch, WithoutACaTheChosenSystemBundleVerifiesTheServer) {
  server_.serve("installer", "HTTP/1.0 200 OK\r\n\r\nx");
  UrlFetchRequest request = get(server_.url("installer"));
  request.ca_pem.clear();
  auto by_default = fetchUrl(request, clock_);
  ASSERT_FALSE(by_default);
  EXPECT_EQ(by_default.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_THAT(by_default.error().message(),
              HasSubstr("(system CA bundle: " + describeSystemTrust(processSystemTrust()) + ")"));

  request.system_trust = trustWithSslCertFile(server_.dir() + "/cert.pem");
  ASSERT_EQ(request.system_trust->problem, "");
  auto trusted = fetchUrl(request, clock_);
  ASSERT_TRUE(trusted) << trusted.error().message();
  EXPECT_EQ(trusted->body, "x");

  // An explicit CA is unaffected by the system trust, however broken.
  UrlFetchRequest explicit_ca = get(server_.url("installer"));
  explicit_ca.system_trust = trustWithSslCertFile(server_.dir() + "/missing.pem");
  auto pinned = fetchUrl(explicit_ca, clock_);
  ASSERT_TRUE(pinned) << pinned.error().message();
}

// An SSL_CERT_FILE that cannot be read is used anyway: the fetch fails naming it, even with
// another bundle on the machine; and a bundle without the server's CA is named when
// verification fails.
TEST_F(UrlFetch, AnUnusableOrWrongSystemBundleFailsNamingIt) {
  server_.serve("installer", "HTTP/1.0 200 OK\r\n\r\nx");
  UrlFetchRequest request = get(server_.url("installer"));
  request.ca_pem.clear();
  const std::string missing = server_.dir() + "/missing.pem";
  request.system_trust = trustWithSslCertFile(missing);
  auto unreadable = fetchUrl(request, clock_);
  ASSERT_FALSE(unreadable);
  EXPECT_EQ(unreadable.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_THAT(unreadable.error().message(),
              HasSubstr("error setting certificate file: " + missing));
  EXPECT_THAT(unreadable.error().message(), HasSubstr("(system CA bundle: " + missing +
                                                      " (SSL_CERT_FILE; SSL_CERT_FILE is not "
                                                      "usable: read " +
                                                      missing + ": "));

  // Another CA's certificate as the bundle.
  base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  auto made = runner.run(
      base::ProcessRequest{.argv = {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", "other-key.pem",
                                    "-out", "other.pem", "-subj", "/CN=other", "-days", "1"},
                           .working_dir = server_.dir()});
  ASSERT_TRUE(made && made->success());
  request.system_trust = trustWithSslCertFile(server_.dir() + "/other.pem");
  auto untrusted = fetchUrl(request, clock_);
  ASSERT_FALSE(untrusted);
  EXPECT_EQ(untrusted.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_THAT(untrusted.error().message(),
              HasSubstr("(system CA bundle: " + server_.dir() + "/other.pem (SSL_CERT_FILE))"));
}

// The API transport (CurlTransport) trusts the same way when a Connection has no CA: a
// kubeconfig without certificate-authority.
TEST_F(UrlFetch, AConnectionWithoutACaTrustsTheChosenSystemBundle) {
  server_.serve("version", "HTTP/1.0 200 OK\r\n\r\n{}");
  const std::string server = server_.url("");
  Connection connection{.server = server.substr(0, server.size() - 1)};  // no trailing slash
  const HttpRequest get_version{.method = "GET", .target = "/version"};

  auto by_default = CurlTransport::create(connection, nullptr, clock_);
  ASSERT_TRUE(by_default) << by_default.error().message();
  auto refused = (*by_default)->send(get_version);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), base::ErrorCode::kUnavailable);

  auto trusting = CurlTransport::create(
      connection, nullptr, clock_,
      CurlTransportOptions{.system_trust = trustWithSslCertFile(server_.dir() + "/cert.pem")});
  ASSERT_TRUE(trusting) << trusting.error().message();
  auto answered = (*trusting)->send(get_version);
  ASSERT_TRUE(answered) << answered.error().message();
  EXPECT_EQ(answered->status, 200);
  EXPECT_EQ(answered->body, "{}");
}

TEST_F(UrlFetch, AnHttpStatusIsAValue) {
  server_.serve("gone", "HTTP/1.0 500 Internal Server Error\r\n\r\noops");
  auto r = fetchUrl(get(server_.url("gone")), clock_);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->reason, "Internal Server Error");
}

TEST(UrlFetchPolicy, PlainHttpIsRefusedBeforeAnythingIsSentUnlessAllowed) {
  base::SystemClock clock;
  // Nothing listens on port 9: a refusal, not a connection error, proves nothing was tried.
  auto r = fetchUrl(UrlFetchRequest{.url = "http://127.0.0.1:9/installer"}, clock);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message(), HasSubstr("plain http:// is not allowed"));
  auto allowed =
      fetchUrl(UrlFetchRequest{.url = "http://127.0.0.1:9/installer", .allow_http = true}, clock);
  ASSERT_FALSE(allowed);
  EXPECT_EQ(allowed.error().code(), base::ErrorCode::kUnavailable);  // connection refused
}

TEST(UrlFetchPolicy, UrlProblemIsOneRule) {
  struct Case {
    std::string url;
    bool allow_http;
    std::string want;  // "" = accepted, else a substring of the problem
  };
  const Case cases[] = {
      {"https://k8s.kurl.sh/latest", false, ""},
      {"HTTPS://K8S.KURL.SH/latest", false, ""},
      {"https://[::1]:8443/x?y=z", false, ""},
      {"http://mirror.local/install.sh", true, ""},
      {"http://mirror.local/install.sh", false, "plain http:// is not allowed"},
      {"http://", true, "no host"},
      {"https://", false, "no host"},
      {"https://a b/", false, "whitespace or control characters"},
      {"https://a/\nok", false, "whitespace or control characters"},
      {"https://a/\x1b[2J", false, "whitespace or control characters"},
      {"ftp://example.com/x", true, "want an http:// or https:// URL"},
      {"example.com/x", true, "want an http:// or https:// URL"},
      {"", true, "want an http:// or https:// URL"},
  };
  // The caller's opt-in is named only when plain http is the one problem.
  EXPECT_EQ(urlProblem("http://mirror.local/x", false, "set allow_http"),
            "plain http:// is not allowed (no TLS: nothing fetched over it is verified); use "
            "https://, or set allow_http");
  EXPECT_EQ(urlProblem("http://", false, "set allow_http"), "the URL has no host");
  for (const Case& c : cases) {
    const std::string got = urlProblem(c.url, c.allow_http);
    if (c.want.empty()) {
      EXPECT_EQ(got, "") << c.url;
    } else {
      EXPECT_THAT(got, HasSubstr(c.want)) << c.url;
    }
  }
}

}  // namespace
}  // namespace ekco::kube
