"""core/v1 and events.k8s.io/v1 Events as two views of one set, through the official Python
client: each view sees what the other created (converted), one resourceVersion sequence,
watches and field selectors on both, deletion through either."""
import datetime
import threading
import unittest

from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from kubesim_client import api_client, status_of, unique

NS = "default"


class EventViews(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)
        self.dyn = DynamicClient(self.api)
        # The typed EventsV1Event refuses eventTime null (client-side validation), which legacy
        # events have in the real API too: read the view through the dynamic client.
        self.view = self.dyn.resources.get(api_version="events.k8s.io/v1", kind="Event")

    def core_event(self, name, target):
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        return self.core.create_namespaced_event(NS, client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=name),
            involved_object=client.V1ObjectReference(kind="Pod", name=target, namespace=NS),
            reason="Started", message="started " + target, type="Normal",
            source=client.V1EventSource(component="kubelet", host="node-a"),
            first_timestamp=now, last_timestamp=now, count=3))

    def test_a_core_event_is_seen_converted_through_events_k8s_io(self):
        name, target = unique("ev"), unique("pod")
        created = self.core_event(name, target)
        ev = self.view.get(name=name, namespace=NS).to_dict()
        self.assertEqual(ev["apiVersion"], "events.k8s.io/v1")
        self.assertEqual(ev["note"], "started " + target)
        self.assertEqual(ev["regarding"]["name"], target)
        self.assertEqual(ev["deprecatedSource"], {"component": "kubelet", "host": "node-a"})
        self.assertEqual(ev["deprecatedCount"], 3)
        self.assertIsNotNone(ev["deprecatedFirstTimestamp"])
        self.assertIsNone(ev["eventTime"])
        self.assertEqual(ev["metadata"]["resourceVersion"], created.metadata.resource_version)

    def test_an_events_k8s_io_event_is_seen_through_core_v1(self):
        name, target = unique("ev"), unique("deploy")
        self.view.create(namespace=NS, body={
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
            "action": "Scale", "reason": "Scaled", "note": "scaled " + target, "type": "Normal",
            "regarding": {"kind": "Deployment", "name": target, "namespace": NS},
            "series": {"count": 2, "lastObservedTime": "2024-01-01T00:01:00.000000Z"}})
        ev = self.core.read_namespaced_event(name, NS)
        self.assertEqual(ev.message, "scaled " + target)
        self.assertEqual(ev.involved_object.name, target)
        self.assertEqual(ev.reporting_component, "example.com/ctl")
        self.assertEqual(ev.reporting_instance, "ctl-1")
        self.assertEqual(ev.action, "Scale")
        self.assertEqual(ev.series.count, 2)
        # Field selectors: core labels on core, regarding.* on the view.
        core_list = self.core.list_namespaced_event(
            NS, field_selector="involvedObject.name=" + target)
        self.assertEqual([e.metadata.name for e in core_list.items], [name])
        view_list = self.view.get(namespace=NS, field_selector="regarding.name=" + target)
        self.assertEqual([e.metadata.name for e in view_list.items], [name])
        self.assertEqual(view_list.apiVersion, "events.k8s.io/v1")
        # Delete through core: gone from both.
        self.core.delete_namespaced_event(name, NS)
        with self.assertRaises(ApiException) as err:
            self.view.get(name=name, namespace=NS)
        self.assertEqual(err.exception.status, 404)
        self.assertEqual(status_of(err.exception)["message"],
                         'events.events.k8s.io "%s" not found' % name)

    def test_the_view_refuses_what_events_k8s_io_validation_refuses(self):
        with self.assertRaises(ApiException) as err:
            self.view.create(namespace=NS, body={
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": unique("ev")}, "type": "Normal", "reason": "X"})
        self.assertEqual(err.exception.status, 422)
        self.assertIn("eventTime: Required value", status_of(err.exception)["message"])
        with self.assertRaises(ApiException) as err:
            self.view.get(namespace=NS, field_selector="note=x")
        self.assertEqual(err.exception.status, 400)

    def test_a_watch_on_the_view_sees_core_writes(self):
        target = unique("pod")
        seen = []

        def watch_view():
            for e in self.dyn.watch(self.view, namespace=NS, timeout=5,
                                    field_selector="regarding.name=" + target):
                seen.append((e["type"], e["raw_object"]["apiVersion"], e["raw_object"]["note"]))
                return

        t = threading.Thread(target=watch_view)
        t.start()
        threading.Event().wait(0.5)
        self.core_event(unique("ev"), target)
        t.join(10)
        self.assertEqual(seen, [("ADDED", "events.k8s.io/v1", "started " + target)])

    def test_a_core_watch_sees_view_writes_in_one_resource_version_sequence(self):
        before = int(self.core.list_namespaced_event(NS).metadata.resource_version)
        target = unique("deploy")
        w = watch.Watch()
        name = unique("ev")
        self.view.create(namespace=NS, body={
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "example.com/c",
            "reportingInstance": "c-1", "action": "Do", "reason": "Done", "type": "Warning",
            "regarding": {"kind": "Deployment", "name": target, "namespace": NS}})
        for e in w.stream(self.core.list_namespaced_event, NS, resource_version=str(before),
                          field_selector="involvedObject.name=" + target, timeout_seconds=5):
            self.assertEqual(e["type"], "ADDED")
            self.assertEqual(e["object"].metadata.name, name)
            self.assertEqual(e["object"].type, "Warning")
            self.assertGreater(int(e["object"].metadata.resource_version), before)
            w.stop()
            break
        else:
            self.fail("no event")


if __name__ == "__main__":
    unittest.main()
