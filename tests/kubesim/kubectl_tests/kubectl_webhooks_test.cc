// Mutating admission webhooks proven with the real kubectl: a small HTTPS AdmissionReview server
// in the test, registered through a MutatingWebhookConfiguration and a Service whose Endpoints
// point at it (admission_webhooks.h), then `kubectl run` / `kubectl label` / dry runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "tests/kubesim/kubectl_tests/kubectl_support.h"
#include "tests/kubesim/server/pki.h"

namespace ekco::kubesim {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// An HTTPS server answering each POST with handler(review): one connection at a time.
class TestWebhook {
 public:
  using Handler = std::function<json(const json& review)>;

  TestWebhook(const std::string& cert_file, const std::string& key_file, Handler handler)
      : ctx_(ssl::context::tls_server), acceptor_(ioc_), handler_(std::move(handler)) {
    ctx_.use_certificate_chain_file(cert_file);
    ctx_.use_private_key_file(key_file, ssl::context::pem);
    net::ip::tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { loop(); });
  }

  ~TestWebhook() {
    stopping_ = true;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
  }

  std::uint16_t port() const { return port_; }
  int calls() const { return calls_; }
  std::vector<json> reviews() const {
    std::lock_guard lock(mu_);
    return reviews_;
  }
  std::string lastTarget() const {
    std::lock_guard lock(mu_);
    return last_target_;
  }

 private:
  void loop() {
    while (!stopping_) {
      boost::system::error_code ec;
      net::ip::tcp::socket socket(ioc_);
      acceptor_.accept(socket, ec);
      if (ec || stopping_) return;
      beast::ssl_stream<net::ip::tcp::socket> stream(std::move(socket), ctx_);
      stream.handshake(ssl::stream_base::server, ec);
      if (ec) continue;  // the client refused our certificate
      beast::flat_buffer buffer;
      http::request<http::string_body> req;
      http::read(stream, buffer, req, ec);
      if (ec) continue;
      json review = json::parse(req.body(), nullptr, false);
      {
        std::lock_guard lock(mu_);
        reviews_.push_back(review);
        last_target_ = std::string(req.target());
      }
      ++calls_;
      json answer = handler_(review);
      http::response<http::string_body> res{http::status::ok, 11};
      res.set(http::field::content_type, "application/json");
      res.body() = answer.dump();
      res.prepare_payload();
      http::write(stream, res, ec);
      stream.shutdown(ec);
    }
  }

  net::io_context ioc_;
  ssl::context ctx_;
  net::ip::tcp::acceptor acceptor_;
  Handler handler_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> calls_{0};
  mutable std::mutex mu_;
  std::vector<json> reviews_;
  std::string last_target_;
};

json allow(const json& review, const json& patch = json()) {
  json response = {{"uid", review["request"]["uid"]}, {"allowed", true}};
  if (!patch.is_null()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = base64Encode(patch.dump());
  }
  return {
      {"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}};
}

// ekco's override, in miniature: image "a" becomes "registry.local/a".
json overrideImages(const json& review) {
  json ops = json::array();
  const json& containers = review["request"]["object"]["spec"]["containers"];
  for (std::size_t i = 0; i < containers.size(); ++i) {
    if (containers[i].value("image", "") == "a") {
      ops.push_back({{"op", "replace"},
                     {"path", "/spec/containers/" + std::to_string(i) + "/image"},
                     {"value", "registry.local/a"}});
    }
  }
  return allow(review, ops.empty() ? json() : ops);
}

class KubectlWebhooksTest : public testing::KubectlFixture {
 protected:
  void SetUp() override {
    KubectlFixture::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    // A CA and a serving certificate for the Service name and the loopback address.
    ASSERT_EQ(openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                       "-nodes", "-keyout", path("ca.key"), "-out", path("hook-ca.crt"), "-subj",
                       "/CN=webhook-ca", "-days", "1"}),
              0);
    ASSERT_EQ(openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                       "-nodes", "-keyout", path("other.key"), "-out", path("other-ca.crt"),
                       "-subj", "/CN=other-ca", "-days", "1"}),
              0);
    ASSERT_EQ(openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                       "-nodes", "-keyout", path("hook.key"), "-out", path("hook.csr"), "-subj",
                       "/CN=hook.web.svc"}),
              0);
    std::ofstream(dir_ / "san.ext") << "subjectAltName=DNS:hook.web.svc,IP:127.0.0.1\n";
    ASSERT_EQ(openssl({"x509", "-req", "-in", path("hook.csr"), "-CA", path("hook-ca.crt"),
                       "-CAkey", path("ca.key"), "-CAcreateserial", "-out", path("hook.crt"),
                       "-days", "1", "-extfile", path("san.ext")}),
              0);
    ServerOptions options;
    options.out_dir = dir_.string();
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  int openssl(std::vector<std::string> args) {
    args.insert(args.begin(), "openssl");
    base::ProcessRequest request{.argv = args,
                                 .inherit_env = true,
                                 .env = {},
                                 .stdin_data = "",
                                 .working_dir = dir_.string(),
                                 .timeout = std::chrono::seconds(30),
                                 .kill_grace = std::chrono::milliseconds(0)};
    auto result = runner_.run(request);
    return result ? result->exit_code : -1;
  }

  std::unique_ptr<TestWebhook> serve(TestWebhook::Handler handler) {
    return std::make_unique<TestWebhook>(path("hook.crt"), path("hook.key"), std::move(handler));
  }

  // Service web/hook (port 443 "https") and its Endpoints at 127.0.0.1:port: how a test
  // registers a webhook server's address with kubesim.
  void registerService(std::uint16_t port) {
    auto r = kubectl({"apply", "-f", "-"}, R"(
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: v1
kind: Service
metadata: {name: hook, namespace: web}
spec:
  ports: [{name: https, port: 443, targetPort: 8443}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: hook, namespace: web}
subsets:
- addresses: [{ip: 127.0.0.1}]
  ports: [{name: https, port: )" + std::to_string(port) +
                                               R"(}]
)");
    ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  }

  // A configuration with one webhook on pods CREATE/UPDATE outside kube-system.
  void configure(const std::string& failure_policy, int timeout_seconds = 10,
                 const std::string& ca_file = "hook-ca.crt", const std::string& client = "") {
    const std::string client_config =
        client.empty() ? "service: {namespace: web, name: hook, path: /mutate}" : client;
    auto r = kubectl({"apply", "-f", "-"},
                     R"(
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: images}
webhooks:
- name: images.kubesim.test
  clientConfig:
    )" + client_config + R"(
    caBundle: )" + base64Encode(readFile(dir_ / ca_file)) +
                         R"(
  rules:
  - {operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}
  namespaceSelector:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}
  failurePolicy: )" + failure_policy +
                         R"(
  sideEffects: None
  timeoutSeconds: )" + std::to_string(timeout_seconds) +
                         R"(
  admissionReviewVersions: [v1]
)");
    ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  }

  std::string image(const std::string& pod, const std::string& ns = "default") {
    return kubectl({"get", "pod", pod, "-n", ns, "-o", "jsonpath={.spec.containers[0].image}"})
        .stdout_data;
  }
};

TEST_F(KubectlWebhooksTest, KubectlRunIsMutatedByTheWebhookThroughItsService) {
  auto hook = serve(overrideImages);
  registerService(hook->port());
  configure("Fail");
  auto run = kubectl({"run", "x", "--image=a"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_data;
  EXPECT_EQ(image("x"), "registry.local/a");
  ASSERT_EQ(hook->calls(), 1);
  EXPECT_EQ(hook->lastTarget(), "/mutate?timeout=10s");
  const json review = hook->reviews()[0];
  EXPECT_EQ(review["apiVersion"], "admission.k8s.io/v1");
  const json& req = review["request"];
  EXPECT_EQ(req["uid"].get<std::string>().size(), 36u);
  EXPECT_EQ(req["kind"], json({{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}));
  EXPECT_EQ(req["resource"], json({{"group", ""}, {"version", "v1"}, {"resource", "pods"}}));
  EXPECT_EQ(req["requestKind"], req["kind"]);
  EXPECT_EQ(req["operation"], "CREATE");
  EXPECT_EQ(req["name"], "x");
  EXPECT_EQ(req["namespace"], "default");
  EXPECT_EQ(req["userInfo"]["username"], "kubernetes-admin");
  EXPECT_EQ(req["userInfo"]["groups"], json({"system:masters", "system:authenticated"}));
  EXPECT_EQ(req["dryRun"], false);
  EXPECT_EQ(req["options"]["kind"], "CreateOptions");
  EXPECT_EQ(req["object"]["spec"]["containers"][0]["image"], "a");
  // Defaulted before the webhooks, as kube-apiserver's decoder and plugins do.
  EXPECT_EQ(req["object"]["spec"]["serviceAccountName"], "default");
  EXPECT_TRUE(req["oldObject"].is_null());

  // UPDATE carries the old object; the label goes through, the image stays overridden.
  auto labeled = kubectl({"label", "pod", "x", "team=a"});
  ASSERT_EQ(labeled.exit_code, 0) << labeled.stderr_data;
  ASSERT_EQ(hook->calls(), 2);
  const json update = hook->reviews()[1]["request"];
  EXPECT_EQ(update["operation"], "UPDATE");
  EXPECT_EQ(update["options"]["kind"], "UpdateOptions");
  EXPECT_EQ(update["oldObject"]["metadata"].value("labels", json::object()).count("team"), 0u);
  EXPECT_EQ(update["object"]["metadata"]["labels"]["team"], "a");

  // kube-system is outside the namespace selector: no call, no mutation.
  auto system = kubectl({"run", "y", "--image=a", "-n", "kube-system"});
  ASSERT_EQ(system.exit_code, 0) << system.stderr_data;
  EXPECT_EQ(image("y", "kube-system"), "a");
  EXPECT_EQ(hook->calls(), 2);
}

TEST_F(KubectlWebhooksTest, ADenialIsTheWebhooksStatusAndMessage) {
  auto hook = serve([](const json& review) {
    json answer = allow(review);
    answer["response"]["allowed"] = false;
    answer["response"]["status"] = {{"code", 403}, {"message", "image a is not allowed"}};
    return answer;
  });
  registerService(hook->port());
  configure("Fail");
  auto run = kubectl({"run", "x", "--image=a"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.stderr_data, HasSubstr("admission webhook \"images.kubesim.test\" denied the "
                                         "request: image a is not allowed"));
  EXPECT_NE(kubectl({"get", "pod", "x"}).exit_code, 0);
}

TEST_F(KubectlWebhooksTest, AnUnreachableWebhookFailsClosedUnderFailAndIsSkippedUnderIgnore) {
  std::uint16_t closed_port = 0;
  {
    auto gone = serve(overrideImages);
    closed_port = gone->port();
  }
  registerService(closed_port);
  configure("Fail");
  auto run = kubectl({"run", "x", "--image=a"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.stderr_data,
              HasSubstr("Internal error occurred: failed calling webhook \"images.kubesim.test\": "
                        "failed to call webhook: Post \"https://hook.web.svc:443/"
                        "mutate?timeout=10s\": dial tcp 127.0.0.1:" +
                        std::to_string(closed_port) + ": connect: connection refused"));
  configure("Ignore");
  auto ignored = kubectl({"run", "x", "--image=a"});
  ASSERT_EQ(ignored.exit_code, 0) << ignored.stderr_data;
  EXPECT_EQ(image("x"), "a");
}

TEST_F(KubectlWebhooksTest, ASlowWebhookTimesOutAfterTimeoutSeconds) {
  auto hook = serve([](const json& review) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return overrideImages(review);
  });
  registerService(hook->port());
  configure("Fail", 1);
  const auto started = std::chrono::steady_clock::now();
  auto run = kubectl({"run", "x", "--image=a"});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.stderr_data, HasSubstr("mutate?timeout=1s\": context deadline exceeded"));
  EXPECT_LT(took, std::chrono::milliseconds(2400));
  configure("Ignore", 1);
  auto ignored = kubectl({"run", "x", "--image=a"});
  ASSERT_EQ(ignored.exit_code, 0) << ignored.stderr_data;
  EXPECT_EQ(image("x"), "a");
}

TEST_F(KubectlWebhooksTest, TheServerCertificateIsVerifiedAgainstTheCaBundle) {
  auto hook = serve(overrideImages);
  registerService(hook->port());
  configure("Fail", 10, "other-ca.crt");
  auto run = kubectl({"run", "x", "--image=a"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.stderr_data,
              HasSubstr("tls: failed to verify certificate: x509: certificate signed by unknown "
                        "authority"));
  EXPECT_EQ(hook->calls(), 0);
  // A URL client config: the name verified is the URL's host (here the IP SAN).
  configure("Fail", 10, "hook-ca.crt",
            "url: https://127.0.0.1:" + std::to_string(hook->port()) + "/by-url");
  auto by_url = kubectl({"run", "x", "--image=a"});
  ASSERT_EQ(by_url.exit_code, 0) << by_url.stderr_data;
  EXPECT_EQ(image("x"), "registry.local/a");
  EXPECT_EQ(hook->lastTarget(), "/by-url?timeout=10s");
}

TEST_F(KubectlWebhooksTest, AResponseForAnotherUidIsACallFailure) {
  auto hook = serve([](const json& review) {
    json answer = overrideImages(review);
    answer["response"]["uid"] = "not-the-request";
    return answer;
  });
  registerService(hook->port());
  configure("Fail");
  auto run = kubectl({"run", "x", "--image=a"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.stderr_data, HasSubstr("received invalid webhook response: expected "
                                         "response.uid="));
  EXPECT_THAT(run.stderr_data, HasSubstr("got \"not-the-request\""));
}

TEST_F(KubectlWebhooksTest, DryRunCallsSideEffectFreeWebhooksAndStoresNothing) {
  auto hook = serve(overrideImages);
  registerService(hook->port());
  configure("Fail");
  auto dry = kubectl(
      {"run", "x", "--image=a", "--dry-run=server", "-o", "jsonpath={.spec.containers[0].image}"});
  ASSERT_EQ(dry.exit_code, 0) << dry.stderr_data;
  EXPECT_EQ(dry.stdout_data, "registry.local/a");
  ASSERT_EQ(hook->calls(), 1);
  EXPECT_EQ(hook->reviews()[0]["request"]["dryRun"], true);
  EXPECT_NE(kubectl({"get", "pod", "x"}).exit_code, 0);
  // A configuration stored before sideEffects had to be None (seeded verbatim): a dry run is
  // refused rather than calling a webhook that may act.
  auto stored =
      server_->get("mutatingwebhookconfigurations.admissionregistration.k8s.io", "", "images");
  ASSERT_TRUE(stored);
  (*stored)["webhooks"][0]["sideEffects"] = "Unknown";
  ASSERT_TRUE(server_->put(*stored));
  auto refused = kubectl({"run", "x", "--image=a", "--dry-run=server"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.stderr_data,
              HasSubstr("admission webhook \"images.kubesim.test\" does not support dry run"));
  EXPECT_EQ(hook->calls(), 1);
}

TEST_F(KubectlWebhooksTest, InvalidConfigurationsAreRefused) {
  auto r = kubectl({"create", "-f", "-"}, R"(
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: bad}
webhooks:
- name: short
  clientConfig:
    url: http://127.0.0.1/x
    service: {namespace: web, name: hook}
  timeoutSeconds: 31
  admissionReviewVersions: [v1beta1]
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
)");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.stderr_data, HasSubstr("The MutatingWebhookConfiguration \"bad\" is invalid"));
  EXPECT_THAT(r.stderr_data,
              HasSubstr("webhooks[0].name: Invalid value: \"short\": should be a domain with at "
                        "least three segments separated by dots"));
  EXPECT_THAT(r.stderr_data, HasSubstr("webhooks[0].clientConfig: Required value: exactly one "
                                       "of url or service is required"));
  EXPECT_THAT(r.stderr_data, HasSubstr("webhooks[0].sideEffects: Required value: must specify "
                                       "one of None, NoneOnDryRun"));
  EXPECT_THAT(r.stderr_data, HasSubstr("webhooks[0].timeoutSeconds: Invalid value: 31: the "
                                       "timeout value must be between 1 and 30 seconds"));
  EXPECT_THAT(r.stderr_data, HasSubstr("webhooks[0].admissionReviewVersions: Invalid value"));
}

TEST_F(KubectlWebhooksTest, DefaultsAreFilledIn) {
  auto hook = serve(overrideImages);
  registerService(hook->port());
  auto r = kubectl({"create", "-f", "-"}, R"(
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: defaults}
webhooks:
- name: defaults.kubesim.test
  clientConfig: {service: {namespace: web, name: hook}}
  sideEffects: None
  admissionReviewVersions: [v1]
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
)");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  auto got = kubectl({"get", "mutatingwebhookconfiguration", "defaults", "-o", "json"});
  json hookcfg = json::parse(got.stdout_data)["webhooks"][0];
  EXPECT_EQ(hookcfg["failurePolicy"], "Fail");
  EXPECT_EQ(hookcfg["matchPolicy"], "Equivalent");
  EXPECT_EQ(hookcfg["timeoutSeconds"], 10);
  EXPECT_EQ(hookcfg["reinvocationPolicy"], "Never");
  EXPECT_EQ(hookcfg["clientConfig"]["service"]["port"], 443);
  EXPECT_EQ(hookcfg["rules"][0]["scope"], "*");
  EXPECT_EQ(hookcfg["namespaceSelector"], json::object());
}

}  // namespace
}  // namespace ekco::kubesim
