// deploy/ (and deploy-rook-ceph/, deploy-monitoring/, deploy-contour/, deploy-minio/) as a user
// applies them: created with the real kubectl against ekco-kubesim, the DaemonSet's contract with
// the agent (host root, node name, config mount, probes the `ekco` CLI accepts), the ConfigMap
// equal to the packaged config, the two DaemonSets (control-plane nodes as kurl/ekco, every other
// node as kurl/ekco-node, which never leads), and the RBAC rules answering `kubectl auth can-i`
// for both ServiceAccounts exactly as docs/permissions.md's tables say (the worker's through
// `--as=system:serviceaccount:kurl:ekco-node`, impersonated by the admin). That the agents need no
// more than these rules — and use every one of them — is proven by
// tests/agent/features/purge/purge_e2e_test.cc (kurl/ekco) and
// tests/agent/runtime/agent_worker_rbac_test.cc (kurl/ekco-node), which run the real agent as each.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "base/os/process.h"
#include "base/strings.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/agent/sa_client.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

// A Namespace document, as the add-on's installation creates it.
std::string namespaceYaml(const std::string& name) {
  return "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}\n";
}

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kKubectl = "/usr/bin/kubectl";
const std::string kSource = EKCO_SOURCE_DIR;

std::vector<YAML::Node> documents(const std::string& path) {
  std::vector<YAML::Node> out;
  for (const auto& d : YAML::LoadAllFromFile(path)) {
    if (d.IsMap()) out.push_back(d);
  }
  return out;
}

YAML::Node find(const std::string& path, const std::string& kind, const std::string& name) {
  for (const auto& d : documents(path)) {
    if (d["kind"].as<std::string>() == kind && d["metadata"]["name"].as<std::string>() == name) {
      return d;
    }
  }
  ADD_FAILURE() << kind << " " << name << " not in " << path;
  return YAML::Node();
}

TEST(Deploy, TheConfigMapHoldsThePackagedConfigAndItIsValid) {
  const YAML::Node cm = find(kSource + "/deploy/20-config.yaml", "ConfigMap", "ekco-config");
  ASSERT_TRUE(cm);
  EXPECT_EQ(cm["metadata"]["namespace"].as<std::string>(), "kurl");
  const std::string text = cm["data"]["config.yaml"].as<std::string>();
  EXPECT_EQ(text, testing::readWholeFile(kSource + "/packaging/config.yaml"))
      << "deploy/20-config.yaml and packaging/config.yaml differ: keep the defaults in one voice";
  testing::TempDir dir;
  const std::string path = dir.path() + "/config.yaml";
  std::ofstream(path) << text;
  testing::CliRun r = testing::cli({"config", "check", path});
  EXPECT_EQ(r.code, 0) << r.err;
}

// The labels a pod template carries.
std::map<std::string, std::string> labelsOf(const YAML::Node& labels) {
  std::map<std::string, std::string> out;
  for (const auto& l : labels) out[l.first.as<std::string>()] = l.second.as<std::string>();
  return out;
}

// Whether a DaemonSet's matchLabels select a pod with these labels.
bool selects(const YAML::Node& ds, const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : labelsOf(ds["spec"]["selector"]["matchLabels"])) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

// A nodeAffinity term as "key operator; key operator" lines, one per term.
std::vector<std::string> affinityTerms(const YAML::Node& pod) {
  std::vector<std::string> out;
  for (const auto& term : pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuring"
                                                          "Execution"]["nodeSelectorTerms"]) {
    std::string line;
    for (const auto& e : term["matchExpressions"]) {
      line += (line.empty() ? "" : "; ") + e["key"].as<std::string>() + " " +
              e["operator"].as<std::string>();
    }
    out.push_back(line);
  }
  return out;
}

std::string envValueOf(const YAML::Node& container, const std::string& name) {
  for (const auto& e : container["env"]) {
    if (e["name"].as<std::string>() == name && e["value"]) return e["value"].as<std::string>();
  }
  return "<unset>";
}

TEST(Deploy, ControlPlaneNodesRunTheEkcoAccountAndEveryOtherNodeTheWorkerAccount) {
  const std::string file = kSource + "/deploy/30-daemonset.yaml";
  const YAML::Node cp = find(file, "DaemonSet", "ekco");
  const YAML::Node worker = find(file, "DaemonSet", "ekco-node");
  ASSERT_TRUE(cp);
  ASSERT_TRUE(worker);
  const YAML::Node cp_pod = cp["spec"]["template"]["spec"];
  const YAML::Node worker_pod = worker["spec"]["template"]["spec"];
  EXPECT_EQ(cp_pod["serviceAccountName"].as<std::string>(), "ekco");
  EXPECT_EQ(worker_pod["serviceAccountName"].as<std::string>(), "ekco-node");
  // kubeadm's control-plane label (master before 1.24): either puts a node in the ekco
  // DaemonSet, and only nodes with neither get ekco-node. A kubelet cannot set these labels on
  // its own Node (NodeRestriction), so a worker cannot draw the ekco pod to itself.
  EXPECT_THAT(affinityTerms(cp_pod), ElementsAre("node-role.kubernetes.io/control-plane Exists",
                                                 "node-role.kubernetes.io/master Exists"));
  EXPECT_THAT(affinityTerms(worker_pod),
              ElementsAre("node-role.kubernetes.io/control-plane DoesNotExist; "
                          "node-role.kubernetes.io/master DoesNotExist"));
  EXPECT_FALSE(cp_pod["nodeSelector"]);
  EXPECT_FALSE(worker_pod["nodeSelector"]);
  // Neither DaemonSet adopts the other's pods; Service kurl/ekco (the webhook, selector
  // app.kubernetes.io/name: ekco) selects the control-plane pods only.
  const auto cp_labels = labelsOf(cp["spec"]["template"]["metadata"]["labels"]);
  const auto worker_labels = labelsOf(worker["spec"]["template"]["metadata"]["labels"]);
  EXPECT_TRUE(selects(cp, cp_labels));
  EXPECT_TRUE(selects(worker, worker_labels));
  EXPECT_FALSE(selects(cp, worker_labels));
  EXPECT_FALSE(selects(worker, cp_labels));
  EXPECT_EQ(cp_labels.at("app.kubernetes.io/name"), "ekco");
  EXPECT_NE(worker_labels.at("app.kubernetes.io/name"), "ekco");
  // The worker never competes for the Lease and serves no webhook.
  EXPECT_EQ(envValueOf(worker_pod["containers"][0], "EKCO_LEADER_ELECTION_CANDIDATE"), "false");
  EXPECT_EQ(envValueOf(cp_pod["containers"][0], "EKCO_LEADER_ELECTION_CANDIDATE"), "<unset>");
  std::set<std::string> worker_ports;
  for (const auto& p : worker_pod["containers"][0]["ports"]) {
    worker_ports.insert(p["name"].as<std::string>());
  }
  EXPECT_EQ(worker_ports, (std::set<std::string>{"metrics"}));
  // The ConfigMap's configuration with the worker's environment is valid and makes a
  // non-candidate.
  testing::TempDir dir;
  const std::string path = dir.path() + "/config.yaml";
  std::ofstream(path) << find(kSource + "/deploy/20-config.yaml", "ConfigMap",
                              "ekco-config")["data"]["config.yaml"]
                             .as<std::string>();
  testing::CliRun shown =
      testing::cli({"config", "show", "--config", path}, {"EKCO_LEADER_ELECTION_CANDIDATE=false"});
  EXPECT_EQ(shown.code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("leader_election_candidate: false"));
}

TEST(Deploy, TheDaemonSetsRunTheAgentWithTheHostMounted) {
  for (const char* name : {"ekco", "ekco-node"}) {
    SCOPED_TRACE(name);
    const YAML::Node ds = find(kSource + "/deploy/30-daemonset.yaml", "DaemonSet", name);
    ASSERT_TRUE(ds);
    EXPECT_EQ(ds["metadata"]["namespace"].as<std::string>(), "kurl");
    const YAML::Node pod = ds["spec"]["template"]["spec"];
    EXPECT_EQ(pod["priorityClassName"].as<std::string>(), "system-node-critical");
    EXPECT_TRUE(pod["hostPID"].as<bool>());
    ASSERT_EQ(pod["tolerations"].size(), 1u);
    EXPECT_EQ(pod["tolerations"][0]["operator"].as<std::string>(), "Exists");
    EXPECT_FALSE(pod["tolerations"][0]["key"]);
    const YAML::Node c = pod["containers"][0];
    std::vector<std::string> args;
    for (const auto& a : c["args"]) args.push_back(a.as<std::string>());
    EXPECT_THAT(args, ElementsAre("agent", "--config=/etc/ekco/config.yaml", "--host-root=/host"));
    EXPECT_EQ(c["env"][0]["name"].as<std::string>(), "NODE_NAME");
    EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(), "spec.nodeName");
    std::map<std::string, std::string> mounts;
    for (const auto& m : c["volumeMounts"]) {
      mounts[m["name"].as<std::string>()] = m["mountPath"].as<std::string>();
    }
    EXPECT_EQ(mounts["host"], "/host");
    EXPECT_EQ(mounts["config"], "/etc/ekco");
    for (const auto& v : pod["volumes"]) {
      if (v["name"].as<std::string>() == "host") {
        EXPECT_EQ(v["hostPath"]["path"].as<std::string>(), "/");
      }
      if (v["name"].as<std::string>() == "config") {
        EXPECT_EQ(v["configMap"]["name"].as<std::string>(), "ekco-config");
      }
    }
    EXPECT_TRUE(c["resources"]["requests"]["memory"]);
    EXPECT_TRUE(c["resources"]["limits"]["memory"]);

    // The probes are `ekco status` command lines the CLI accepts: against the host's socket under
    // /host they answer from a live agent (here: a health server under a temp "/host"), and a
    // missing agent is "cannot reach", not a usage error.
    testing::TempDir dir;
    const std::string host = dir.path() + "/host";
    HealthHandlers h;
    h.healthz = [] { return Health{.ok = true}; };
    h.readyz = [] { return Health{.ok = false, .reason = "caches not synced: pods"}; };
    auto server = HealthServer::start(
        HealthServerOptions{.socket_path = host + "/run/ekco/ekco.sock", .handlers = h});
    ASSERT_TRUE(server) << server.error().message();
    for (const char* probe : {"livenessProbe", "readinessProbe"}) {
      std::vector<std::string> command;
      for (const auto& a : c[probe]["exec"]["command"]) command.push_back(a.as<std::string>());
      ASSERT_GE(command.size(), 2u) << probe;
      EXPECT_EQ(command[0], "ekco") << probe;
      EXPECT_THAT(command, ::testing::Contains("--host-root=/host")) << probe;
      std::vector<std::string> run(command.begin() + 1, command.end());
      for (auto& a : run) {
        if (a == "--host-root=/host") a = "--host-root=" + host;
      }
      testing::CliRun r = testing::cli(run);
      if (std::string(probe) == "livenessProbe") {
        EXPECT_EQ(r.code, 0) << r.err;  // alive though not ready: no restart
        EXPECT_EQ(r.out, "ok\n");
      } else {
        EXPECT_EQ(r.code, 1) << r.err;
        EXPECT_THAT(r.err, HasSubstr("caches not synced"));
      }
    }
    (*server)->stop();
    std::vector<std::string> live;
    for (const auto& a : c["livenessProbe"]["exec"]["command"]) live.push_back(a.as<std::string>());
    live.erase(live.begin());
    for (auto& a : live) {
      if (a == "--host-root=/host") a = "--host-root=" + dir.path() + "/absent";
    }
    testing::CliRun gone = testing::cli(live);
    EXPECT_EQ(gone.code, 2);
    EXPECT_THAT(gone.err, HasSubstr("cannot reach the ekco agent's health socket"));
  }
}

// Kubernetes' rules for a structural schema (apiextensions' "Specifying a structural schema"), as
// far as a CRD can break them: below the root every node names its type unless it keeps unknown
// fields; properties only on objects, items only on arrays (and every array has them); no
// allOf/anyOf/oneOf/not; nothing about metadata. Also ekco's own: every property is described
// (what `kubectl explain` prints). `preserved` gets the paths that keep unknown fields.
void checkStructural(const json& s, const std::string& path, std::vector<std::string>& problems,
                     std::set<std::string>& preserved) {
  if (!s.is_object()) {
    problems.push_back(path + ": not a schema");
    return;
  }
  for (const char* junctor : {"allOf", "anyOf", "oneOf", "not"}) {
    if (s.contains(junctor)) problems.push_back(path + ": " + junctor);
  }
  const std::string type = s.value("type", "");
  const bool keeps = s.value("x-kubernetes-preserve-unknown-fields", false);
  if (keeps) preserved.insert(path);
  if (type.empty() && !keeps && !s.value("x-kubernetes-int-or-string", false)) {
    problems.push_back(path + ": no type");
  }
  if (s.contains("properties")) {
    if (type != "object") problems.push_back(path + ": properties on a " + type);
    for (const auto& [name, p] : s["properties"].items()) {
      if (path.empty() && name == "metadata") problems.push_back("metadata is specified");
      if (p.value("description", "").empty())
        problems.push_back(path + "." + name + ": no description");
      checkStructural(p, path + "." + name, problems, preserved);
    }
  } else if (type == "object" && !keeps && !s.contains("additionalProperties")) {
    problems.push_back(path + ": an object that keeps no field");
  }
  if (s.contains("items")) {
    if (type != "array") problems.push_back(path + ": items on a " + type);
    checkStructural(s["items"], path + "[]", problems, preserved);
  } else if (type == "array") {
    problems.push_back(path + ": an array without items");
  }
}

std::set<std::string> keysOf(const json& object) {
  std::set<std::string> out;
  for (const auto& [k, v] : object.items()) out.insert(k);
  return out;
}

// Issue 34: the HostJob CRD had no schema for spec (it kept any field). Now structural and
// documenting each field; unknown fields are kept only where the agents read bad input
// themselves to explain it in the status: `command` (a shell string is the usual mistake) and
// the agents' own status.
TEST(Deploy, TheHostJobSchemaIsStructuralAndDocumentsEverySpecField) {
  auto objects =
      kubesim::parseObjects(testing::readWholeFile(kSource + "/deploy/12-crd-hostjobs.yaml"));
  ASSERT_TRUE(objects) << objects.error().message();
  json crd;
  for (const json& o : *objects) {
    if (o["kind"] == "CustomResourceDefinition") crd = o;
  }
  ASSERT_TRUE(crd.is_object());
  ASSERT_EQ(crd["spec"]["versions"].size(), 1u);
  const json& version = crd["spec"]["versions"][0];
  const json& root = version["schema"]["openAPIV3Schema"];
  ASSERT_EQ(root.value("type", ""), "object");
  std::vector<std::string> problems;
  std::set<std::string> preserved;
  checkStructural(root, "", problems, preserved);
  EXPECT_THAT(problems, ::testing::IsEmpty());
  EXPECT_EQ(preserved, (std::set<std::string>{".spec.command", ".status"}));

  // Copies, not references: a field missing is then a failure, not a lookup past the end.
  json spec = root.value("properties", json::object()).value("spec", json::object());
  ASSERT_TRUE(spec.contains("properties")) << "spec declares no field";
  EXPECT_EQ(keysOf(spec["properties"]),
            (std::set<std::string>{"command", "hostPath", "nodeSelectorTerms", "timeout"}));
  EXPECT_FALSE(spec["properties"]["command"].contains("type"));  // the agents explain a string
  EXPECT_EQ(spec["properties"]["hostPath"]["type"], "string");
  EXPECT_EQ(spec["properties"]["timeout"]["type"], "string");
  ASSERT_TRUE(spec["properties"].contains("nodeSelectorTerms"));
  json term = spec["properties"]["nodeSelectorTerms"].value("items", json::object());
  ASSERT_TRUE(term.contains("properties")) << "a term declares no field";
  EXPECT_EQ(keysOf(term["properties"]), (std::set<std::string>{"matchExpressions", "matchFields"}));
  for (const char* list : {"matchExpressions", "matchFields"}) {
    ASSERT_TRUE(term["properties"].contains(list)) << list;
    json requirement = term["properties"][list].value("items", json::object());
    ASSERT_TRUE(requirement.contains("properties")) << list;
    EXPECT_EQ(keysOf(requirement["properties"]),
              (std::set<std::string>{"key", "operator", "values"}))
        << list;
    EXPECT_EQ(requirement["properties"]["key"]["type"], "string") << list;
    // No enum: an unknown operator is the agents' to name in the status.
    EXPECT_FALSE(requirement["properties"]["operator"].contains("enum")) << list;
    EXPECT_EQ(requirement["properties"]["values"]["items"]["type"], "string") << list;
  }
  // Every printer column reads a declared field (or metadata, or the agents' status).
  for (const json& c : version["additionalPrinterColumns"]) {
    const std::string path = c["jsonPath"];
    const bool declared = path.starts_with(".status.") || path.starts_with(".metadata.") ||
                          spec["properties"].contains(path.substr(std::string(".spec.").size()));
    EXPECT_TRUE(declared) << path;
  }
}

class DeployKubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kKubectl)) GTEST_SKIP() << kKubectl << " is not installed";
    // Nothing of deploy/ yet: the test applies it with kubectl.
    ASSERT_NO_FATAL_FAILURE(
        testing::startAsEkco({.dir = dir_.path(), .manifest_dirs = {}}, server_));
    sa_kubeconfig_ = dir_.path() + "/sa.kubeconfig";
  }

  base::ProcessResult kubectl(std::vector<std::string> args, const std::string& kubeconfig = "") {
    base::ProcessRequest request;
    request.argv = {kKubectl, "--kubeconfig",
                    kubeconfig.empty() ? server_->kubeconfigPath() : kubeconfig, "--cache-dir",
                    dir_.path() + "/cache"};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.timeout = std::chrono::seconds(30);
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }

  // `kubectl auth can-i` as the ServiceAccount: "yes" or "no".
  std::string canI(std::vector<std::string> args) {
    args.insert(args.begin(), {"auth", "can-i"});
    return kubectl(args, sa_kubeconfig_).stdout_data;
  }

  // `kubectl auth can-i --as=system:serviceaccount:kurl:<account>` as the cluster admin (an
  // impersonated SelfSubjectAccessReview, as an operator checks an account).
  std::string canIAs(const std::string& account, std::vector<std::string> args) {
    args.insert(args.begin(), {"auth", "can-i", "--as=system:serviceaccount:kurl:" + account});
    base::ProcessResult r = kubectl(args);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.stderr_data;
    return r.stdout_data;
  }

  testing::TempDir dir_{"ekco-deploy"};
  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::unique_ptr<kubesim::Server> server_;
  std::string sa_kubeconfig_;
};

TEST_F(DeployKubectlTest, KubectlCreatesEverythingAndTheRulesAreExactlyTheTable) {
  // Before deploy/: the ServiceAccount may do nothing.
  EXPECT_EQ(canI({"list", "nodes"}), "no\n");

  base::ProcessResult created = kubectl({"create", "-f", kSource + "/deploy/", "-R"});
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  for (const char* line : {"namespace/kurl created", "serviceaccount/ekco created",
                           "clusterrole.rbac.authorization.k8s.io/ekco created",
                           "clusterrolebinding.rbac.authorization.k8s.io/ekco created",
                           "role.rbac.authorization.k8s.io/ekco-leader-election created",
                           "rolebinding.rbac.authorization.k8s.io/ekco-leader-election created",
                           "role.rbac.authorization.k8s.io/ekco-node-leases created",
                           "rolebinding.rbac.authorization.k8s.io/ekco-node-leases created",
                           "role.rbac.authorization.k8s.io/ekco-internal-lb created",
                           "role.rbac.authorization.k8s.io/ekco-purge-kubeadm created",
                           "role.rbac.authorization.k8s.io/ekco-control-plane-certificates created",
                           "configmap/ekco-config created", "daemonset.apps/ekco created",
                           "serviceaccount/ekco-node created",
                           "clusterrole.rbac.authorization.k8s.io/ekco-node created",
                           "clusterrolebinding.rbac.authorization.k8s.io/ekco-node created",
                           "role.rbac.authorization.k8s.io/ekco-node created",
                           "rolebinding.rbac.authorization.k8s.io/ekco-node created",
                           "daemonset.apps/ekco-node created"}) {
    EXPECT_THAT(created.stdout_data, HasSubstr(std::string(line) + "\n"));
  }
  // Rook is installed: its namespace exists (kube-apiserver refuses objects in a missing one)
  // and its CephCluster CRD is served (ekco-kubesim starts with Rook's and prometheus-operator's
  // CRDs; kubectl resolves cephclusters through discovery).
  const std::string rook_ns = dir_.path() + "/rook-ceph-namespace.yaml";
  std::ofstream(rook_ns) << namespaceYaml("rook-ceph");
  base::ProcessResult rook_ns_created = kubectl({"create", "-f", rook_ns});
  ASSERT_EQ(rook_ns_created.exit_code, 0) << rook_ns_created.stderr_data;
  base::ProcessResult crds =
      kubectl({"get", "crd", "cephclusters.ceph.rook.io", "prometheuses.monitoring.coreos.com",
               "alertmanagers.monitoring.coreos.com", "-o", "name"});
  ASSERT_EQ(crds.exit_code, 0) << crds.stderr_data;
  base::ProcessResult rook = kubectl({"create", "-f", kSource + "/deploy-rook-ceph/"});
  ASSERT_EQ(rook.exit_code, 0) << rook.stderr_data;
  EXPECT_THAT(rook.stdout_data,
              HasSubstr("role.rbac.authorization.k8s.io/ekco-purge-rook created"));
  EXPECT_THAT(rook.stdout_data,
              HasSubstr("role.rbac.authorization.k8s.io/ekco-maintain-rook created"));

  // kURL's Prometheus add-on is installed: its CRDs are served, deploy-monitoring/ applies.
  const std::string monitoring_ns = dir_.path() + "/monitoring-namespace.yaml";
  std::ofstream(monitoring_ns) << namespaceYaml("monitoring");
  base::ProcessResult monitoring_ns_created = kubectl({"create", "-f", monitoring_ns});
  ASSERT_EQ(monitoring_ns_created.exit_code, 0) << monitoring_ns_created.stderr_data;
  base::ProcessResult monitoring = kubectl({"create", "-f", kSource + "/deploy-monitoring/"});
  ASSERT_EQ(monitoring.exit_code, 0) << monitoring.stderr_data;
  EXPECT_THAT(monitoring.stdout_data,
              HasSubstr("role.rbac.authorization.k8s.io/ekco-resource-scaling created"));
  EXPECT_THAT(monitoring.stdout_data,
              HasSubstr("prometheusrule.monitoring.coreos.com/ekco created"));
  EXPECT_THAT(monitoring.stdout_data, HasSubstr("podmonitor.monitoring.coreos.com/ekco created"));

  // kURL's Contour add-on is installed: its namespace exists, deploy-contour/ applies.
  const std::string contour_ns = dir_.path() + "/contour-namespace.yaml";
  std::ofstream(contour_ns) << namespaceYaml("projectcontour");
  base::ProcessResult contour_ns_created = kubectl({"create", "-f", contour_ns});
  ASSERT_EQ(contour_ns_created.exit_code, 0) << contour_ns_created.stderr_data;
  base::ProcessResult contour = kubectl({"create", "-f", kSource + "/deploy-contour/"});
  ASSERT_EQ(contour.exit_code, 0) << contour.stderr_data;
  EXPECT_THAT(contour.stdout_data,
              HasSubstr("role.rbac.authorization.k8s.io/ekco-contour-certificates created"));

  // kURL's MinIO add-on is installed: its namespace exists, deploy-minio/ applies.
  const std::string minio_ns = dir_.path() + "/minio-namespace.yaml";
  std::ofstream(minio_ns) << namespaceYaml("minio");
  base::ProcessResult minio_ns_created = kubectl({"create", "-f", minio_ns});
  ASSERT_EQ(minio_ns_created.exit_code, 0) << minio_ns_created.stderr_data;
  base::ProcessResult minio = kubectl({"create", "-f", kSource + "/deploy-minio/"});
  ASSERT_EQ(minio.exit_code, 0) << minio.stderr_data;
  EXPECT_THAT(minio.stdout_data, HasSubstr("role.rbac.authorization.k8s.io/ekco-minio-ha created"));

  for (const char* name : {"ekco", "ekco-node"}) {
    base::ProcessResult ds = kubectl({"get", "daemonset", name, "-n", "kurl", "-o", "json"});
    ASSERT_EQ(ds.exit_code, 0) << ds.stderr_data;
    const json daemonset = json::parse(ds.stdout_data);
    EXPECT_EQ(daemonset["spec"]["template"]["spec"]["serviceAccountName"], name);
    // The PodMonitor scrapes the `metrics` port, which is where the agent's metrics_address
    // (EKCO_METRICS_ADDRESS in the pod) listens.
    const json& container = daemonset["spec"]["template"]["spec"]["containers"][0];
    json metrics_port;
    for (const json& p : container["ports"]) {
      if (p["name"] == "metrics") metrics_port = p;
    }
    ASSERT_TRUE(metrics_port.is_object()) << daemonset.dump();
    json metrics_env;
    for (const json& e : container["env"]) {
      if (e["name"] == "EKCO_METRICS_ADDRESS") metrics_env = e;
    }
    ASSERT_TRUE(metrics_env.is_object()) << daemonset.dump();
    EXPECT_EQ(metrics_env["value"],
              fmt::format("0.0.0.0:{}", metrics_port["containerPort"].get<int>()));
    // deploy-monitoring/podmonitor.yaml scrapes both DaemonSets' pods.
    const YAML::Node monitor =
        find(kSource + "/deploy-monitoring/podmonitor.yaml", "PodMonitor", "ekco");
    std::set<std::string> scraped;
    for (const auto& e : monitor["spec"]["selector"]["matchExpressions"]) {
      ASSERT_EQ(e["key"].as<std::string>(), "app.kubernetes.io/name");
      ASSERT_EQ(e["operator"].as<std::string>(), "In");
      for (const auto& v : e["values"]) scraped.insert(v.as<std::string>());
    }
    EXPECT_TRUE(scraped.contains(
        daemonset["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]))
        << name;
  }

  // docs/permissions.md's table, row by row, and what it leaves out.
  struct Case {
    std::vector<std::string> args;
    const char* answer;
  };
  const std::vector<Case> cases = {
      {{"get", "nodes"}, "yes"},
      {{"list", "nodes"}, "yes"},
      {{"watch", "nodes"}, "yes"},
      {{"patch", "nodes"}, "yes"},
      {{"delete", "nodes"}, "yes"},
      {{"create", "nodes"}, "no"},
      {{"update", "nodes"}, "no"},
      {{"list", "pods", "--all-namespaces"}, "yes"},
      {{"watch", "pods", "--all-namespaces"}, "yes"},
      {{"delete", "pods", "-n", "default"}, "yes"},
      {{"create", "pods", "-n", "default"}, "no"},
      {{"get", "pods", "-n", "default"}, "no"},
      {{"get", "pods/kube-apiserver-cp-1", "-n", "kube-system"}, "yes"},
      {{"update", "pods", "-n", "kube-system"}, "no"},
      {{"create", "pods", "--subresource=eviction", "-n", "default"}, "no"},
      {{"create", "events", "-n", "default"}, "yes"},
      {{"create", "events", "-n", "kurl"}, "yes"},
      {{"get", "leases", "-n", "kurl"}, "yes"},
      {{"create", "leases", "-n", "kurl"}, "yes"},
      {{"update", "leases", "-n", "kurl"}, "yes"},
      {{"watch", "leases", "-n", "kurl"}, "yes"},
      {{"delete", "leases", "-n", "kurl"}, "no"},
      {{"update", "leases", "-n", "kube-system"}, "no"},
      {{"get", "leases", "-n", "kube-node-lease"}, "yes"},
      {{"list", "leases", "-n", "kube-node-lease"}, "yes"},
      {{"watch", "leases", "-n", "kube-node-lease"}, "yes"},
      {{"update", "leases", "-n", "kube-node-lease"}, "no"},
      {{"list", "endpointslices.discovery.k8s.io", "-n", "default"}, "yes"},
      {{"watch", "endpoints", "-n", "default"}, "yes"},
      {{"list", "endpointslices.discovery.k8s.io", "-n", "kube-system"}, "no"},
      {{"get", "configmaps/kubeadm-config", "-n", "kube-system"}, "yes"},
      {{"update", "configmaps/kubeadm-config", "-n", "kube-system"}, "yes"},
      {{"update", "configmaps/kube-proxy", "-n", "kube-system"}, "no"},
      {{"list", "configmaps", "-n", "kube-system"}, "no"},
      {{"watch", "configmaps/ekco-maintenance", "-n", "kurl"}, "yes"},
      {{"get", "configmaps/ekco-maintenance", "-n", "kurl"}, "yes"},
      {{"update", "configmaps/ekco-maintenance", "-n", "kurl"}, "no"},
      {{"delete", "configmaps/ekco-maintenance", "-n", "kurl"}, "no"},
      {{"list", "configmaps", "-n", "kurl"}, "no"},
      {{"get", "cephclusters.ceph.rook.io", "-n", "rook-ceph"}, "yes"},
      {{"get", "cephclusters.ceph.rook.io/rook-ceph", "-n", "default"}, "yes"},
      {{"list", "cephclusters.ceph.rook.io", "-n", "default"}, "no"},
      {{"patch", "cephclusters.ceph.rook.io", "-n", "rook-ceph"}, "yes"},
      {{"patch", "cephblockpools.ceph.rook.io", "-n", "rook-ceph"}, "yes"},
      {{"patch", "cephfilesystems.ceph.rook.io", "-n", "rook-ceph"}, "yes"},
      {{"get", "cephobjectstores.ceph.rook.io", "-n", "rook-ceph"}, "yes"},
      {{"delete", "cephblockpools.ceph.rook.io", "-n", "rook-ceph"}, "no"},
      {{"patch", "configmaps/rook-ceph-operator-config", "-n", "rook-ceph"}, "yes"},
      {{"patch", "configmaps/rook-config-override", "-n", "rook-ceph"}, "no"},
      {{"list", "deployments.apps", "-n", "rook-ceph"}, "yes"},
      {{"delete", "deployments.apps", "-n", "rook-ceph"}, "yes"},
      {{"delete", "deployments.apps", "-n", "default"}, "no"},
      {{"create", "pods", "--subresource=exec", "-n", "rook-ceph"}, "yes"},
      {{"get", "pods", "--subresource=exec", "-n", "rook-ceph"}, "yes"},
      {{"create", "pods", "--subresource=exec", "-n", "default"}, "no"},
      {{"get", "statefulsets.apps/kotsadm-rqlite", "-n", "default"}, "yes"},
      {{"patch", "statefulsets.apps/kotsadm-rqlite", "-n", "default"}, "yes"},
      {{"patch", "statefulsets.apps/other", "-n", "default"}, "no"},
      {{"get", "configmaps/ekco-storage-migration", "-n", "kurl"}, "yes"},
      {{"update", "configmaps/ekco-storage-migration", "-n", "kurl"}, "yes"},
      {{"delete", "configmaps/ekco-storage-migration", "-n", "kurl"}, "yes"},
      {{"create", "configmaps", "-n", "kurl"}, "yes"},
      {{"create", "configmaps", "-n", "default"}, "no"},
      {{"get", "statefulsets.apps/ha-minio", "-n", "minio"}, "yes"},
      {{"update", "statefulsets.apps/ha-minio", "--subresource=scale", "-n", "minio"}, "yes"},
      {{"delete", "statefulsets.apps/ha-minio", "-n", "minio"}, "no"},
      {{"delete", "deployments.apps/minio", "-n", "minio"}, "yes"},
      {{"delete", "deployments.apps/other", "-n", "minio"}, "no"},
      {{"delete", "persistentvolumeclaims/minio-pv-claim", "-n", "minio"}, "yes"},
      {{"delete", "persistentvolumeclaims/ha-minio-0", "-n", "minio"}, "no"},
      {{"delete", "persistentvolumeclaims/minio-data-ha-minio-0", "-n", "minio"}, "yes"},
      {{"delete", "persistentvolumeclaims/minio-data-ha-minio-5", "-n", "minio"}, "yes"},
      {{"delete", "persistentvolumeclaims/minio-data-ha-minio-6", "-n", "minio"}, "no"},
      {{"delete", "persistentvolumeclaims/other", "-n", "minio"}, "no"},
      {{"get", "persistentvolumeclaims/minio-data-ha-minio-0", "-n", "minio"}, "yes"},
      {{"get", "persistentvolumeclaims/other", "-n", "minio"}, "no"},
      {{"get", "persistentvolumes/pv-1"}, "yes"},
      {{"delete", "persistentvolumes/pv-1"}, "no"},
      {{"get", "pods", "-n", "minio"}, "yes"},
      {{"delete", "pods", "-n", "minio"}, "yes"},
      {{"update", "pods", "-n", "minio"}, "no"},
      {{"patch", "services/minio", "-n", "minio"}, "yes"},
      {{"get", "secrets/minio-credentials", "-n", "minio"}, "yes"},
      {{"get", "secrets/other", "-n", "minio"}, "no"},
      {{"list", "storageclasses.storage.k8s.io"}, "yes"},
      {{"delete", "storageclasses.storage.k8s.io"}, "no"},
      {{"get", "prometheuses.monitoring.coreos.com/k8s", "-n", "monitoring"}, "yes"},
      {{"patch", "prometheuses.monitoring.coreos.com/k8s", "-n", "monitoring"}, "yes"},
      {{"patch", "alertmanagers.monitoring.coreos.com/prometheus-alertmanager", "-n", "monitoring"},
       "yes"},
      {{"patch", "prometheuses.monitoring.coreos.com/other", "-n", "monitoring"}, "no"},
      {{"list", "prometheuses.monitoring.coreos.com", "-n", "monitoring"}, "no"},
      {{"delete", "alertmanagers.monitoring.coreos.com/prometheus-alertmanager", "-n",
        "monitoring"},
       "no"},
      {{"get", "secrets", "-n", "kurl"}, "no"},
      {{"get", "secrets/ekco-webhook-ca", "-n", "kurl"}, "yes"},
      {{"update", "secrets/ekco-webhook-ca", "-n", "kurl"}, "no"},
      {{"get", "secrets/other", "-n", "kurl"}, "no"},
      {{"create", "secrets", "-n", "kurl"}, "yes"},
      {{"create", "secrets", "-n", "default"}, "no"},
      {{"patch", "services/ekco", "-n", "kurl"}, "yes"},
      {{"delete", "services/ekco", "-n", "kurl"}, "no"},
      {{"get", "mutatingwebhookconfigurations/pod-image-overrides.kurl.sh"}, "yes"},
      {{"delete", "mutatingwebhookconfigurations/pod-image-overrides.kurl.sh"}, "yes"},
      {{"delete", "mutatingwebhookconfigurations/other"}, "no"},
      {{"update", "validatingwebhookconfigurations/pod-image-overrides.kurl.sh"}, "no"},
      {{"list", "secrets", "--all-namespaces"}, "no"},
      {{"get", "secret/registry-pki", "-n", "kurl"}, "yes"},
      {{"update", "secret/registry-pki", "-n", "kurl"}, "yes"},
      {{"delete", "secret/registry-pki", "-n", "kurl"}, "no"},
      {{"get", "secret/other", "-n", "kurl"}, "no"},
      {{"get", "secret/kotsadm-tls", "-n", "default"}, "yes"},
      {{"update", "secret/kubelet-client-cert", "-n", "default"}, "yes"},
      {{"get", "secret/other", "-n", "default"}, "no"},
      {{"get", "certificatesigningrequests.certificates.k8s.io"}, "yes"},
      {{"list", "certificatesigningrequests.certificates.k8s.io"}, "yes"},
      {{"watch", "certificatesigningrequests.certificates.k8s.io"}, "yes"},
      {{"update", "certificatesigningrequests.certificates.k8s.io", "--subresource=approval"},
       "yes"},
      {{"update", "certificatesigningrequests.certificates.k8s.io"}, "no"},
      {{"create", "certificatesigningrequests.certificates.k8s.io"}, "no"},
      {{"delete", "certificatesigningrequests.certificates.k8s.io"}, "no"},
      // The API server's names, never approved, and the record of approved SANs per node.
      {{"get", "services/kubernetes", "-n", "default"}, "yes"},
      {{"get", "services/other", "-n", "default"}, "no"},
      {{"update", "services/kubernetes", "-n", "default"}, "no"},
      {{"get", "configmaps/ekco-kubelet-serving-addresses", "-n", "kurl"}, "yes"},
      {{"update", "configmaps/ekco-kubelet-serving-addresses", "-n", "kurl"}, "yes"},
      {{"delete", "configmaps/ekco-kubelet-serving-addresses", "-n", "kurl"}, "no"},
      {{"update", "configmaps/ekco-kubelet-serving-addresses", "-n", "default"}, "no"},
      // `approve` on signers/kubernetes.io/kubelet-serving: kubectl auth can-i cannot name a
      // signer (its name holds a '/'); KubeletCsrApprovalSimTest approves as this
      // ServiceAccount through kubesim's signer check instead.
      {{"update", "secret/contourcert", "-n", "projectcontour"}, "yes"},
      {{"get", "secret/envoycert", "-n", "projectcontour"}, "yes"},
      {{"get", "secret/other", "-n", "projectcontour"}, "no"},
      // Read by name from deploy/ too, so that a cluster without Contour (no projectcontour,
      // so no deploy-contour/) answers 404, not 403.
      {{"get", "secret/contourcert", "-n", "default"}, "yes"},
      {{"update", "secret/contourcert", "-n", "default"}, "no"},
      {{"list", "secrets", "-n", "projectcontour"}, "no"},
      {{"patch", "daemonset.apps/envoy", "-n", "projectcontour"}, "yes"},
      {{"patch", "daemonset.apps/contour", "-n", "projectcontour"}, "no"},
      {{"get", "pods/envoy-x", "-n", "projectcontour"}, "yes"},
      {{"update", "pods/envoy-x", "-n", "projectcontour"}, "no"},
  };
  for (const auto& c : cases) {
    std::string what;
    for (const auto& a : c.args) what += a + " ";
    EXPECT_EQ(canI(c.args), std::string(c.answer) + "\n") << "kubectl auth can-i " << what;
  }

  // The worker account (deploy/10-rbac-node.yaml; docs/permissions.md, "ekco-node"): root on
  // a worker holds this token, so no cluster-wide write and no secret, only what the worker's
  // agent uses (tests/agent/runtime/agent_worker_rbac_test.cc runs it with these rules).
  const std::vector<Case> worker_cases = {
      // What a worker's agent does: its Node and pods (read), the apiservers, who leads,
      // maintenance mode, its Events, HostJobs and their status.
      {{"get", "nodes"}, "yes"},
      {{"list", "nodes"}, "yes"},
      {{"watch", "nodes"}, "yes"},
      {{"list", "pods", "--all-namespaces"}, "yes"},
      {{"watch", "pods", "--all-namespaces"}, "yes"},
      {{"list", "endpointslices.discovery.k8s.io", "-n", "default"}, "yes"},
      {{"watch", "endpoints/kubernetes", "-n", "default"}, "yes"},
      {{"get", "leases/ekco-leader", "-n", "kurl"}, "yes"},
      {{"watch", "leases/ekco-leader", "-n", "kurl"}, "yes"},
      {{"watch", "configmaps/ekco-maintenance", "-n", "kurl"}, "yes"},
      {{"get", "configmaps/ekco-config", "-n", "kurl"}, "yes"},
      {{"create", "events", "-n", "default"}, "yes"},
      {{"list", "hostjobs.ekco.kurl.sh"}, "yes"},
      {{"patch", "hostjobs.ekco.kurl.sh", "--subresource=status"}, "yes"},
      {{"update", "hostjobs.ekco.kurl.sh", "--subresource=status"}, "yes"},
      // What it must not: approve CSRs, delete or change Nodes, patch Rook, delete or evict
      // pods, lead, touch secrets or the webhook.
      {{"update", "certificatesigningrequests.certificates.k8s.io", "--subresource=approval"},
       "no"},
      {{"list", "certificatesigningrequests.certificates.k8s.io"}, "no"},
      {{"delete", "nodes"}, "no"},
      {{"patch", "nodes"}, "no"},
      {{"update", "nodes"}, "no"},
      {{"patch", "nodes", "--subresource=status"}, "no"},
      {{"patch", "cephclusters.ceph.rook.io", "-n", "rook-ceph"}, "no"},
      {{"get", "cephclusters.ceph.rook.io/rook-ceph", "-n", "rook-ceph"}, "no"},
      {{"patch", "cephblockpools.ceph.rook.io", "-n", "rook-ceph"}, "no"},
      {{"delete", "deployments.apps", "-n", "rook-ceph"}, "no"},
      {{"create", "pods", "--subresource=exec", "-n", "rook-ceph"}, "no"},
      {{"patch", "configmaps/rook-ceph-operator-config", "-n", "rook-ceph"}, "no"},
      {{"delete", "pods", "--all-namespaces"}, "no"},
      {{"delete", "pods", "-n", "default"}, "no"},
      {{"delete", "pods", "-n", "kube-system"}, "no"},
      {{"create", "pods", "--subresource=eviction", "-n", "default"}, "no"},
      {{"update", "leases/ekco-leader", "-n", "kurl"}, "no"},
      {{"create", "leases", "-n", "kurl"}, "no"},
      {{"delete", "leases/ekco-leader", "-n", "kurl"}, "no"},
      {{"get", "leases/other", "-n", "kurl"}, "no"},
      {{"list", "leases", "-n", "kube-node-lease"}, "no"},
      {{"get", "secrets/ekco-webhook-ca", "-n", "kurl"}, "no"},
      {{"get", "secrets/registry-pki", "-n", "kurl"}, "no"},
      {{"list", "secrets", "--all-namespaces"}, "no"},
      {{"create", "secrets", "-n", "kurl"}, "no"},
      {{"patch", "services/ekco", "-n", "kurl"}, "no"},
      {{"update", "mutatingwebhookconfigurations/pod-image-overrides.kurl.sh"}, "no"},
      {{"create", "mutatingwebhookconfigurations"}, "no"},
      {{"update", "configmaps/kubeadm-config", "-n", "kube-system"}, "no"},
      {{"update", "configmaps/ekco-maintenance", "-n", "kurl"}, "no"},
      {{"create", "configmaps", "-n", "kurl"}, "no"},
      {{"update", "configmaps/ekco-storage-migration", "-n", "kurl"}, "no"},
      {{"create", "events", "-n", "kube-system"}, "no"},
      {{"list", "endpoints", "-n", "default"}, "no"},
      {{"create", "hostjobs.ekco.kurl.sh"}, "no"},
      {{"update", "hostjobs.ekco.kurl.sh"}, "no"},
      {{"delete", "hostjobs.ekco.kurl.sh"}, "no"},
      {{"patch", "statefulsets.apps/kotsadm-rqlite", "-n", "default"}, "no"},
      {{"update", "statefulsets.apps/ha-minio", "--subresource=scale", "-n", "minio"}, "no"},
      {{"delete", "persistentvolumeclaims/minio-pv-claim", "-n", "minio"}, "no"},
      {{"patch", "prometheuses.monitoring.coreos.com/k8s", "-n", "monitoring"}, "no"},
      {{"update", "secret/contourcert", "-n", "projectcontour"}, "no"},
      {{"patch", "daemonset.apps/envoy", "-n", "projectcontour"}, "no"},
      {{"list", "storageclasses.storage.k8s.io"}, "no"},
      {{"impersonate", "serviceaccounts/ekco", "-n", "kurl"}, "no"},
  };
  for (const auto& c : worker_cases) {
    std::string what;
    for (const auto& a : c.args) what += a + " ";
    EXPECT_EQ(canIAs("ekco-node", c.args), std::string(c.answer) + "\n")
        << "kubectl auth can-i --as=system:serviceaccount:kurl:ekco-node " << what;
  }
  // The impersonated review answers for the account, not the admin: the control-plane
  // account's answers through --as are its own.
  EXPECT_EQ(canIAs("ekco", {"delete", "nodes"}), "yes\n");
  EXPECT_EQ(canIAs("ekco", {"get", "secrets", "-n", "kurl"}), "no\n");

  // A forbidden call reads as kubectl users know it.
  base::ProcessResult secrets = kubectl({"get", "secrets", "-n", "kurl"}, sa_kubeconfig_);
  EXPECT_NE(secrets.exit_code, 0);
  EXPECT_THAT(secrets.stderr_data, HasSubstr("Error from server (Forbidden)"));
}

// The HostJob schema at `kubectl create`: a field of the wrong type is refused by the API,
// naming it, before any agent sees the job; a command given as one string is accepted, for the
// agents to reject it with a status message that says what to write instead; a misspelt field
// is not kept (kube-apiserver refuses it under kubectl's default --validate=strict; kubesim,
// which ignores fieldValidation, drops it as kube-apiserver does without).
TEST_F(DeployKubectlTest, TheHostJobSchemaRefusesWronglyTypedFieldsAtCreate) {
  base::ProcessResult crd = kubectl({"create", "-f", kSource + "/deploy/12-crd-hostjobs.yaml"});
  ASSERT_EQ(crd.exit_code, 0) << crd.stderr_data;
  const auto create = [&](const std::string& name, const std::string& spec) {
    const std::string file = dir_.path() + "/" + name + ".yaml";
    std::ofstream(file) << "apiVersion: ekco.kurl.sh/v1alpha1\nkind: HostJob\nmetadata: {name: "
                        << name << "}\nspec:\n"
                        << spec;
    return kubectl({"create", "-f", file});
  };
  const std::string well_formed =
      "  command: [/bin/rm, -rf, ecs]\n"
      "  hostPath: /var/lib\n"
      "  timeout: 10m\n"
      "  nodeSelectorTerms:\n"
      "  - matchExpressions:\n"
      "    - {key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}\n"
      "  - matchFields:\n"
      "    - {key: metadata.name, operator: In, values: [node-a]}\n";
  base::ProcessResult good = create("good", well_formed);
  ASSERT_EQ(good.exit_code, 0) << good.stderr_data;
  base::ProcessResult got = kubectl({"get", "hostjob", "good", "-o", "json"});
  ASSERT_EQ(got.exit_code, 0) << got.stderr_data;
  const json stored = json::parse(got.stdout_data)["spec"];
  EXPECT_EQ(stored["command"], json({"/bin/rm", "-rf", "ecs"}));
  EXPECT_EQ(stored["nodeSelectorTerms"][1]["matchFields"][0]["values"], json({"node-a"}));

  // The documented example, as its comment says to create it.
  base::ProcessResult example =
      kubectl({"create", "-f", kSource + "/docs/examples/hostjob-clean-worker-dir.yaml"});
  EXPECT_EQ(example.exit_code, 0) << example.stderr_data;

  base::ProcessResult shell = create("shell-string", "  command: rm -rf /var/lib/ecs\n");
  EXPECT_EQ(shell.exit_code, 0) << shell.stderr_data;

  struct Refused {
    const char* name;
    std::string spec;
    const char* field;
  };
  const std::vector<Refused> refused = {
      {"path-number", "  command: [/bin/true]\n  hostPath: 5\n", "spec.hostPath"},
      {"timeout-number", "  command: [/bin/true]\n  timeout: 600\n", "spec.timeout"},
      {"terms-string", "  command: [/bin/true]\n  nodeSelectorTerms: role=worker\n",
       "spec.nodeSelectorTerms"},
      {"values-numbers",
       "  command: [/bin/true]\n  nodeSelectorTerms:\n  - matchExpressions:\n"
       "    - {key: rank, operator: Gt, values: [3]}\n",
       "spec.nodeSelectorTerms[0].matchExpressions[0].values[0]"},
  };
  for (const Refused& r : refused) {
    base::ProcessResult created = create(r.name, r.spec);
    EXPECT_NE(created.exit_code, 0) << r.name;
    EXPECT_THAT(created.stderr_data, HasSubstr(std::string(r.field) + ": Invalid value")) << r.name;
    EXPECT_THAT(created.stderr_data, HasSubstr("must be of type")) << r.name;
    EXPECT_NE(kubectl({"get", "hostjob", r.name}).exit_code, 0) << r.name;
  }

  base::ProcessResult typo =
      create("typo", "  command: [/bin/true]\n  nodeSelectorTerm:\n  - matchFields: []\n");
  if (typo.exit_code == 0) {
    base::ProcessResult kept = kubectl({"get", "hostjob", "typo", "-o", "json"});
    ASSERT_EQ(kept.exit_code, 0) << kept.stderr_data;
    EXPECT_FALSE(json::parse(kept.stdout_data)["spec"].contains("nodeSelectorTerm"));
  }
}

}  // namespace
}  // namespace ekco::agent
