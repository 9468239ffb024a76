"""The scale subresource of a StatefulSet through the official Python client, as the minio-ha
controller scales ha-minio: read_namespaced_stateful_set_scale / replace_..._scale (autoscaling/v1
Scale, its selector from the StatefulSet's), a stale resourceVersion refused with 409, a missing
StatefulSet 404, and the StatefulSet's spec.replicas follows while its annotations stay."""
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, unique

NS = "default"


class StatefulSetScale(unittest.TestCase):
    def setUp(self):
        self.apps = client.AppsV1Api(api_client())
        self.name = unique("ha-minio")
        labels = {"app": self.name}
        self.apps.create_namespaced_stateful_set(NS, client.V1StatefulSet(
            metadata=client.V1ObjectMeta(name=self.name,
                                         annotations={"kurl.sh/desired-scale": "4"}),
            spec=client.V1StatefulSetSpec(
                replicas=0, service_name=self.name,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(containers=[
                        client.V1Container(name="minio", image="minio/minio")])))))

    def test_read_and_replace_the_scale(self):
        scale = self.apps.read_namespaced_stateful_set_scale(self.name, NS)
        self.assertEqual(scale.kind, "Scale")
        self.assertEqual(scale.api_version, "autoscaling/v1")
        self.assertEqual(scale.spec.replicas, 0)
        self.assertEqual(scale.status.selector, "app=" + self.name)
        stale = scale.metadata.resource_version
        scale.spec.replicas = 4
        updated = self.apps.replace_namespaced_stateful_set_scale(self.name, NS, scale)
        self.assertEqual(updated.spec.replicas, 4)
        self.assertNotEqual(updated.metadata.resource_version, stale)
        sts = self.apps.read_namespaced_stateful_set(self.name, NS)
        self.assertEqual(sts.spec.replicas, 4)
        self.assertEqual(sts.metadata.annotations["kurl.sh/desired-scale"], "4")
        # The scale carries the StatefulSet's resourceVersion: an old one conflicts.
        scale.metadata.resource_version = stale
        scale.spec.replicas = 5
        with self.assertRaises(ApiException) as ctx:
            self.apps.replace_namespaced_stateful_set_scale(self.name, NS, scale)
        self.assertEqual(ctx.exception.status, 409)
        self.assertEqual(self.apps.read_namespaced_stateful_set(self.name, NS).spec.replicas, 4)

    def test_patch_the_scale_and_a_missing_statefulset(self):
        patched = self.apps.patch_namespaced_stateful_set_scale(
            self.name, NS, {"spec": {"replicas": 3}})
        self.assertEqual(patched.spec.replicas, 3)
        with self.assertRaises(ApiException) as ctx:
            self.apps.read_namespaced_stateful_set_scale(unique("absent"), NS)
        self.assertEqual(ctx.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
