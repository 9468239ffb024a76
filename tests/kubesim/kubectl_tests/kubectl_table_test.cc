// Server-side Tables, proven with the real kubectl: `kubectl get` prints the columns the server
// sends (pods, nodes, deployments, -o wide), with ages from the server's clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/kubectl_tests/kubectl_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json pod(const std::string& name, json status, json meta = json::object()) {
  meta["name"] = name;
  meta["namespace"] = "default";
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", meta},
      {"spec", {{"nodeName", "node-a"}, {"containers", {{{"name", "main"}, {"image", "app:1"}}}}}},
      {"status", std::move(status)}};
}

json running(int restarts = 0) {
  return {{"name", "main"},
          {"ready", true},
          {"restartCount", restarts},
          {"image", "app:1"},
          {"imageID", ""},
          {"state", {{"running", {{"startedAt", "2023-11-14T22:13:20Z"}}}}}};
}

using KubectlTableTest = testing::KubectlFixture;

TEST_F(KubectlTableTest, GetPodsShowsReadyStatusRestartsAndAgeAndWideAddsTheNode) {
  // The manual clock starts at 2023-11-14T22:13:20Z.
  start(
      {pod("web",
           {{"phase", "Running"}, {"podIP", "10.32.0.5"}, {"containerStatuses", {running()}}}),
       pod("crash",
           {{"phase", "Running"},
            {"containerStatuses",
             {{{"name", "main"},
               {"ready", false},
               {"restartCount", 4},
               {"image", "app:1"},
               {"imageID", ""},
               {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
               {"lastState",
                {{"terminated", {{"exitCode", 1}, {"finishedAt", "2023-11-14T22:13:20Z"}}}}}}}}}),
       pod("done", {{"phase", "Succeeded"},
                    {"containerStatuses",
                     {{{"name", "main"},
                       {"ready", false},
                       {"restartCount", 0},
                       {"image", "app:1"},
                       {"imageID", ""},
                       {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}}}}}),
       pod("new", {{"phase", "Pending"}}),
       pod("going", {{"phase", "Running"}, {"containerStatuses", {running(1)}}},
           {{"deletionTimestamp", "2023-11-14T22:14:00Z"}, {"finalizers", {"example.com/hold"}}})});
  clock_.advance(std::chrono::seconds(150));
  auto r = kubectl({"get", "pods"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data,
            "NAME    READY   STATUS             RESTARTS        AGE\n"
            "crash   0/1     CrashLoopBackOff   4 (2m30s ago)   2m30s\n"
            "done    0/1     Completed          0               2m30s\n"
            "going   1/1     Terminating        1               2m30s\n"
            "new     0/1     Pending            0               2m30s\n"
            "web     1/1     Running            0               2m30s\n");
  auto wide = kubectl({"get", "pod", "web", "-o", "wide"});
  EXPECT_EQ(wide.stdout_data,
            "NAME   READY   STATUS    RESTARTS   AGE     IP          NODE     NOMINATED NODE   "
            "READINESS GATES\n"
            "web    1/1     Running   0          2m30s   10.32.0.5   node-a   <none>           "
            "<none>\n");
}

TEST_F(KubectlTableTest, GetNodesAndDeploymentsShowTheirColumns) {
  json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", "cp-1"}, {"labels", {{"node-role.kubernetes.io/control-plane", ""}}}}},
      {"spec", {{"unschedulable", true}}},
      {"status",
       {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
        {"addresses", {{{"type", "InternalIP"}, {"address", "10.0.0.11"}}}},
        {"nodeInfo",
         {{"kubeletVersion", "v1.32.4"},
          {"osImage", "Debian GNU/Linux 12 (bookworm)"},
          {"kernelVersion", "6.1.0-28-amd64"},
          {"containerRuntimeVersion", "containerd://1.7.24"}}}}}};
  json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "web"}, {"namespace", "default"}}},
      {"spec",
       {{"replicas", 3},
        {"selector", {{"matchLabels", {{"app", "web"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "web"}}}}},
          {"spec", {{"containers", {{{"name", "nginx"}, {"image", "nginx:1.27"}}}}}}}}}},
      {"status",
       {{"replicas", 3}, {"readyReplicas", 2}, {"updatedReplicas", 3}, {"availableReplicas", 2}}}};
  start({node, deployment});
  clock_.advance(std::chrono::hours(50));
  auto nodes = kubectl({"get", "nodes", "-o", "wide"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.stderr_data;
  EXPECT_EQ(
      nodes.stdout_data,
      "NAME   STATUS                     ROLES           AGE    VERSION   INTERNAL-IP   "
      "EXTERNAL-IP   OS-IMAGE                         KERNEL-VERSION   CONTAINER-RUNTIME\n"
      "cp-1   Ready,SchedulingDisabled   control-plane   2d2h   v1.32.4   10.0.0.11     "
      "<none>        Debian GNU/Linux 12 (bookworm)   6.1.0-28-amd64   containerd://1.7.24\n");
  auto deployments = kubectl({"get", "deployments"});
  EXPECT_EQ(deployments.stdout_data,
            "NAME   READY   UP-TO-DATE   AVAILABLE   AGE\n"
            "web    2/3     3            2           2d2h\n");
  auto wide = kubectl({"get", "deployment", "web", "-o", "wide"});
  EXPECT_THAT(wide.stdout_data, HasSubstr("CONTAINERS   IMAGES       SELECTOR"));
  EXPECT_THAT(wide.stdout_data, HasSubstr("nginx        nginx:1.27   app=web"));
  // A CRD has no printer: apiserver's default convertor, whose "Created At" is a date.
  auto crds = kubectl({"get", "crd", "cephclusters.ceph.rook.io"});
  EXPECT_EQ(crds.stdout_data,
            "NAME                        CREATED AT\n"
            "cephclusters.ceph.rook.io   2023-11-14T22:13:20Z\n");
}

}  // namespace
}  // namespace ekco::kubesim
