"""Validation and admission through the official Python client: 422 Invalid with the real
Status causes, namespaces (default ones, 404, Terminating, 403, content removal), no new
finalizers on a deleting object, immutable ConfigMaps and Secrets, Secret types and base64,
pod spec immutability."""
import time
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, status_of, unique


def cm(name, namespace=None, **kwargs):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, namespace=namespace,
                                                           **kwargs), data={"a": "b"})


class Validation(unittest.TestCase):
    def setUp(self):
        self.core = client.CoreV1Api(api_client())

    def expect_error(self, code, call, *args, **kwargs):
        with self.assertRaises(ApiException) as ctx:
            call(*args, **kwargs)
        self.assertEqual(ctx.exception.status, code, ctx.exception.body)
        return status_of(ctx.exception)

    def test_invalid_name_is_422_with_causes(self):
        status = self.expect_error(422, self.core.create_namespaced_config_map, "default",
                                   cm("Bad_Name"))
        self.assertEqual(status["reason"], "Invalid")
        self.assertTrue(status["message"].startswith(
            'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a '
            "lowercase RFC 1123 subdomain"), status["message"])
        self.assertEqual(status["details"]["kind"], "ConfigMap")
        self.assertEqual(status["details"]["name"], "Bad_Name")
        cause = status["details"]["causes"][0]
        self.assertEqual(cause["reason"], "FieldValueInvalid")
        self.assertEqual(cause["field"], "metadata.name")

    def test_namespace_names_are_labels_and_service_names_dns1035(self):
        status = self.expect_error(422, self.core.create_namespace, client.V1Namespace(
            metadata=client.V1ObjectMeta(name="a.b")))
        self.assertIn('metadata.name: Invalid value: "a.b": must not contain dots',
                      status["message"])
        svc = client.V1Service(metadata=client.V1ObjectMeta(name="9lives"),
                               spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)]))
        status = self.expect_error(422, self.core.create_namespaced_service, "default", svc)
        self.assertIn("a DNS-1035 label", status["message"])

    def test_bad_labels_and_annotations(self):
        status = self.expect_error(422, self.core.create_namespaced_config_map, "default",
                                   cm(unique("l"), labels={"ok": "-bad-"},
                                      annotations={"a/b/c": "x"}))
        fields = [c["field"] for c in status["details"]["causes"]]
        self.assertEqual(fields, ["metadata.labels", "metadata.annotations"])
        status = self.expect_error(422, self.core.create_namespaced_config_map, "default",
                                   cm(unique("big"), annotations={"big": "x" * (256 * 1024)}))
        self.assertIn("metadata.annotations: Too long: may not be more than 262144 bytes",
                      status["message"])
        self.assertEqual(status["details"]["causes"][0]["reason"], "FieldValueTooLong")

    def test_default_namespaces_and_missing_namespace_404(self):
        names = {ns.metadata.name for ns in self.core.list_namespace().items}
        self.assertTrue({"default", "kube-system", "kube-public", "kube-node-lease"} <= names)
        status = self.expect_error(404, self.core.create_namespaced_config_map, "nowhere",
                                   cm(unique("c")))
        self.assertEqual(status["message"], 'namespaces "nowhere" not found')
        self.assertEqual(status["details"], {"name": "nowhere", "kind": "namespaces"})
        status = self.expect_error(403, self.core.delete_namespace, "default")
        self.assertEqual(status["message"],
                         'namespaces "default" is forbidden: this namespace may not be deleted')

    def test_deleting_a_namespace(self):
        ns = unique("gone")
        created = self.core.create_namespace(client.V1Namespace(
            metadata=client.V1ObjectMeta(name=ns)))
        self.assertEqual(created.status.phase, "Active")
        self.assertEqual(created.spec.finalizers, ["kubernetes"])
        self.core.create_namespaced_config_map(ns, cm("held", finalizers=["example.com/hold"]))
        self.core.create_namespaced_config_map(ns, cm("free"))
        self.core.delete_namespace(ns)
        got = self.core.read_namespace(ns)
        self.assertEqual(got.status.phase, "Terminating")
        self.assertIsNotNone(got.metadata.deletion_timestamp)
        status = self.expect_error(403, self.core.create_namespaced_config_map, ns,
                                   cm("late"))
        self.assertEqual(status["reason"], "Forbidden")
        self.assertEqual(status["message"],
                         f'configmaps "late" is forbidden: unable to create new content in '
                         f"namespace {ns} because it is being terminated")
        self.assertEqual(status["details"]["causes"][0]["reason"], "NamespaceTerminating")
        deadline = time.time() + 10
        while time.time() < deadline:
            names = [c.metadata.name for c in self.core.list_namespaced_config_map(ns).items]
            if names == ["held"]:
                break
            time.sleep(0.05)
        self.assertEqual(names, ["held"])
        # No new finalizer on an object being deleted.
        status = self.expect_error(422, self.core.patch_namespaced_config_map, "held", ns,
                                   {"metadata": {"finalizers": ["example.com/hold", "x.io/y"]}})
        self.assertIn("no new finalizers can be added if the object is being deleted",
                      status["message"])
        self.assertEqual(status["details"]["causes"][0]["reason"], "FieldValueForbidden")
        self.core.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": None}})
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                self.core.read_namespace(ns)
            except ApiException as e:
                self.assertEqual(e.status, 404)
                return
            time.sleep(0.05)
        self.fail("namespace still there")

    def test_immutable_configmap_and_secret(self):
        name = unique("frozen")
        body = cm(name)
        body.immutable = True
        self.core.create_namespaced_config_map("default", body)
        status = self.expect_error(422, self.core.patch_namespaced_config_map, name, "default",
                                   {"data": {"a": "c"}})
        self.assertIn("data: Forbidden: field is immutable when `immutable` is set",
                      status["message"])
        self.core.patch_namespaced_config_map(name, "default",
                                              {"metadata": {"labels": {"still": "ok"}}})
        secret = client.V1Secret(metadata=client.V1ObjectMeta(name=name), immutable=True,
                                 string_data={"k": "v"})
        self.core.create_namespaced_secret("default", secret)
        status = self.expect_error(422, self.core.patch_namespaced_secret, name, "default",
                                   {"immutable": False})
        self.assertIn("immutable: Forbidden: field is immutable when `immutable` is set",
                      status["message"])

    def test_secrets(self):
        name = unique("s")
        created = self.core.create_namespaced_secret("default", client.V1Secret(
            metadata=client.V1ObjectMeta(name=name), string_data={"user": "admin"}))
        self.assertEqual(created.data, {"user": "YWRtaW4="})
        self.assertIsNone(created.string_data)
        self.assertEqual(created.type, "Opaque")
        status = self.expect_error(422, self.core.patch_namespaced_secret, name, "default",
                                   {"type": "kubernetes.io/tls"})
        self.assertIn('type: Invalid value: "kubernetes.io/tls": field is immutable',
                      status["message"])
        status = self.expect_error(422, self.core.create_namespaced_secret, "default",
                                   client.V1Secret(metadata=client.V1ObjectMeta(name=unique("t")),
                                                   type="kubernetes.io/tls"))
        self.assertEqual([c["field"] for c in status["details"]["causes"]],
                         ["data[tls.crt]", "data[tls.key]"])
        status = self.expect_error(400, self.core.create_namespaced_secret, "default",
                                   client.V1Secret(metadata=client.V1ObjectMeta(name=unique("b")),
                                                   data={"k": "abc"}))
        self.assertIn("illegal base64 data at input byte 0", status["message"])
        self.assertEqual(status["reason"], "BadRequest")

    def test_pod_spec_is_immutable_but_image_and_tolerations_additions(self):
        name = unique("p")
        pod = client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(
            containers=[client.V1Container(name="c", image="busybox:1")]))
        self.core.create_namespaced_pod("default", pod)
        self.core.patch_namespaced_pod(name, "default", {"spec": {"containers": [
            {"name": "c", "image": "busybox:2"}]}})
        got = self.core.read_namespaced_pod(name, "default")
        self.assertEqual(got.spec.containers[0].image, "busybox:2")
        tolerations = [t.to_dict() for t in got.spec.tolerations]
        extra = {"key": "example.com/x", "operator": "Exists", "effect": "NoSchedule"}
        self.core.patch_namespaced_pod(name, "default", [
            {"op": "add", "path": "/spec/tolerations/-", "value": extra}])
        status = self.expect_error(422, self.core.patch_namespaced_pod, name, "default",
                                   {"spec": {"nodeName": "elsewhere"}})
        self.assertEqual(status["details"]["causes"][0]["field"], "spec")
        self.assertIn("pod updates may not change fields other than", status["message"])
        status = self.expect_error(422, self.core.patch_namespaced_pod, name, "default", [
            {"op": "remove", "path": "/spec/tolerations/2"}])
        self.assertIn("existing toleration can not be modified", status["message"])
        self.assertEqual(len(tolerations), 2)

    def test_pod_field_values(self):
        pod = client.V1Pod(metadata=client.V1ObjectMeta(name=unique("p")), spec=client.V1PodSpec(
            restart_policy="Sometimes", containers=[client.V1Container(name="Bad", image="")]))
        status = self.expect_error(422, self.core.create_namespaced_pod, "default", pod)
        causes = {c["field"]: c["reason"] for c in status["details"]["causes"]}
        self.assertEqual(causes, {"spec.containers[0].name": "FieldValueInvalid",
                                  "spec.containers[0].image": "FieldValueRequired",
                                  "spec.restartPolicy": "FieldValueNotSupported"})


if __name__ == "__main__":
    unittest.main()
