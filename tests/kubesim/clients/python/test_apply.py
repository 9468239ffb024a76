"""Server-side apply through the official Python client's dynamic client
(application/apply-patch+yaml, the body a YAML/JSON string): create, managedFields, conflicts (409 with FieldManagerConflict
causes), force, removal of fields a manager stops applying, and fieldManager required."""
import json
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from kubesim_client import api_client, status_of, unique

NS = "default"


def config_map(name, data):
    # python3-kubernetes 22's REST layer sends an apply-patch+yaml body only as a string.
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": NS}, "data": data})


class ServerSideApply(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.dyn = DynamicClient(self.api)
        self.cms = self.dyn.resources.get(api_version="v1", kind="ConfigMap")
        self.core = client.CoreV1Api(self.api)

    def entry(self, name, manager):
        obj = self.cms.get(name=name, namespace=NS).to_dict()
        for e in obj["metadata"].get("managedFields", []):
            if e["manager"] == manager:
                return e
        return None

    def test_apply_creates_updates_and_prunes(self):
        name = unique("cm")
        created = self.dyn.server_side_apply(self.cms, name=name, namespace=NS, body=config_map(name, {"a": "1", "b": "2"}),
                                             field_manager="py-applier")
        self.assertEqual(created.data.a, "1")
        e = self.entry(name, "py-applier")
        self.assertEqual(e["operation"], "Apply")
        self.assertEqual(e["fieldsType"], "FieldsV1")
        self.assertEqual(e["fieldsV1"], {"f:data": {"f:a": {}, "f:b": {}}})
        self.dyn.server_side_apply(self.cms, name=name, namespace=NS, body=config_map(name, {"a": "1"}),
                                   field_manager="py-applier")
        self.assertEqual(self.core.read_namespaced_config_map(name, NS).data, {"a": "1"})

    def test_conflict_is_409_with_causes_until_forced(self):
        name = unique("cm")
        self.core.create_namespaced_config_map(NS, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name), data={"a": "1"}), field_manager="py-creator")
        with self.assertRaises(ApiException) as err:
            self.dyn.server_side_apply(self.cms, name=name, namespace=NS, body=config_map(name, {"a": "2"}),
                                       field_manager="py-applier")
        self.assertEqual(err.exception.status, 409)
        status = status_of(err.exception)
        self.assertEqual(status["reason"], "Conflict")
        self.assertEqual(status["message"], 'Apply failed with 1 conflict: conflict with '
                                            '"py-creator" using v1: .data.a')
        self.assertEqual(status["details"]["causes"], [{
            "reason": "FieldManagerConflict", "message": 'conflict with "py-creator" using v1',
            "field": ".data.a"}])
        forced = self.dyn.server_side_apply(self.cms, name=name, namespace=NS, body=config_map(name, {"a": "2"}),
                                            field_manager="py-applier", force_conflicts=True)
        self.assertEqual(forced.data.a, "2")
        # The creator keeps the map it added (`.data` itself), not the key it lost.
        self.assertEqual(self.entry(name, "py-creator")["fieldsV1"], {"f:data": {}})
        self.assertEqual(self.entry(name, "py-applier")["fieldsV1"], {"f:data": {"f:a": {}}})

    def test_apply_without_field_manager_is_422(self):
        name = unique("cm")
        with self.assertRaises(ApiException) as err:
            self.dyn.server_side_apply(self.cms, name=name, namespace=NS, body=config_map(name, {"a": "1"}))
        self.assertEqual(err.exception.status, 422)
        self.assertEqual(status_of(err.exception)["message"],
                         'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                         'is required for apply patch')

    def test_updates_record_update_managers(self):
        name = unique("cm")
        self.core.create_namespaced_config_map(NS, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name), data={"a": "1"}), field_manager="first")
        self.core.patch_namespaced_config_map(name, NS, {"data": {"b": "2"}},
                                              field_manager="second")
        first, second = self.entry(name, "first"), self.entry(name, "second")
        self.assertEqual(first["operation"], "Update")
        self.assertEqual(first["fieldsV1"], {"f:data": {".": {}, "f:a": {}}})
        self.assertEqual(second["fieldsV1"], {"f:data": {"f:b": {}}})


if __name__ == "__main__":
    unittest.main()
