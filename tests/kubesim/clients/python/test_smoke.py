"""The official Python client reaches kubesim at all: discovery, a typed list, a create and a
watch that sees it. The area tests beside this file check the API's semantics."""
import threading
import unittest

from kubernetes import client, watch

from kubesim_client import api_client, unique


class Smoke(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)

    def test_version_and_a_created_namespace_is_listed(self):
        info = client.VersionApi(self.api).get_code()
        self.assertTrue(info.git_version.startswith("v1."))
        name = unique("smoke")
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        names = {ns.metadata.name for ns in self.core.list_namespace().items}
        self.assertIn(name, names)

    def test_create_get_and_watch_a_configmap(self):
        name = unique("smoke")
        first = self.core.list_namespaced_config_map("default")
        seen = []
        w = watch.Watch()

        def consume():
            for event in w.stream(self.core.list_namespaced_config_map, "default",
                                  resource_version=first.metadata.resource_version,
                                  timeout_seconds=10):
                seen.append((event["type"], event["object"].metadata.name))
                if event["object"].metadata.name == name:
                    w.stop()

        t = threading.Thread(target=consume)
        t.start()
        created = self.core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name),
                                          data={"k": "v"}))
        self.assertEqual(created.data, {"k": "v"})
        t.join(15)
        self.assertFalse(t.is_alive())
        self.assertIn(("ADDED", name), seen)
        got = self.core.read_namespaced_config_map(name, "default")
        self.assertEqual(got.metadata.uid, created.metadata.uid)


if __name__ == "__main__":
    unittest.main()
