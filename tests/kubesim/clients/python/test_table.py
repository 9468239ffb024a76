"""Server-side Tables (what `kubectl get` asks for), read through the official Python client with
the Table Accept header: the real columns and cells for pods, nodes and deployments, `object`
per includeObject, and the printer columns of a custom resource."""
import re
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, unique

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


class Table(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)

    def table(self, path, **query):
        return self.api.call_api(path, "GET", query_params=list(query.items()),
                                 header_params={"Accept": TABLE}, response_type="object",
                                 _return_http_data_only=True)

    def pod(self, name, status):
        self.core.create_namespaced_pod("default", client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(node_name="node-x", containers=[
                client.V1Container(name="main", image="busybox")])))
        self.addCleanup(self.core.delete_namespaced_pod, name, "default", grace_period_seconds=0)
        self.core.patch_namespaced_pod_status(name, "default", {"status": status})

    def test_pods_have_the_real_columns_and_cells(self):
        running, crashing = unique("run"), unique("crash")
        self.pod(running, {"phase": "Running", "podIP": "10.32.0.9", "containerStatuses": [
            {"name": "main", "ready": True, "restartCount": 0, "image": "busybox", "imageID": "",
             "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]})
        self.pod(crashing, {"phase": "Running", "containerStatuses": [
            {"name": "main", "ready": False, "restartCount": 3, "image": "busybox",
             "imageID": "",
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1,
                                          "finishedAt": "2026-01-01T00:00:00Z"}}}]})
        table = self.table("/api/v1/namespaces/default/pods")
        self.assertEqual(table["kind"], "Table")
        self.assertEqual(table["apiVersion"], "meta.k8s.io/v1")
        self.assertEqual([(c["name"], c["priority"]) for c in table["columnDefinitions"]],
                         [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0),
                          ("IP", 1), ("Node", 1), ("Nominated Node", 1),
                          ("Readiness Gates", 1)])
        rows = {r["cells"][0]: r for r in table["rows"]}
        cells = rows[running]["cells"]
        self.assertEqual(cells[1:4], ["1/1", "Running", "0"])
        self.assertRegex(cells[4], r"^\d+s$")
        self.assertEqual(cells[5:], ["10.32.0.9", "node-x", "<none>", "<none>"])
        cells = rows[crashing]["cells"]
        self.assertEqual(cells[1:3], ["0/1", "CrashLoopBackOff"])
        self.assertRegex(cells[3], r"^3 \(\S+ ago\)$")
        # includeObject: PartialObjectMetadata by default, the object, or nothing.
        self.assertEqual(rows[running]["object"]["kind"], "PartialObjectMetadata")
        self.assertEqual(rows[running]["object"]["metadata"]["name"], running)
        full = self.table("/api/v1/namespaces/default/pods", includeObject="Object")
        self.assertEqual({r["object"]["kind"] for r in full["rows"]}, {"Pod"})
        bare = self.table("/api/v1/namespaces/default/pods", includeObject="None")
        self.assertNotIn("object", bare["rows"][0])
        one = self.table(f"/api/v1/namespaces/default/pods/{running}")
        self.assertEqual(len(one["rows"]), 1)
        self.assertEqual(one["rows"][0]["cells"][0], running)

    def test_nodes_and_deployments(self):
        name = unique("node")
        self.core.create_node(client.V1Node(metadata=client.V1ObjectMeta(
            name=name, labels={"node-role.kubernetes.io/control-plane": ""})))
        self.addCleanup(self.core.delete_node, name)
        self.core.patch_node_status(name, {"status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
            "nodeInfo": {"kubeletVersion": "v1.32.4", "osImage": "Debian GNU/Linux 12",
                         "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7",
                         "machineID": "", "systemUUID": "", "bootID": "",
                         "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"}}})
        self.core.patch_node(name, {"spec": {"unschedulable": True}})
        table = self.table(f"/api/v1/nodes/{name}")
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Status", "Roles", "Age", "Version", "Internal-IP",
                          "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"])
        cells = table["rows"][0]["cells"]
        self.assertEqual(cells[:3], [name, "Ready,SchedulingDisabled", "control-plane"])
        self.assertEqual(cells[4:], ["v1.32.4", "10.0.0.7", "<none>", "Debian GNU/Linux 12",
                                     "6.1.0", "containerd://1.7"])
        apps = client.AppsV1Api(self.api)
        dep = unique("web")
        apps.create_namespaced_deployment("default", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": dep},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": dep}},
                     "template": {"metadata": {"labels": {"app": dep}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
        self.addCleanup(apps.delete_namespaced_deployment, dep, "default")
        table = self.table(f"/apis/apps/v1/namespaces/default/deployments/{dep}")
        self.assertEqual([(c["name"], c["type"]) for c in table["columnDefinitions"]],
                         [("Name", "string"), ("Ready", "string"), ("Up-to-date", "integer"),
                          ("Available", "integer"), ("Age", "string"),
                          ("Containers", "string"), ("Images", "string"),
                          ("Selector", "string")])
        cells = table["rows"][0]["cells"]
        self.assertEqual(cells[0], dep)
        self.assertRegex(cells[1], r"^\d/3$")
        self.assertEqual(cells[5:], ["web", "nginx", f"app={dep}"])

    def test_other_kinds_get_name_and_age(self):
        table = self.table("/api/v1/namespaces/default/serviceaccounts")
        self.assertEqual([c["name"] for c in table["columnDefinitions"]], ["Name", "Age"])

    def test_a_custom_resource_gets_its_printer_columns(self):
        table = self.table("/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters")
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "DataDirHostPath", "MonCount", "Age", "Phase", "Message",
                          "Health", "External", "FSID"])
        custom = client.CustomObjectsApi(self.api)
        name = unique("ceph")
        custom.create_namespaced_custom_object("ceph.rook.io", "v1", "default", "cephclusters", {
            "apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "metadata": {"name": name},
            "spec": {"dataDirHostPath": "/var/lib/rook", "mon": {"count": 3}}})
        self.addCleanup(custom.delete_namespaced_custom_object, "ceph.rook.io", "v1",
                        "default", "cephclusters", name)
        table = self.table(f"/apis/ceph.rook.io/v1/namespaces/default/cephclusters/{name}")
        cells = table["rows"][0]["cells"]
        self.assertEqual(cells[:3], [name, "/var/lib/rook", "3"])
        self.assertRegex(cells[3], r"^\d+s$")
        self.assertEqual(cells[4:], [None, None, None, None, None])

    def test_an_accept_header_without_anything_served_is_406(self):
        with self.assertRaises(ApiException) as caught:
            self.api.call_api("/api/v1/namespaces", "GET", header_params={"Accept": "text/csv"},
                              response_type="object", _return_http_data_only=True)
        self.assertEqual(caught.exception.status, 406)


if __name__ == "__main__":
    unittest.main()
