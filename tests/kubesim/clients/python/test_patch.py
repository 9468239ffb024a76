"""Strategic merge patch through the official Python client (a dict body is sent as
application/strategic-merge-patch+json): Service ports merge by port, containers by name."""
import unittest

from kubernetes import client

from kubesim_client import api_client, unique

NS = "default"


class StrategicMerge(unittest.TestCase):
    def setUp(self):
        self.core = client.CoreV1Api(api_client())

    def test_service_ports_merge_by_port(self):
        name = unique("svc")
        self.core.create_namespaced_service(NS, client.V1Service(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1ServiceSpec(ports=[
                client.V1ServicePort(name="http", port=80, target_port=8080),
                client.V1ServicePort(name="https", port=443, target_port=8443)])))
        patched = self.core.patch_namespaced_service(
            name, NS, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}})
        ports = {p.port: p.target_port for p in patched.spec.ports}
        self.assertEqual(ports, {80: 9090, 443: 8443})

    def test_container_env_merges_by_name_and_args_are_replaced(self):
        # A Deployment's pod template: a Pod's own containers are immutable (ValidatePodUpdate).
        apps = client.AppsV1Api(api_client())
        name = unique("deploy")
        labels = {"app": name}
        apps.create_namespaced_deployment(NS, client.V1Deployment(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1DeploymentSpec(
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(containers=[client.V1Container(
                        name="c", image="busybox", args=["a", "b"],
                        env=[client.V1EnvVar(name="A", value="1")])])))))
        patched = apps.patch_namespaced_deployment(name, NS, {"spec": {"template": {"spec": {
            "containers": [{"name": "c", "args": ["z"], "env": [{"name": "B", "value": "2"}]}]}}}})
        c = patched.spec.template.spec.containers[0]
        self.assertEqual(c.args, ["z"])
        self.assertEqual({e.name: e.value for e in c.env}, {"A": "1", "B": "2"})

if __name__ == "__main__":
    unittest.main()
