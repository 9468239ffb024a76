"""CustomResourceDefinitions through the official Python client: a custom resource's API exists
only while its CRD does, the CRD is Established at once, writes are pruned, defaulted and
validated against the structural schema (422 with the real causes), the status and scale
subresources behave as the CRD declares, and deleting the CRD removes its objects and API."""
import time
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, status_of, unique

GROUP = "stable.example.com"


def definition(plural, kind):
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["cronSpec"],
                "properties": {
                    "cronSpec": {"type": "string", "pattern": r"^(\S+ ){4}\S+$"},
                    "image": {"type": "string", "default": "busybox"},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                    "mode": {"type": "string", "enum": ["Fast", "Slow"]},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer"}, "selector": {"type": "string"},
                "phase": {"type": "string"}}},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                      "shortNames": [plural[:4]]},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [
                    {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    {"name": "Image", "type": "string", "jsonPath": ".spec.image",
                     "priority": 1}],
            }],
        },
    }


class Crd(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.ext = client.ApiextensionsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        suffix = unique("x").split("-")[1]
        self.kind = "CronTab" + suffix
        self.plural = "crontabs" + suffix
        self.name = f"{self.plural}.{GROUP}"

    def create_definition(self):
        created = self.ext.create_custom_resource_definition(definition(self.plural, self.kind))
        self.addCleanup(self.delete_definition)
        return created

    def delete_definition(self):
        try:
            self.ext.delete_custom_resource_definition(self.name)
        except ApiException as e:
            if e.status != 404:
                raise

    def cr(self, name, **spec):
        return {"apiVersion": f"{GROUP}/v1", "kind": self.kind,
                "metadata": {"name": name}, "spec": spec}

    def test_the_resource_exists_only_after_its_definition(self):
        with self.assertRaises(ApiException) as caught:
            self.custom.list_namespaced_custom_object(GROUP, "v1", "default", self.plural)
        self.assertEqual(caught.exception.status, 404)
        created = self.create_definition()
        conditions = {c.type: c.status for c in created.status.conditions}
        self.assertEqual(conditions, {"NamesAccepted": "True", "Established": "True"})
        self.assertEqual(created.status.accepted_names.kind, self.kind)
        self.assertEqual(created.status.stored_versions, ["v1"])
        resources = self.api.call_api(
            f"/apis/{GROUP}/v1", "GET", response_type="object", _return_http_data_only=True)
        names = [r["name"] for r in resources["resources"]]
        self.assertIn(self.plural, names)
        self.assertIn(self.plural + "/status", names)
        self.assertIn(self.plural + "/scale", names)
        obj = self.custom.create_namespaced_custom_object(
            GROUP, "v1", "default", self.plural, self.cr("one", cronSpec="* * * * */5"))
        self.assertEqual(obj["metadata"]["name"], "one")
        listed = self.custom.list_namespaced_custom_object(GROUP, "v1", "default", self.plural)
        self.assertEqual([i["metadata"]["name"] for i in listed["items"]], ["one"])

    def test_writes_are_pruned_and_defaulted(self):
        self.create_definition()
        obj = self.custom.create_namespaced_custom_object(
            GROUP, "v1", "default", self.plural,
            self.cr("pruned", cronSpec="* * * * *", unknown="dropped", extra={"kept": {"a": 1}}))
        self.assertNotIn("unknown", obj["spec"])
        self.assertEqual(obj["spec"]["extra"], {"kept": {"a": 1}})
        self.assertEqual(obj["spec"]["image"], "busybox")
        got = self.custom.get_namespaced_custom_object(GROUP, "v1", "default", self.plural,
                                                       "pruned")
        self.assertNotIn("unknown", got["spec"])

    def test_invalid_objects_get_422_with_the_schema_causes(self):
        self.create_definition()
        body = self.cr("bad", cronSpec="nope", replicas="three", mode="Medium")
        with self.assertRaises(ApiException) as caught:
            self.custom.create_namespaced_custom_object(GROUP, "v1", "default", self.plural, body)
        self.assertEqual(caught.exception.status, 422)
        status = status_of(caught.exception)
        self.assertEqual(status["reason"], "Invalid")
        self.assertEqual(status["details"]["kind"], self.kind)
        self.assertEqual(status["details"]["group"], GROUP)
        causes = {(c["field"], c["reason"]): c["message"] for c in status["details"]["causes"]}
        self.assertEqual(causes[("spec.replicas", "FieldValueTypeInvalid")],
                         'Invalid value: "string": spec.replicas in body must be of type '
                         'integer: "string"')
        self.assertEqual(causes[("spec.mode", "FieldValueNotSupported")],
                         'Unsupported value: "Medium": supported values: "Fast", "Slow"')
        self.assertIn(("spec.cronSpec", "FieldValueInvalid"), causes)
        self.assertTrue(status["message"].startswith(f'{self.kind}.{GROUP} "bad" is invalid: ['))
        with self.assertRaises(ApiException) as caught:
            self.custom.create_namespaced_custom_object(
                GROUP, "v1", "default", self.plural, self.cr("small", cronSpec="* * * * *",
                                                              replicas=0))
        self.assertEqual(
            status_of(caught.exception)["message"],
            f'{self.kind}.{GROUP} "small" is invalid: spec.replicas: Invalid value: 0: '
            'spec.replicas in body should be greater than or equal to 1')
        with self.assertRaises(ApiException) as caught:
            self.custom.create_namespaced_custom_object(GROUP, "v1", "default", self.plural,
                                                        self.cr("none"))
        self.assertIn("spec.cronSpec: Required value", status_of(caught.exception)["message"])
        with self.assertRaises(ApiException) as caught:
            self.custom.get_namespaced_custom_object(GROUP, "v1", "default", self.plural, "bad")
        self.assertEqual(caught.exception.status, 404)

    def test_status_and_scale_subresources(self):
        self.create_definition()
        self.custom.create_namespaced_custom_object(
            GROUP, "v1", "default", self.plural,
            {**self.cr("sub", cronSpec="* * * * *", replicas=2), "status": {"phase": "Ignored"}})
        got = self.custom.get_namespaced_custom_object(GROUP, "v1", "default", self.plural, "sub")
        self.assertNotIn("status", got)
        self.custom.patch_namespaced_custom_object_status(
            GROUP, "v1", "default", self.plural, "sub",
            {"status": {"phase": "Ready", "replicas": 2, "selector": "app=sub"}})
        self.custom.patch_namespaced_custom_object(
            GROUP, "v1", "default", self.plural, "sub", {"status": {"phase": "Main"}})
        got = self.custom.get_namespaced_custom_object(GROUP, "v1", "default", self.plural, "sub")
        self.assertEqual(got["status"]["phase"], "Ready")
        scale = self.custom.get_namespaced_custom_object_scale(GROUP, "v1", "default",
                                                               self.plural, "sub")
        self.assertEqual(scale["spec"]["replicas"], 2)
        self.assertEqual(scale["status"], {"replicas": 2, "selector": "app=sub"})
        self.custom.patch_namespaced_custom_object_scale(
            GROUP, "v1", "default", self.plural, "sub", {"spec": {"replicas": 7}})
        got = self.custom.get_namespaced_custom_object(GROUP, "v1", "default", self.plural, "sub")
        self.assertEqual(got["spec"]["replicas"], 7)

    def test_deleting_the_definition_deletes_its_objects_and_api(self):
        self.create_definition()
        self.custom.create_namespaced_custom_object(GROUP, "v1", "default", self.plural,
                                                    self.cr("doomed", cronSpec="* * * * *"))
        self.ext.delete_custom_resource_definition(self.name)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                self.ext.read_custom_resource_definition(self.name)
            except ApiException as e:
                self.assertEqual(e.status, 404)
                break
            time.sleep(0.1)
        with self.assertRaises(ApiException) as caught:
            self.custom.list_namespaced_custom_object(GROUP, "v1", "default", self.plural)
        self.assertEqual(caught.exception.status, 404)
        # The group-version goes from discovery with its last definition: 404, and not in /apis.
        others = [c for c in self.ext.list_custom_resource_definition().items
                  if c.spec.group == GROUP]
        if others:
            resources = self.api.call_api(f"/apis/{GROUP}/v1", "GET", response_type="object",
                                          _return_http_data_only=True)
            self.assertNotIn(self.plural, [r["name"] for r in resources["resources"]])
        else:
            with self.assertRaises(ApiException) as gone:
                self.api.call_api(f"/apis/{GROUP}/v1", "GET", response_type="object",
                                  _return_http_data_only=True)
            self.assertEqual(gone.exception.status, 404)
            groups = self.api.call_api("/apis", "GET", response_type="object",
                                       _return_http_data_only=True)
            self.assertNotIn(GROUP, [g["name"] for g in groups["groups"]])
        # Created again, the API is back and empty: the old objects are gone for good.
        self.create_definition()
        listed = self.custom.list_namespaced_custom_object(GROUP, "v1", "default", self.plural)
        self.assertEqual(listed["items"], [])

    def test_preloaded_definitions_serve_rooks_custom_resources(self):
        crd = self.ext.read_custom_resource_definition("cephclusters.ceph.rook.io")
        self.assertEqual(crd.spec.names.kind, "CephCluster")
        established = [c for c in crd.status.conditions if c.type == "Established"]
        self.assertEqual(established[0].status, "True")
        self.custom.list_namespaced_custom_object("ceph.rook.io", "v1", "rook-ceph",
                                                  "cephclusters")

    def test_an_invalid_definition_is_rejected(self):
        bad = definition(self.plural, self.kind)
        bad["metadata"]["name"] = "wrong.name.example.com"
        with self.assertRaises(ApiException) as caught:
            self.ext.create_custom_resource_definition(bad)
        self.assertEqual(caught.exception.status, 422)
        self.assertIn('metadata.name: Invalid value: "wrong.name.example.com": must be '
                      'spec.names.plural+"."+spec.group', status_of(caught.exception)["message"])


if __name__ == "__main__":
    unittest.main()
