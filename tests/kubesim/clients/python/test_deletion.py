"""Deletion propagation through the official Python client: a Deployment → ReplicaSet → Pod
chain deleted in the background, in the foreground and orphaning, and an invalid policy."""
import time
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, status_of, unique

NS = "default"


def owner_ref(obj, kind):
    return client.V1OwnerReference(api_version="apps/v1", kind=kind, name=obj.metadata.name,
                                   uid=obj.metadata.uid, controller=True,
                                   block_owner_deletion=True)


def template(labels):
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))


class Deletion(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.name = unique("web")

    def chain(self):
        labels = {"app": self.name}
        selector = client.V1LabelSelector(match_labels=labels)
        d = self.apps.create_namespaced_deployment(NS, client.V1Deployment(
            metadata=client.V1ObjectMeta(name=self.name),
            spec=client.V1DeploymentSpec(replicas=1, selector=selector,
                                         template=template(labels))))
        rs = self.apps.create_namespaced_replica_set(NS, client.V1ReplicaSet(
            metadata=client.V1ObjectMeta(name=f"{self.name}-1",
                                         owner_references=[owner_ref(d, "Deployment")]),
            spec=client.V1ReplicaSetSpec(replicas=1, selector=selector,
                                         template=template(labels))))
        self.core.create_namespaced_pod(NS, client.V1Pod(
            metadata=client.V1ObjectMeta(name=f"{self.name}-1-a", labels=labels,
                                         owner_references=[owner_ref(rs, "ReplicaSet")]),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))

    def exists(self, read, name):
        try:
            return read(name, NS)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def wait_gone(self, read, name):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.exists(read, name) is None:
                return
            time.sleep(0.05)
        self.fail(f"{name} still exists")

    def test_background_deletion_collects_the_chain(self):
        self.chain()
        self.apps.delete_namespaced_deployment(self.name, NS)
        self.wait_gone(self.apps.read_namespaced_replica_set, f"{self.name}-1")
        self.wait_gone(self.core.read_namespaced_pod, f"{self.name}-1-a")

    def test_foreground_deletion_marks_the_owner_then_removes_everything(self):
        self.chain()
        self.apps.delete_namespaced_deployment(
            self.name, NS, body=client.V1DeleteOptions(propagation_policy="Foreground"))
        self.wait_gone(self.core.read_namespaced_pod, f"{self.name}-1-a")
        self.wait_gone(self.apps.read_namespaced_replica_set, f"{self.name}-1")
        self.wait_gone(self.apps.read_namespaced_deployment, self.name)

    def test_orphan_deletion_keeps_the_pod_without_its_owner_reference(self):
        self.chain()
        self.apps.delete_namespaced_replica_set(f"{self.name}-1", NS, propagation_policy="Orphan")
        self.wait_gone(self.apps.read_namespaced_replica_set, f"{self.name}-1")
        pod = self.core.read_namespaced_pod(f"{self.name}-1-a", NS)
        self.assertFalse(pod.metadata.owner_references)

    def test_an_unknown_policy_is_invalid(self):
        self.chain()
        with self.assertRaises(ApiException) as ctx:
            self.apps.delete_namespaced_deployment(self.name, NS, propagation_policy="Sideways")
        self.assertEqual(ctx.exception.status, 422)
        self.assertIn('Unsupported value: "Sideways"', status_of(ctx.exception)["message"])


if __name__ == "__main__":
    unittest.main()
