"""Server-side dry run and defaulting on create through the official Python client: dryRun=All
on create/update/patch/delete validates and answers but stores nothing (no resourceVersion
bump; the Node test watches for events too); an invalid dryRun value is 422; pods start Pending with the API's defaults and
the default tolerations; Deployments, Services and generation as the real registries keep them."""
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, status_of, unique


class DryRun(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    def list_rv(self):
        return self.core.list_namespaced_config_map("default").metadata.resource_version

    def test_dry_run_stores_nothing(self):
        name = unique("dry")
        rv = self.list_rv()
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"a": "b"})
        answered = self.core.create_namespaced_config_map("default", body, dry_run="All")
        self.assertEqual(answered.metadata.name, name)
        self.assertIsNotNone(answered.metadata.uid)
        self.assertIsNone(answered.metadata.resource_version)
        with self.assertRaises(ApiException) as ctx:
            self.core.read_namespaced_config_map(name, "default")
        self.assertEqual(ctx.exception.status, 404)
        self.assertEqual(self.list_rv(), rv)

        self.core.create_namespaced_config_map("default", body)
        stored_rv = self.list_rv()
        patched = self.core.patch_namespaced_config_map(name, "default", {"data": {"a": "c"}},
                                                        dry_run="All")
        self.assertEqual(patched.data, {"a": "c"})
        current = self.core.read_namespaced_config_map(name, "default")
        current.data = {"a": "d"}
        replaced = self.core.replace_namespaced_config_map(name, "default", current,
                                                           dry_run="All")
        self.assertEqual(replaced.data, {"a": "d"})
        self.core.delete_namespaced_config_map(name, "default", dry_run="All")
        got = self.core.read_namespaced_config_map(name, "default")
        self.assertEqual(got.data, {"a": "b"})
        self.assertEqual(self.list_rv(), stored_rv)

    def test_dry_run_still_validates(self):
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Not_Valid"))
        with self.assertRaises(ApiException) as ctx:
            self.core.create_namespaced_config_map("default", body, dry_run="All")
        self.assertEqual(ctx.exception.status, 422)

    def test_invalid_dry_run_value_is_422(self):
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=unique("x")))
        with self.assertRaises(ApiException) as ctx:
            self.core.create_namespaced_config_map("default", body, dry_run="Yes")
        self.assertEqual(ctx.exception.status, 422)
        status = status_of(ctx.exception)
        self.assertEqual(status["message"],
                         'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
                         '[]string{"Yes"}: supported values: "All"')
        self.assertEqual(status["details"]["group"], "meta.k8s.io")
        self.assertEqual(status["details"]["kind"], "CreateOptions")

    def test_pod_defaults_on_create(self):
        name = unique("pod")
        pod = client.V1Pod(metadata=client.V1ObjectMeta(name=name),
                           spec=client.V1PodSpec(containers=[client.V1Container(
                               name="c", image="busybox", resources=client.V1ResourceRequirements(
                                   limits={"cpu": "1", "memory": "64Mi"}))]),
                           status=client.V1PodStatus(phase="Running"))
        created = self.core.create_namespaced_pod("default", pod)
        self.assertEqual(created.status.phase, "Pending")
        self.assertEqual(created.status.qos_class, "Guaranteed")
        spec = created.spec
        self.assertEqual((spec.restart_policy, spec.dns_policy, spec.scheduler_name,
                          spec.termination_grace_period_seconds, spec.service_account_name),
                         ("Always", "ClusterFirst", "default-scheduler", 30, "default"))
        self.assertEqual(spec.containers[0].image_pull_policy, "Always")
        self.assertEqual(spec.containers[0].resources.requests, {"cpu": "1", "memory": "64Mi"})
        tolerations = [(t.key, t.operator, t.effect, t.toleration_seconds)
                       for t in spec.tolerations]
        self.assertEqual(tolerations, [
            ("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
            ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300)])
        self.assertIsNone(created.metadata.generation)

    def test_deployment_defaults_status_and_generation(self):
        name = unique("web")
        labels = {"app": name}
        dep = client.V1Deployment(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1DeploymentSpec(
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(containers=[client.V1Container(name="c",
                                                                         image="nginx")]))),
            status=client.V1DeploymentStatus(replicas=7, ready_replicas=7))
        created = self.apps.create_namespaced_deployment("default", dep)
        self.assertEqual(created.spec.replicas, 1)
        self.assertEqual(created.spec.strategy.type, "RollingUpdate")
        self.assertEqual(created.spec.strategy.rolling_update.max_unavailable, "25%")
        self.assertEqual(created.spec.strategy.rolling_update.max_surge, "25%")
        self.assertEqual(created.spec.revision_history_limit, 10)
        self.assertEqual(created.spec.progress_deadline_seconds, 600)
        self.assertEqual(created.spec.template.spec.restart_policy, "Always")
        self.assertIsNone(created.status.replicas if created.status else None)
        self.assertEqual(created.metadata.generation, 1)
        scaled = self.apps.patch_namespaced_deployment(name, "default", {"spec": {"replicas": 3}})
        self.assertEqual(scaled.metadata.generation, 2)
        labelled = self.apps.patch_namespaced_deployment(name, "default",
                                                         {"metadata": {"labels": {"x": "y"}}})
        self.assertEqual(labelled.metadata.generation, 2)
        cm = self.core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name)))
        self.assertIsNone(cm.metadata.generation)

    def test_service_cluster_ips(self):
        ips = set()
        for _ in range(3):
            svc = self.core.create_namespaced_service("default", client.V1Service(
                metadata=client.V1ObjectMeta(name=unique("svc")),
                spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=443)])))
            parts = [int(p) for p in svc.spec.cluster_ip.split(".")]
            self.assertEqual(parts[0], 10)
            self.assertTrue(96 <= parts[1] <= 111, svc.spec.cluster_ip)
            self.assertEqual(svc.spec.cluster_i_ps, [svc.spec.cluster_ip])
            self.assertEqual(svc.spec.type, "ClusterIP")
            self.assertEqual(svc.spec.session_affinity, "None")
            self.assertEqual(svc.spec.ip_families, ["IPv4"])
            ips.add(svc.spec.cluster_ip)
        self.assertEqual(len(ips), 3)
        taken = ips.pop()
        with self.assertRaises(ApiException) as ctx:
            self.core.create_namespaced_service("default", client.V1Service(
                metadata=client.V1ObjectMeta(name=unique("dup")),
                spec=client.V1ServiceSpec(cluster_ip=taken,
                                          ports=[client.V1ServicePort(port=443)])))
        self.assertEqual(ctx.exception.status, 422)
        self.assertIn("provided IP is already allocated", status_of(ctx.exception)["message"])


if __name__ == "__main__":
    unittest.main()
