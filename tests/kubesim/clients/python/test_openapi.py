"""OpenAPI through the official Python client: the /openapi/v3 index and group-version documents
fetched with the client's own ApiClient; every object the server answers conforms to the schemas
it serves (checked with python3-jsonschema, as a validating client would), a malformed object
does not; the PATCH operations name the patch types and fieldValidation; /openapi/v2 in JSON."""
import json
import unittest

import jsonschema
from kubernetes import client

from kubesim_client import api_client, unique


def get_json(api, path, query=None):
    response = api.call_api(path, "GET", query_params=query or [], response_type="object",
                            _return_http_data_only=True, _preload_content=False)
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def document(api, group_version):
    index = get_json(api, "/openapi/v3")
    url = index["paths"][group_version]["serverRelativeURL"]
    path, _, hash_ = url.partition("?hash=")
    return get_json(api, path, [("hash", hash_)])


def validator(doc, name):
    schema = {"$ref": "#/components/schemas/" + name, "components": doc["components"]}
    return jsonschema.Draft7Validator(schema)


class OpenApi(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    def tearDown(self):
        self.api.close()

    def raw(self, call, *args):
        response = call(*args, _preload_content=False)
        try:
            return json.loads(response.data)
        finally:
            response.release_conn()

    def test_the_servers_objects_conform_to_its_schemas(self):
        core = document(self.api, "api/v1")
        apps = document(self.api, "apis/apps/v1")
        name = unique("web")
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels={"app": "web"}),
            spec=client.V1PodSpec(containers=[client.V1Container(
                name="app", image="nginx:1",
                ports=[client.V1ContainerPort(container_port=80)],
                resources=client.V1ResourceRequirements(limits={"cpu": "500m", "memory": "64Mi"}),
                env=[client.V1EnvVar(name="MODE", value="blue")])]))
        self.core.create_namespaced_pod("default", pod)
        self.core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name), data={"a": "b"}))
        self.core.create_namespaced_service("default", client.V1Service(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1ServiceSpec(selector={"app": "web"},
                                      ports=[client.V1ServicePort(port=80, target_port=8080)])))
        self.apps.create_namespaced_deployment("default", client.V1Deployment(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1DeploymentSpec(
                selector=client.V1LabelSelector(match_labels={"app": "web"}),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels={"app": "web"}), spec=pod.spec))))
        checks = [
            (core, "io.k8s.api.core.v1.Pod",
             self.raw(self.core.read_namespaced_pod, name, "default")),
            (core, "io.k8s.api.core.v1.ConfigMap",
             self.raw(self.core.read_namespaced_config_map, name, "default")),
            (core, "io.k8s.api.core.v1.Service",
             self.raw(self.core.read_namespaced_service, name, "default")),
            (core, "io.k8s.api.core.v1.Namespace",
             self.raw(self.core.read_namespace, "kube-system")),
            (apps, "io.k8s.api.apps.v1.Deployment",
             self.raw(self.apps.read_namespaced_deployment, name, "default")),
        ]
        for doc, definition, obj in checks:
            with self.subTest(definition=definition):
                errors = [f"{list(e.absolute_path)}: {e.message}"
                          for e in validator(doc, definition).iter_errors(obj)]
                self.assertEqual(errors, [])

    def test_a_malformed_object_does_not_conform(self):
        core = document(self.api, "api/v1")
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "x", "labels": {"app": 7}},
               "spec": {"containers": "nginx", "nodeName": ["a"]}}
        errors = {tuple(e.absolute_path)
                  for e in validator(core, "io.k8s.api.core.v1.Pod").iter_errors(pod)}
        self.assertEqual(errors, {("metadata", "labels", "app"), ("spec", "containers"),
                                  ("spec", "nodeName")})

    def test_the_kinds_carry_their_group_version_kind_and_patch_strategies(self):
        core = document(self.api, "api/v1")
        schemas = core["components"]["schemas"]
        self.assertEqual(schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"],
                         [{"group": "", "kind": "Pod", "version": "v1"}])
        containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
        self.assertEqual(containers["x-kubernetes-patch-merge-key"], "name")
        self.assertEqual(containers["x-kubernetes-patch-strategy"], "merge")
        ports = schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"]
        self.assertEqual(ports["x-kubernetes-patch-merge-key"], "port")
        patch = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
        self.assertIn("application/strategic-merge-patch+json", patch["requestBody"]["content"])
        self.assertIn("fieldValidation", [p["name"] for p in patch["parameters"]])

    def test_openapi_v2_is_served_in_json(self):
        v2 = get_json(self.api, "/openapi/v2")
        self.assertEqual(v2["swagger"], "2.0")
        lease = v2["definitions"]["io.k8s.api.coordination.v1.LeaseSpec"]["properties"]
        self.assertEqual(lease["leaseDurationSeconds"], {"type": "integer", "format": "int32"})
        self.assertEqual(lease["renewTime"],
                         {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"})


if __name__ == "__main__":
    unittest.main()
