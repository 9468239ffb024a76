// kubesim's API semantics at the HTTP level (HTTPS with the admin client certificate): discovery,
// create/update/patch/delete, selectors, paging, subresources, eviction. (api_watch_test.cc:
// watches, exec, injected faults.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/os/process.h"
#include "tests/kubesim/api_tests/api_test_support.h"
#include "tests/kubesim/api_tests/test_client.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;
using testing::configMap;
using ::testing::HasSubstr;
using testing::names;
using testing::node;
using testing::pod;

TEST_F(ApiTest, WritesKubeconfigAndPemFilesAndServesVersion) {
  start();
  EXPECT_TRUE(std::filesystem::exists(server_->kubeconfigPath()));
  for (const char* f : {"ca.crt", "client.crt", "client.key", "server.crt", "server.key"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_ / f)) << f;
  }
  auto r = client_->get("/version");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["gitVersion"], "v1.32.4");
}

TEST_F(ApiTest, DiscoveryListsBuiltinsAndThePreloadedCustomResources) {
  ServerOptions options;
  options.objects.push_back({{"apiVersion", "ceph.rook.io/v1"},
                             {"kind", "CephCluster"},
                             {"metadata", {{"name", "rook-ceph"}, {"namespace", "rook-ceph"}}}});
  start(options);
  auto apis = client_->get("/apis").json();
  std::set<std::string> groups;
  for (const json& g : apis["groups"]) groups.insert(g["name"]);
  for (const char* g : {"apps", "coordination.k8s.io", "events.k8s.io", "policy",
                        "discovery.k8s.io", "ceph.rook.io", "monitoring.coreos.com"}) {
    EXPECT_TRUE(groups.count(g)) << g;
  }
  auto ceph = client_->get("/apis/ceph.rook.io/v1").json();
  std::map<std::string, bool> ceph_resources;
  for (const json& r : ceph["resources"]) ceph_resources[r["name"]] = r["namespaced"];
  EXPECT_EQ(ceph_resources, (std::map<std::string, bool>{{"cephblockpools", true},
                                                         {"cephblockpools/status", true},
                                                         {"cephclusters", true},
                                                         {"cephclusters/status", true},
                                                         {"cephfilesystems", true},
                                                         {"cephfilesystems/status", true},
                                                         {"cephobjectstores", true},
                                                         {"cephobjectstores/status", true}}));
  auto core = client_->get("/api/v1").json();
  std::set<std::string> resources;
  for (const json& r : core["resources"]) resources.insert(r["name"]);
  for (const char* r :
       {"nodes", "pods", "pods/status", "pods/eviction", "pods/exec", "namespaces", "configmaps",
        "secrets", "services", "endpoints", "events", "persistentvolumeclaims"}) {
    EXPECT_TRUE(resources.count(r)) << r;
  }
}

TEST_F(ApiTest, CreateSetsMetadataAndTheSecondCreateIsAlreadyExists) {
  start();
  auto first = client_->post("/api/v1/namespaces/kurl/configmaps", configMap("kurl", "a"));
  ASSERT_EQ(first.status, 201) << first.body;
  json meta = first.json()["metadata"];
  EXPECT_FALSE(meta["uid"].get<std::string>().empty());
  EXPECT_EQ(meta["creationTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_FALSE(meta.contains("generation"));  // ConfigMaps do not keep one
  EXPECT_EQ(meta["resourceVersion"], std::to_string(server_->store().resourceVersion()));

  auto second = client_->post("/api/v1/namespaces/kurl/configmaps", configMap("kurl", "a"));
  EXPECT_EQ(second.status, 409);
  json status = second.json();
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["reason"], "AlreadyExists");
  EXPECT_EQ(status["message"], "configmaps \"a\" already exists");
  EXPECT_EQ(status["details"]["name"], "a");
  EXPECT_EQ(status["details"]["kind"], "configmaps");
  EXPECT_EQ(status["code"], 409);
}

TEST_F(ApiTest, GenerateNameGivesEachCreateAUniqueName) {
  start();
  json cm = configMap("kurl", "");
  cm["metadata"].erase("name");
  cm["metadata"]["generateName"] = "ekco-";
  auto a = client_->post("/api/v1/namespaces/kurl/configmaps", cm).json();
  auto b = client_->post("/api/v1/namespaces/kurl/configmaps", cm).json();
  std::string na = a["metadata"]["name"];
  EXPECT_EQ(na.rfind("ekco-", 0), 0u);
  EXPECT_EQ(na.size(), 10u);
  EXPECT_NE(na, b["metadata"]["name"].get<std::string>());
}

TEST_F(ApiTest, ErrorsAreStatusBodies) {
  start();
  auto unknown = client_->get("/apis/example.com/v1/widgets");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.json()["reason"], "NotFound");
  auto missing = client_->get("/api/v1/namespaces/default/pods/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["message"], "pods \"nope\" not found");
  auto lease = client_->get("/apis/coordination.k8s.io/v1/namespaces/kurl/leases/nope").json();
  EXPECT_EQ(lease["message"], "leases.coordination.k8s.io \"nope\" not found");
  EXPECT_EQ(lease["details"]["group"], "coordination.k8s.io");
  auto malformed = client_->request("POST", "/api/v1/namespaces/kurl/configmaps", "{nope");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(malformed.json()["reason"], "BadRequest");
  auto bad_selector = client_->get("/api/v1/pods?labelSelector=a%20in%20b");
  EXPECT_EQ(bad_selector.status, 400);
  auto method = client_->request("POST", "/api/v1/nodes/node-a", "{}");
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.json()["reason"], "MethodNotAllowed");
}

TEST_F(ApiTest, UpdateWithStaleResourceVersionIsConflict) {
  start();
  json cm = client_->post("/api/v1/namespaces/kurl/configmaps", configMap("kurl", "a")).json();
  json changed = cm;
  changed["data"]["k"] = "v2";
  auto ok = client_->put("/api/v1/namespaces/kurl/configmaps/a", changed);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_NE(ok.json()["metadata"]["resourceVersion"], cm["metadata"]["resourceVersion"]);
  changed["data"]["k"] = "v3";  // still carries the first resourceVersion
  auto stale = client_->put("/api/v1/namespaces/kurl/configmaps/a", changed);
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.json()["reason"], "Conflict");
  EXPECT_THAT(stale.json()["message"].get<std::string>(),
              HasSubstr("the object has been modified"));
  // Without a resourceVersion the update is unconditional.
  changed["metadata"].erase("resourceVersion");
  EXPECT_EQ(client_->put("/api/v1/namespaces/kurl/configmaps/a", changed).status, 200);
  EXPECT_EQ((*server_->get("configmaps", "kurl", "a"))["data"]["k"], "v3");
}

TEST_F(ApiTest, UpdateOfMissingObjectIsNotFound) {
  start();
  EXPECT_EQ(client_->put("/api/v1/namespaces/kurl/configmaps/a", configMap("kurl", "a")).status,
            404);
}

TEST_F(ApiTest, MainResourceKeepsStatusAndStatusSubresourceChangesOnlyStatus) {
  start();
  json n = *server_->get("nodes", "", "node-a");
  n["status"]["conditions"][0]["status"] = "False";
  n["spec"]["unschedulable"] = true;
  auto main = client_->put("/api/v1/nodes/node-a", n).json();
  EXPECT_EQ(main["status"]["conditions"][0]["status"], "True");
  EXPECT_EQ(main["spec"]["unschedulable"], true);
  EXPECT_FALSE(main["metadata"].contains("generation"));  // nor do Nodes

  n = main;
  n["status"]["conditions"][0]["status"] = "Unknown";
  n["spec"]["unschedulable"] = false;
  auto status = client_->put("/api/v1/nodes/node-a/status", n).json();
  EXPECT_EQ(status["status"]["conditions"][0]["status"], "Unknown");
  EXPECT_EQ(status["spec"]["unschedulable"], true);
}

TEST_F(ApiTest, LabelSelectorsSupportEveryOperator) {
  start();
  ASSERT_TRUE(server_->put(pod("ns", "a", "node-a", {{"app", "web"}, {"tier", "fe"}})));
  ASSERT_TRUE(server_->put(pod("ns", "b", "node-a", {{"app", "db"}})));
  ASSERT_TRUE(server_->put(pod("ns", "c", "node-a", json::object())));
  auto list = [&](const std::string& sel) {
    return names(client_->get("/api/v1/namespaces/ns/pods?labelSelector=" + sel).json());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(list("app%3Dweb"), V{"a"});
  EXPECT_EQ(list("app%3D%3Dweb"), V{"a"});
  EXPECT_EQ(list("app!%3Dweb"), (V{"b", "c"}));
  EXPECT_EQ(list("app+in+(web,db)"), (V{"a", "b"}));
  EXPECT_EQ(list("app%20notin%20(web)"), (V{"b", "c"}));
  EXPECT_EQ(list("app"), (V{"a", "b"}));
  EXPECT_EQ(list("!app"), V{"c"});
  EXPECT_EQ(list("app,tier%3Dfe"), V{"a"});
}

TEST_F(ApiTest, FieldSelectorsMatchNameNamespaceNodeAndPhase) {
  start();
  ASSERT_TRUE(server_->put(pod("x", "a", "node-a")));
  ASSERT_TRUE(server_->put(pod("y", "b", "node-b")));
  json done = pod("y", "c", "node-b");
  done["status"]["phase"] = "Succeeded";
  ASSERT_TRUE(server_->put(done));
  auto list = [&](const std::string& sel) {
    return names(client_->get("/api/v1/pods?fieldSelector=" + sel).json());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(list("spec.nodeName%3Dnode-b"), (V{"b", "c"}));
  EXPECT_EQ(list("spec.nodeName!%3Dnode-b"), V{"a"});
  EXPECT_EQ(list("metadata.namespace%3Dy,status.phase!%3DSucceeded"), V{"b"});
  EXPECT_EQ(list("metadata.name%3D%3Dc"), V{"c"});
}

TEST_F(ApiTest, ListPagesWithLimitAndContinueInStableOrder) {
  start();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(server_->put(configMap("ns", "cm-" + std::to_string(i))));
  std::vector<std::string> all;
  std::string token;
  int pages = 0;
  do {
    json page = client_
                    ->get("/api/v1/namespaces/ns/configmaps?limit=2" +
                          (token.empty() ? "" : "&continue=" + token))
                    .json();
    for (const std::string& n : names(page)) all.push_back(n);
    token = page["metadata"].value("continue", "");
    EXPECT_FALSE(page["metadata"]["resourceVersion"].get<std::string>().empty());
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(all, (std::vector<std::string>{"cm-0", "cm-1", "cm-2", "cm-3", "cm-4"}));
}

TEST_F(ApiTest, PagesOfOneNamespaceStayInsideItAndExactPagesEndWithoutAToken) {
  start();
  // "ns" sorts between "a" and "ns-b"; its pages must neither start early nor run on.
  for (const char* ns : {"a", "ns", "ns-b", "z"}) {
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(server_->put(configMap(ns, "cm-" + std::to_string(i))));
  }
  json first = client_->get("/api/v1/namespaces/ns/configmaps?limit=1").json();
  EXPECT_EQ(names(first), std::vector<std::string>{"cm-0"});
  std::string token = first["metadata"]["continue"];
  json second = client_->get("/api/v1/namespaces/ns/configmaps?limit=1&continue=" + token).json();
  EXPECT_EQ(names(second), std::vector<std::string>{"cm-1"});
  EXPECT_FALSE(second["metadata"].contains("continue"));  // nothing left in "ns"
  json all = client_->get("/api/v1/configmaps?limit=8").json();
  EXPECT_EQ(all["items"].size(), 8U);
  EXPECT_FALSE(all["metadata"].contains("continue"));  // exactly one full page
}

TEST_F(ApiTest, ContinueTokenFromBeforeCompactionIsGoneExpired) {
  start();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(server_->put(configMap("ns", "cm-" + std::to_string(i))));
  json page = client_->get("/api/v1/namespaces/ns/configmaps?limit=1").json();
  std::string token = page["metadata"]["continue"];
  ASSERT_TRUE(server_->put(configMap("ns", "cm-9")));
  server_->compactHistory();
  auto expired = client_->get("/api/v1/namespaces/ns/configmaps?limit=1&continue=" + token);
  EXPECT_EQ(expired.status, 410);
  EXPECT_EQ(expired.json()["reason"], "Expired");
  auto exact =
      client_->get("/api/v1/namespaces/ns/configmaps?resourceVersion=2&resourceVersionMatch=Exact");
  EXPECT_EQ(exact.status, 410);
}

TEST_F(ApiTest, MergePatchDeletesNullsAndResourceVersionInPatchIsAPrecondition) {
  start();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  auto r = client_->request("PATCH", "/api/v1/namespaces/ns/configmaps/a",
                            R"({"data":{"k":null,"n":"1"},"metadata":{"labels":{"x":"y"}}})",
                            "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["data"], (json{{"n", "1"}}));
  EXPECT_EQ(r.json()["metadata"]["labels"]["x"], "y");
  auto stale =
      client_->request("PATCH", "/api/v1/namespaces/ns/configmaps/a",
                       R"({"metadata":{"resourceVersion":"1"}})", "application/merge-patch+json");
  EXPECT_EQ(stale.status, 409);
}

TEST_F(ApiTest, JsonPatchAppliesOperationsAndAFailedTestIs422Invalid) {
  start();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  auto ok = client_->request(
      "PATCH", "/api/v1/namespaces/ns/configmaps/a",
      R"([{"op":"test","path":"/data/k","value":"v"},{"op":"replace","path":"/data/k","value":"w"}])",
      "application/json-patch+json");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["data"]["k"], "w");
  auto failed = client_->request("PATCH", "/api/v1/namespaces/ns/configmaps/a",
                                 R"([{"op":"test","path":"/data/k","value":"v"}])",
                                 "application/json-patch+json");
  EXPECT_EQ(failed.status, 422);
  EXPECT_EQ(failed.json()["reason"], "Invalid");
  EXPECT_EQ((*server_->get("configmaps", "ns", "a"))["data"]["k"], "w");
  // Server-side apply is served (managed_fields.h) and, as PatchOptions validation has it,
  // needs a fieldManager; an unknown patch type is 415.
  auto no_manager = client_->request("PATCH", "/api/v1/namespaces/ns/configmaps/a", "{}",
                                     "application/apply-patch+yaml");
  EXPECT_EQ(no_manager.status, 422);
  EXPECT_EQ(no_manager.json()["message"],
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required "
            "for apply patch");
  auto unsupported =
      client_->request("PATCH", "/api/v1/namespaces/ns/configmaps/a", "{}", "application/xml");
  EXPECT_EQ(unsupported.status, 415);
}

TEST_F(ApiTest, StrategicMergePatchMergesContainersByNameAndReplacesTaints) {
  start();
  json n = *server_->get("nodes", "", "node-a");
  n["spec"]["taints"] = {{{"key", "a"}, {"effect", "NoSchedule"}}};
  ASSERT_TRUE(server_->put(n));
  auto r = client_->request(
      "PATCH", "/api/v1/nodes/node-a",
      R"({"spec":{"unschedulable":true,"taints":[{"key":"b","effect":"NoExecute"}]}})",
      "application/strategic-merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["spec"]["taints"], (json{{{"key", "b"}, {"effect", "NoExecute"}}}));
  r = client_->request("PATCH", "/api/v1/nodes/node-a", R"({"spec":{"unschedulable":null}})",
                       "application/strategic-merge-patch+json");
  EXPECT_FALSE(r.json()["spec"].contains("unschedulable"));

  // A pod may not lose a container (ValidatePodUpdate), a Deployment's template may.
  json d = {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", {{"name", "p"}, {"namespace", "ns"}}},
            {"spec",
             {{"selector", {{"matchLabels", {{"app", "p"}}}}},
              {"template",
               {{"metadata", {{"labels", {{"app", "p"}}}}},
                {"spec",
                 {{"containers",
                   {{{"name", "main"}, {"image", "busybox"}},
                    {{"name", "sidecar"}, {"image", "envoy"}}}}}}}}}}};
  ASSERT_TRUE(server_->put(d));
  r = client_->request(
      "PATCH", "/apis/apps/v1/namespaces/ns/deployments/p",
      R"({"metadata":{"finalizers":["a"]},"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"envoy:2"},{"name":"main","$patch":"delete"}]}}}})",
      "application/strategic-merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  const json patched = r.json();
  const json& containers = patched["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(containers.size(), 1u);
  EXPECT_EQ(containers[0]["name"], "sidecar");
  EXPECT_EQ(containers[0]["image"], "envoy:2");
  EXPECT_EQ(r.json()["metadata"]["finalizers"], (json{"a"}));
}

TEST_F(ApiTest, ScaleSubresourceReadsAndWritesSpecReplicas) {
  start();
  json containers = {{{"name", "d"}, {"image", "d"}}};
  json tmpl = {{"metadata", {{"labels", {{"app", "d"}}}}}, {"spec", {{"containers", containers}}}};
  json spec = {
      {"replicas", 2}, {"selector", {{"matchLabels", {{"app", "d"}}}}}, {"template", tmpl}};
  json deploy = {{"apiVersion", "apps/v1"},
                 {"kind", "Deployment"},
                 {"metadata", {{"name", "d"}, {"namespace", "ns"}}},
                 {"spec", spec}};
  ASSERT_TRUE(server_->put(deploy));
  auto scale = client_->get("/apis/apps/v1/namespaces/ns/deployments/d/scale").json();
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale["spec"]["replicas"], 2);
  EXPECT_EQ(scale["status"]["selector"], "app=d");
  auto patched = client_->request("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale",
                                  R"({"spec":{"replicas":5}})", "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ((*server_->get("deployments.apps", "ns", "d"))["spec"]["replicas"], 5);
}

TEST_F(ApiTest, GracefulPodDeletionWaitsForTheGracePeriodOnAReadyNode) {
  start();
  json p = pod("ns", "a", "node-a");
  p["spec"]["terminationGracePeriodSeconds"] = 10;
  ASSERT_TRUE(server_->put(p));
  auto r = client_->request("DELETE", "/api/v1/namespaces/ns/pods/a");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["metadata"]["deletionTimestamp"], "2023-11-14T22:13:30Z");
  EXPECT_EQ(r.json()["metadata"]["deletionGracePeriodSeconds"], 10);
  server_->runKubelet();
  EXPECT_TRUE(server_->get("pods", "ns", "a"));
  clock_.advance(std::chrono::seconds(10));
  server_->runKubelet();
  EXPECT_FALSE(server_->get("pods", "ns", "a"));
}

TEST_F(ApiTest, PodsOnANotReadyNodeStayTerminatingUntilForceDeleted) {
  start();
  ASSERT_TRUE(server_->put(pod("ns", "b", "node-b")));
  ASSERT_EQ(client_->request("DELETE", "/api/v1/namespaces/ns/pods/b?gracePeriodSeconds=5").status,
            200);
  clock_.advance(std::chrono::hours(1));
  server_->runKubelet();
  auto stuck = server_->get("pods", "ns", "b");
  ASSERT_TRUE(stuck);
  EXPECT_EQ((*stuck)["metadata"]["deletionGracePeriodSeconds"], 5);
  auto force = client_->request("DELETE", "/api/v1/namespaces/ns/pods/b",
                                R"({"gracePeriodSeconds":0,"propagationPolicy":"Background"})");
  EXPECT_EQ(force.status, 200);
  EXPECT_FALSE(server_->get("pods", "ns", "b"));
}

TEST_F(ApiTest, FinalizersKeepADeletedObjectUntilTheyAreRemoved) {
  start();
  json cm = configMap("ns", "a");
  cm["metadata"]["finalizers"] = {"example.com/hold"};
  ASSERT_TRUE(server_->put(cm));
  ASSERT_EQ(client_->request("DELETE", "/api/v1/namespaces/ns/configmaps/a").status, 200);
  auto held = server_->get("configmaps", "ns", "a");
  ASSERT_TRUE(held);
  EXPECT_TRUE((*held)["metadata"].contains("deletionTimestamp"));
  auto r = client_->request("PATCH", "/api/v1/namespaces/ns/configmaps/a",
                            R"({"metadata":{"finalizers":null}})", "application/merge-patch+json");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(server_->get("configmaps", "ns", "a"));
}

TEST_F(ApiTest, DeletePreconditionsMismatchIsConflict) {
  start();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  auto r = client_->request("DELETE", "/api/v1/namespaces/ns/configmaps/a",
                            R"({"preconditions":{"uid":"other"}})");
  EXPECT_EQ(r.status, 409);
  EXPECT_THAT(r.json()["message"].get<std::string>(), HasSubstr("Precondition failed"));
  EXPECT_TRUE(server_->get("configmaps", "ns", "a"));
}

TEST_F(ApiTest, EvictionDeletesGracefullyUnlessABudgetForbidsIt) {
  start();
  ASSERT_TRUE(server_->put(pod("ns", "a", "node-a", {{"app", "web"}})));
  json b = pod("ns", "b", "node-a", {{"app", "db"}});
  b["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
  ASSERT_TRUE(server_->put(b));
  json pdb = {{"apiVersion", "policy/v1"},
              {"kind", "PodDisruptionBudget"},
              {"metadata", {{"name", "db"}, {"namespace", "ns"}}},
              {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "db"}}}}}}}};
  ASSERT_TRUE(server_->put(pdb));
  // The simulated disruption controller observes the budget: b is its one healthy pod, so no
  // disruption is allowed.
  bool observed = false;
  for (int i = 0; i < 250 && !observed; ++i) {
    auto got = server_->get("poddisruptionbudgets.policy", "ns", "db");
    observed = got && (*got).value("status", json::object()).value("observedGeneration", 0) == 1;
    if (!observed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(observed);
  json eviction = {
      {"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", "a"}}}};
  auto ok = client_->post("/api/v1/namespaces/ns/pods/a/eviction", eviction);
  EXPECT_EQ(ok.status, 201) << ok.body;
  EXPECT_TRUE((*server_->get("pods", "ns", "a"))["metadata"].contains("deletionTimestamp"));
  eviction["metadata"]["name"] = "b";
  auto blocked = client_->post("/api/v1/namespaces/ns/pods/b/eviction", eviction);
  EXPECT_EQ(blocked.status, 429);
  EXPECT_EQ(blocked.json()["details"]["causes"][0]["reason"], "DisruptionBudget");
}

// ServerOptions::more_apiservers: a second apiserver of the same cluster (as kubeadm's primaries)
// serves its own certificate files, authenticates with the cluster's CA and reads the one store.
TEST(KubesimApiservers, AMoreApiserverServesItsOwnCertificateOverTheSameStore) {
  base::SystemClock clock;
  std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-more-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = tmpl;
  auto other = generatePki();  // the second apiserver's pair, of another CA
  ASSERT_TRUE(other);
  std::ofstream(dir / "other.crt") << other->server_cert_pem;
  std::ofstream(dir / "other.key") << other->server_key_pem;
  std::ofstream(dir / "other-ca.crt") << other->ca_cert_pem;
  ServerOptions options{.out_dir = (dir / "sim").string(),
                        .more_apiservers = {{.serving_cert_file = (dir / "other.crt").string(),
                                             .serving_key_file = (dir / "other.key").string()}}};
  auto server = Server::start(std::move(options));
  ASSERT_TRUE(server) << server.error().message();
  ASSERT_TRUE((*server)->put(configMap("default", "written-through-the-first")));
  const std::string sim = (dir / "sim").string();
  base::BoostProcessRunner runner(clock);
  auto curl = [&](const std::string& ca) {
    auto r =
        runner.run({.argv = {"curl", "-sS", "--cacert", ca, "--cert", sim + "/client.crt", "--key",
                             sim + "/client.key",
                             "https://127.0.0.1:" + std::to_string((*server)->apiserverPort(0)) +
                                 "/api/v1/namespaces/default/configmaps/written-through-the-first"},
                    .timeout = std::chrono::seconds(30)});
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : base::ProcessResult{};
  };
  // Its own certificate: the cluster's CA does not verify it, its own CA does.
  EXPECT_NE(curl(sim + "/ca.crt").exit_code, 0);
  const base::ProcessResult ok = curl((dir / "other-ca.crt").string());
  EXPECT_EQ(ok.exit_code, 0) << ok.stderr_data;
  EXPECT_THAT(ok.stdout_data, HasSubstr("\"name\":\"written-through-the-first\""));
  EXPECT_NE((*server)->apiserverPort(0), (*server)->port());
  server->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ekco::kubesim
