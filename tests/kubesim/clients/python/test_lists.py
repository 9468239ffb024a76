"""Lists and watches through the official Python client: consistent pages, exact lists, the
API's 400/410/422 answers, typed field selectors, watch=True, sendInitialEvents and finalizers."""
import json
import threading
import unittest

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, status_of, unique

NS = "default"


class Lists(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)
        self.label = unique("l")

    def make(self, name, finalizers=None):
        return self.core.create_namespaced_config_map(NS, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels={"set": self.label},
                                         finalizers=finalizers),
            data={"k": "v"}))

    def raw(self, path, query):
        """GET path with exact query parameters; the decoded body or stream lines."""
        resp = self.api.call_api(path, "GET", query_params=query, auth_settings=["BearerToken"],
                                 _preload_content=False)
        return resp[0]

    def test_later_pages_are_the_first_pages_snapshot(self):
        names = [f"{self.label}-{i}" for i in range(4)]
        for n in names:
            self.make(n)
        sel = f"set={self.label}"
        first = self.core.list_namespaced_config_map(NS, label_selector=sel, limit=2)
        self.assertEqual([i.metadata.name for i in first.items], names[:2])
        self.core.delete_namespaced_config_map(names[3], NS)
        self.make(f"{self.label}-25")
        second = self.core.list_namespaced_config_map(NS, label_selector=sel, limit=2,
                                                      _continue=first.metadata._continue)
        self.assertEqual([i.metadata.name for i in second.items], names[2:])
        self.assertEqual(second.metadata.resource_version, first.metadata.resource_version)
        self.assertIsNone(second.metadata._continue)

    def test_exact_list_shows_the_past_and_bad_options_are_rejected(self):
        a = self.make(f"{self.label}-a")
        rv = a.metadata.resource_version
        self.core.patch_namespaced_config_map(a.metadata.name, NS, {"data": {"k": "new"}})
        past = self.core.list_namespaced_config_map(
            NS, label_selector=f"set={self.label}", resource_version=rv,
            resource_version_match="Exact")
        self.assertEqual(past.items[0].data, {"k": "v"})
        self.assertEqual(past.metadata.resource_version, rv)
        with self.assertRaises(ApiException) as ctx:
            self.core.list_namespaced_config_map(NS, resource_version_match="Exact")
        self.assertEqual(ctx.exception.status, 422)
        self.assertEqual(status_of(ctx.exception)["details"]["causes"][0]["field"],
                         "resourceVersionMatch")
        with self.assertRaises(ApiException) as ctx:
            self.core.list_pod_for_all_namespaces(field_selector="spec.containers=x")
        self.assertEqual(ctx.exception.status, 400)
        self.assertEqual(status_of(ctx.exception)["message"],
                         "field label not supported: spec.containers")

    def test_unschedulable_false_matches_nodes_without_the_field(self):
        name = unique("node")
        self.core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
        try:
            found = self.core.list_node(field_selector="spec.unschedulable=false")
            self.assertIn(name, [n.metadata.name for n in found.items])
            self.core.patch_node(name, {"spec": {"unschedulable": True}})
            found = self.core.list_node(field_selector="spec.unschedulable=false")
            self.assertNotIn(name, [n.metadata.name for n in found.items])
        finally:
            self.core.delete_node(name)

    def test_send_initial_events_ends_with_the_annotated_bookmark(self):
        self.make(f"{self.label}-a")
        self.make(f"{self.label}-b")
        resp = self.raw(f"/api/v1/namespaces/{NS}/configmaps", [
            ("watch", "True"), ("labelSelector", f"set={self.label}"),
            ("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"), ("timeoutSeconds", "5")])
        events = []
        for line in resp.stream(decode_content=True):
            for part in line.decode().splitlines():
                if part.strip():
                    events.append(json.loads(part))
            if len(events) >= 3:
                break
        resp.release_conn()
        self.assertEqual([e["type"] for e in events], ["ADDED", "ADDED", "BOOKMARK"])
        self.assertEqual(events[2]["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})

    def test_removing_the_last_finalizer_is_seen_only_as_deleted(self):
        name = f"{self.label}-f"
        self.make(name, finalizers=["example.com/hold"])
        self.core.delete_namespaced_config_map(name, NS)
        rv = self.core.read_namespaced_config_map(name, NS).metadata.resource_version
        seen = []
        w = watch.Watch()

        def consume():
            for event in w.stream(self.core.list_namespaced_config_map, NS,
                                  field_selector=f"metadata.name={name}",
                                  resource_version=rv, timeout_seconds=5):
                seen.append(event["type"])
                if event["type"] == "DELETED":
                    w.stop()

        t = threading.Thread(target=consume)
        t.start()
        self.core.patch_namespaced_config_map(name, NS, {"metadata": {"finalizers": None}})
        t.join(10)
        self.assertEqual(seen, ["DELETED"])


if __name__ == "__main__":
    unittest.main()
