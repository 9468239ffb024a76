// kubesim's admission proven with the real kubectl: validation (422 with the server's message),
// namespace lifecycle, server-side dry run and diff, defaulting, pod immutability, Secrets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/clock.h"
#include "base/os/process.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKubectl = "/usr/bin/kubectl";

class KubectlValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << kKubectl << " is not installed";
    std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-kv-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ServerOptions options;
    options.out_dir = dir_.string();
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Writes `yaml` to a file in the test directory and returns its path.
  std::string file(const std::string& name, const std::string& yaml) {
    std::filesystem::path path = dir_ / name;
    std::ofstream(path) << yaml;
    return path.string();
  }

  base::ProcessResult kubectl(std::vector<std::string> args) {
    std::vector<std::string> argv = {kKubectl, "--kubeconfig", server_->kubeconfigPath(),
                                     "--cache-dir", (dir_ / "cache").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    base::ProcessRequest request{.argv = argv,
                                 .inherit_env = true,
                                 .env = {{"HOME", dir_.string()}, {"KUBECONFIG", ""}},
                                 .stdin_data = "",
                                 .working_dir = "",
                                 .timeout = std::chrono::seconds(30),
                                 .kill_grace = std::chrono::milliseconds(0)};
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }

  json getJson(std::vector<std::string> args) {
    args.insert(args.begin(), "get");
    args.push_back("-o");
    args.push_back("json");
    auto r = kubectl(args);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
    return r.exit_code == 0 ? json::parse(r.stdout_data) : json();
  }

  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::filesystem::path dir_;
  std::unique_ptr<Server> server_;
};

constexpr const char* kConfigMap = R"(apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {a: b}
)";

TEST_F(KubectlValidationTest, InvalidNamesAre422WithTheServersMessage) {
  auto r = kubectl({"create", "-f", file("bad.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: Bad_Name}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("The ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: "
                        "\"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case "
                        "alphanumeric characters"));
  r = kubectl({"create", "-f", file("svc.yaml", R"(apiVersion: v1
kind: Service
metadata: {name: 1svc}
spec: {ports: [{port: 80}]}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("The Service \"1svc\" is invalid: metadata.name: Invalid "
                                       "value: \"1svc\": a DNS-1035 label must consist"));
  r = kubectl({"patch", "namespace", "default", "--type=merge", "-p",
               R"({"metadata":{"labels":{"bad key":"v"}}})"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("The Namespace \"default\" is invalid: metadata.labels: "
                                       "Invalid value: \"bad key\": name part must consist"));
}

TEST_F(KubectlValidationTest, DefaultNamespacesExistAndMissingOnesAre404) {
  auto r = kubectl({"get", "namespaces", "-o", "name"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    EXPECT_THAT(r.stdout_data, HasSubstr(std::string("namespace/") + ns));
  }
  r = kubectl({"create", "-n", "nope", "-f", file("cm.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("Error from server (NotFound): error when creating"));
  EXPECT_THAT(r.stderr_data, HasSubstr("namespaces \"nope\" not found"));
  r = kubectl({"delete", "namespace", "kube-system"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("namespaces \"kube-system\" is forbidden: this namespace "
                                       "may not be deleted"));
}

TEST_F(KubectlValidationTest, DeletingANamespaceTerminatesItRefusesContentAndRemovesIt) {
  auto r = kubectl({"apply", "-f", file("ns.yaml", R"(apiVersion: v1
kind: Namespace
metadata: {name: doomed}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: held, namespace: doomed, finalizers: [example.com/hold]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: free, namespace: doomed}
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  json ns = getJson({"namespace", "doomed"});
  EXPECT_EQ(ns["status"]["phase"], "Active");
  EXPECT_EQ(ns["spec"]["finalizers"], json({"kubernetes"}));
  EXPECT_EQ(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "doomed");

  r = kubectl({"delete", "namespace", "doomed", "--wait=false"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  server_->runKubelet();
  ns = getJson({"namespace", "doomed"});
  EXPECT_EQ(ns["status"]["phase"], "Terminating");
  EXPECT_TRUE(ns["metadata"].contains("deletionTimestamp"));
  EXPECT_FALSE(server_->get("configmaps", "doomed", "free"));  // removed by the controller

  r = kubectl({"create", "-n", "doomed", "-f", file("cm.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: late}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("Error from server (Forbidden): error when creating"));
  EXPECT_THAT(r.stderr_data,
              HasSubstr("configmaps \"late\" is forbidden: unable to create new content in "
                        "namespace doomed because it is being terminated"));

  // No new finalizer on an object being deleted.
  r = kubectl({"patch", "-n", "doomed", "configmap", "held", "--type=json", "-p",
               R"([{"op":"add","path":"/metadata/finalizers/-","value":"example.com/more"}])"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("metadata.finalizers: Forbidden: no new finalizers can be added if the "
                        "object is being deleted"));

  r = kubectl({"patch", "-n", "doomed", "configmap", "held", "--type=merge", "-p",
               R"({"metadata":{"finalizers":null}})"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  r = kubectl({"wait", "--for=delete", "namespace/doomed", "--timeout=10s"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_FALSE(server_->get("namespaces", "", "doomed"));
}

TEST_F(KubectlValidationTest, ServerDryRunValidatesAndStoresNothing) {
  std::string cm = file("cm.yaml", kConfigMap);
  std::uint64_t rv = server_->store().resourceVersion();
  auto r = kubectl({"apply", "--dry-run=server", "-f", cm, "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(json::parse(r.stdout_data)["data"]["a"], "b");
  EXPECT_EQ(server_->store().resourceVersion(), rv);
  EXPECT_FALSE(server_->get("configmaps", "default", "settings"));

  r = kubectl({"create", "--dry-run=server", "-f", file("bad.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: Bad_Name, namespace: default}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("is invalid: metadata.name"));

  ASSERT_EQ(kubectl({"apply", "-f", cm}).exit_code, 0);
  rv = server_->store().resourceVersion();
  r = kubectl({"delete", "configmap", "settings", "--dry-run=server"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("(server dry run)"));
  EXPECT_TRUE(server_->get("configmaps", "default", "settings"));
  EXPECT_EQ(server_->store().resourceVersion(), rv);
}

TEST_F(KubectlValidationTest, DiffShowsTheServersDryRunOfTheChange) {
  std::string cm = file("cm.yaml", kConfigMap);
  ASSERT_EQ(kubectl({"apply", "-f", cm}).exit_code, 0);
  auto r = kubectl({"diff", "-f", cm});
  EXPECT_EQ(r.exit_code, 0) << r.stdout_data << r.stderr_data;  // no difference
  std::uint64_t rv = server_->store().resourceVersion();
  std::string changed = file("cm2.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {a: c}
)");
  r = kubectl({"diff", "-f", changed});
  EXPECT_EQ(r.exit_code, 1) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("-  a: b"));
  EXPECT_THAT(r.stdout_data, HasSubstr("+  a: c"));
  EXPECT_EQ(server_->store().resourceVersion(), rv);
  EXPECT_EQ((*server_->get("configmaps", "default", "settings"))["data"]["a"], "b");
}

TEST_F(KubectlValidationTest, PodsStartPendingWithDefaultsAndKeepTheirSpec) {
  auto r = kubectl({"create", "-f", file("pod.yaml", R"(apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: web, image: "nginx:1.27"}]
status: {phase: Running}
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  json pod = getJson({"pod", "web"});
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_EQ(pod["status"]["qosClass"], "BestEffort");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Always");
  EXPECT_EQ(pod["spec"]["serviceAccountName"], "default");
  EXPECT_EQ(pod["spec"]["tolerations"][0]["key"], "node.kubernetes.io/not-ready");
  EXPECT_EQ(pod["spec"]["tolerations"][0]["tolerationSeconds"], 300);
  EXPECT_FALSE(pod["metadata"].contains("generation"));

  r = kubectl({"set", "image", "pod/web", "web=nginx:1.28"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  r = kubectl({"patch", "pod", "web", "-p", R"({"spec":{"restartPolicy":"Never"}})"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("The Pod \"web\" is invalid: spec: Forbidden: pod updates may not change "
                        "fields other than `spec.containers[*].image`"));
}

TEST_F(KubectlValidationTest, DeploymentsAndServicesGetTheirDefaults) {
  auto r = kubectl({"create", "-f", file("app.yaml", R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: default}
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec: {containers: [{name: app, image: app}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec:
  selector: {app: app}
  ports: [{port: 80}]
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  json d = getJson({"deployment", "app"});
  EXPECT_EQ(d["spec"]["replicas"], 1);
  EXPECT_EQ(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
  EXPECT_EQ(d["spec"]["revisionHistoryLimit"], 10);
  EXPECT_EQ(d["spec"]["progressDeadlineSeconds"], 600);
  EXPECT_EQ(d["metadata"]["generation"], 1);
  json svc = getJson({"service", "app"});
  std::string ip = svc["spec"]["clusterIP"];
  EXPECT_EQ(ip.rfind("10.", 0), 0u) << ip;
  EXPECT_EQ(svc["spec"]["clusterIPs"], json({ip}));
  EXPECT_EQ(svc["spec"]["type"], "ClusterIP");
  EXPECT_EQ(svc["spec"]["sessionAffinity"], "None");
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"], 80);

  r = kubectl({"create", "-f", file("bad-deploy.yaml", R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: other, namespace: default}
spec:
  selector: {matchLabels: {app: other}}
  template:
    metadata: {labels: {app: wrong}}
    spec: {containers: [{name: app, image: app}]}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("The Deployment \"other\" is invalid: "
                                       "spec.template.metadata.labels: Invalid value"));
}

// Issue 39: a Lease's duration and a Node's taint effect are validated as kube-apiserver does
// (422 naming the field), on create and on update.
TEST_F(KubectlValidationTest, LeaseDurationsAndTaintEffectsAreValidated) {
  auto r = kubectl({"create", "-f", file("lease0.yaml", R"(apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l0, namespace: default}
spec: {holderIdentity: a, leaseDurationSeconds: 0}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("The Lease \"l0\" is invalid: spec.leaseDurationSeconds: Invalid value: "
                        "0: must be greater than 0"));
  r = kubectl({"create", "-f", file("lease.yaml", R"(apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l1, namespace: default}
spec: {holderIdentity: a, leaseDurationSeconds: 15, leaseTransitions: 0}
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  r = kubectl(
      {"patch", "lease", "l1", "--type=merge", "-p", R"({"spec":{"leaseTransitions":-1}})"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("spec.leaseTransitions: Invalid value: -1: must be greater "
                                       "than or equal to 0"));

  r = kubectl({"create", "-f", file("node.yaml", R"(apiVersion: v1
kind: Node
metadata: {name: n1}
spec:
  taints: [{key: example.com/maintenance, value: "yes", effect: Sometimes}]
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("The Node \"n1\" is invalid: spec.taints[0].effect: Unsupported value: "
                        "\"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", "
                        "\"NoExecute\""));
  r = kubectl({"create", "-f", file("node-ok.yaml", R"(apiVersion: v1
kind: Node
metadata: {name: n2}
spec:
  taints: [{key: example.com/maintenance, value: "yes", effect: NoSchedule}]
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  // A patch meets the same check: an empty effect, a key that is not a qualified name.
  r = kubectl({"patch", "node", "n2", "--type=json", "-p",
               R"([{"op":"add","path":"/spec/taints/-","value":{"key":"a","effect":""}}])"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("spec.taints[1].effect: Required value"));
  r = kubectl(
      {"patch", "node", "n2", "--type=json", "-p",
       R"([{"op":"add","path":"/spec/taints/-","value":{"key":"-bad-","effect":"NoExecute"}}])"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("spec.taints[1].key: Invalid value: \"-bad-\""));
  EXPECT_EQ(getJson({"node", "n2"})["spec"]["taints"].size(), 1U);
}

// Server-side field validation (?fieldValidation, kubectl's --validate): a field the kind's Go
// type does not have is refused under Strict (kubectl's default) with the strict decoder's 400,
// dropped with a Warning header under Warn, dropped silently under Ignore (--validate=false);
// never stored, as decoding into the Go type drops it. An unknown directive is 422.
TEST_F(KubectlValidationTest, UnknownFieldsAreRefusedWarnedOrDroppedAsFieldValidationSays) {
  const std::string cm = file("cm.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: default}
data: {a: "1"}
bogus: 1
)");
  auto r = kubectl({"create", "-f", cm});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("ConfigMap in version \"v1\" cannot be handled as a "
                        "ConfigMap: strict decoding error: unknown field \"bogus\""));
  EXPECT_FALSE(server_->get("configmaps", "default", "c1"));

  r = kubectl({"create", "--validate=warn", "-f", cm});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stderr_data, HasSubstr("Warning: unknown field \"bogus\""));
  auto stored = server_->get("configmaps", "default", "c1");
  ASSERT_TRUE(stored);
  EXPECT_FALSE(stored->contains("bogus"));
  EXPECT_EQ((*stored)["data"]["a"], "1");

  // Deep in a pod's containers, and through a patch.
  r = kubectl({"create", "-f", file("pod.yaml", R"(apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  containers: [{name: app, image: nginx, colour: blue}]
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("unknown field \"spec.containers[0].colour\""));
  // kubectl patch sends no directive: the server's default, Warn.
  r = kubectl(
      {"patch", "configmap", "c1", "--type=merge", "-p", R"({"extra":{"x":1},"data":{"b":"2"}})"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stderr_data, HasSubstr("Warning: unknown field \"extra\""));
  stored = server_->get("configmaps", "default", "c1");
  ASSERT_TRUE(stored);
  EXPECT_FALSE(stored->contains("extra"));
  EXPECT_EQ((*stored)["data"]["b"], "2");
  // kubectl apply on the existing object patches it with ?fieldValidation=Strict.
  r = kubectl({"apply", "-f", file("cm-extra.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: default}
data: {a: "1"}
extra: {x: 1}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("strict decoding error: unknown field \"extra\""));
  // --validate=false: dropped, no warning.
  r = kubectl({"apply", "--validate=false", "-f", file("cm-extra.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: default}
data: {a: "3"}
extra: {x: 1}
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stderr_data, Not(HasSubstr("unknown field")));
  stored = server_->get("configmaps", "default", "c1");
  ASSERT_TRUE(stored);
  EXPECT_FALSE(stored->contains("extra"));
  EXPECT_EQ((*stored)["data"]["a"], "3");

  r = kubectl({"create", "--raw", "/api/v1/namespaces/default/configmaps?fieldValidation=Loud",
               "-f", file("cm2.json", R"({"apiVersion":"v1","kind":"ConfigMap",
                                          "metadata":{"name":"c2"}})")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("fieldValidation: Unsupported value: \"Loud\": supported "
                                       "values: \"\", \"Ignore\", \"Strict\", \"Warn\""));
}

TEST_F(KubectlValidationTest, SecretsFoldStringDataAndCheckTheirType) {
  auto r = kubectl({"create", "-f", file("secret.yaml", R"(apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: default}
stringData: {password: hunter2}
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  json s = getJson({"secret", "creds"});
  EXPECT_EQ(s["data"]["password"], "aHVudGVyMg==");
  EXPECT_FALSE(s.contains("stringData"));
  EXPECT_EQ(s["type"], "Opaque");

  r = kubectl({"create", "-f", file("tls.yaml", R"(apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: default}
type: kubernetes.io/tls
data: {tls.crt: eA==}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("The Secret \"tls\" is invalid: data[tls.key]: Required value"));

  r = kubectl({"create", "-f", file("b64.yaml", R"(apiVersion: v1
kind: Secret
metadata: {name: b64, namespace: default}
data: {k: "not base64!"}
)")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("illegal base64 data at input byte 3"));

  r = kubectl({"apply", "-f", file("immutable.yaml", R"(apiVersion: v1
kind: ConfigMap
metadata: {name: frozen, namespace: default}
immutable: true
data: {a: b}
)")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  r = kubectl({"patch", "configmap", "frozen", "-p", R"({"data":{"a":"c"}})"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data,
              HasSubstr("data: Forbidden: field is immutable when `immutable` is set"));
  EXPECT_THAT(kubectl({"get", "configmap", "frozen", "-o", "jsonpath={.metadata}"}).stdout_data,
              Not(HasSubstr("generation")));
}

}  // namespace
}  // namespace ekco::kubesim
