"""Evictions and PodDisruptionBudgets through the official Python client: the simulated
disruption controller's status, an eviction spending the budget, 429 with the API's message."""
import time
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, status_of, unique

NS = "default"


class Evictions(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.app = unique("db")

    def ready_pod(self, name, app):
        self.core.create_namespaced_pod(NS, client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels={"app": app}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
        # What the kubelet reports: running and ready (pods are created Pending).
        self.core.patch_namespaced_pod_status(name, NS, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})

    def status_when(self, name, check):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pdb = self.policy.read_namespaced_pod_disruption_budget(name, NS)
            if pdb.status and (pdb.status.observed_generation or 0) >= pdb.metadata.generation \
                    and check(pdb.status):
                return pdb.status
            time.sleep(0.05)
        self.fail(f"budget {name} never reached the expected status")

    def evict(self, name):
        self.core.create_namespaced_pod_eviction(name, NS, client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=NS)))

    def test_an_eviction_spends_the_budget(self):
        for i in range(3):
            self.ready_pod(f"{self.app}-{i}", self.app)
        self.ready_pod(f"{self.app}-other", self.app + "-x")
        self.policy.create_namespaced_pod_disruption_budget(NS, client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name=self.app),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=2, selector=client.V1LabelSelector(match_expressions=[
                    client.V1LabelSelectorRequirement(key="app", operator="In",
                                                      values=[self.app])]))))
        status = self.status_when(self.app, lambda s: s.disruptions_allowed == 1)
        self.assertEqual((status.current_healthy, status.desired_healthy, status.expected_pods),
                         (3, 2, 3))
        self.evict(f"{self.app}-0")
        pdb = self.policy.read_namespaced_pod_disruption_budget(self.app, NS)
        self.assertEqual(pdb.status.disruptions_allowed, 0)
        self.assertIn(f"{self.app}-0", pdb.status.disrupted_pods)
        with self.assertRaises(ApiException) as ctx:
            self.evict(f"{self.app}-1")
        self.assertEqual(ctx.exception.status, 429)
        body = status_of(ctx.exception)
        self.assertEqual(body["message"],
                         "Cannot evict pod as it would violate the pod's disruption budget.")
        self.assertEqual(body["details"]["causes"][0]["reason"], "DisruptionBudget")
        # The pod outside the selector is not guarded.
        self.evict(f"{self.app}-other")


if __name__ == "__main__":
    unittest.main()
