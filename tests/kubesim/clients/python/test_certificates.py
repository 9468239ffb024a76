"""CertificateSigningRequests through the official Python client: the server records the caller
as the requester, approval goes through the /approval subresource, and kubesim's signer (as
kube-controller-manager's) issues a certificate that verifies against the cluster CA."""
import base64
import json
import subprocess
import tempfile
import time
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim_client import api_client, status_of, unique


def make_request(subject, sans=None):
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", f"{tmp}/key.pem", "-subj", subject]
        if sans:
            argv += ["-addext", f"subjectAltName={sans}"]
        return subprocess.run(argv, check=True, capture_output=True).stdout


class Certificates(unittest.TestCase):
    def setUp(self):
        self.api = api_client()
        self.certs = client.CertificatesV1Api(self.api)

    def create(self, name, pem, signer, usages):
        body = client.V1CertificateSigningRequest(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1CertificateSigningRequestSpec(
                request=base64.b64encode(pem).decode(), signer_name=signer, usages=usages,
                username="someone-else"))
        return self.certs.create_certificate_signing_request(body)

    def test_approved_client_request_is_issued(self):
        name = unique("jane")
        created = self.create(name, make_request("/O=team/CN=jane"),
                              "kubernetes.io/kube-apiserver-client", ["client auth"])
        self.assertEqual(created.spec.username, "kubernetes-admin")
        self.assertIn("system:authenticated", created.spec.groups)
        csr = self.certs.read_certificate_signing_request(name)
        csr.status.conditions = [client.V1CertificateSigningRequestCondition(
            type="Approved", status="True", reason="PythonApprove", message="approved by test")]
        approved = self.certs.replace_certificate_signing_request_approval(name, csr)
        self.assertEqual(approved.status.conditions[0].type, "Approved")
        self.assertIsNotNone(approved.status.conditions[0].last_update_time)
        deadline = time.monotonic() + 10
        while True:
            csr = self.certs.read_certificate_signing_request(name)
            if csr.status.certificate or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertTrue(csr.status.certificate, "the signer issued no certificate in 10 s")
        pem = base64.b64decode(csr.status.certificate)
        with tempfile.NamedTemporaryFile(suffix=".crt") as crt:
            crt.write(pem)
            crt.flush()
            verified = subprocess.run(
                ["openssl", "verify", "-CAfile", self.api.configuration.ssl_ca_cert, crt.name],
                capture_output=True, text=True)
            self.assertEqual(verified.returncode, 0, verified.stdout + verified.stderr)
            subject = subprocess.run(["openssl", "x509", "-in", crt.name, "-noout", "-subject"],
                                     capture_output=True, text=True).stdout
            self.assertIn("O = team, CN = jane", subject)

    def test_status_cannot_approve(self):
        name = unique("status")
        self.create(name, make_request("/CN=x"), "example.com/custom", ["client auth"])
        csr = self.certs.read_certificate_signing_request(name)
        csr.status.conditions = [client.V1CertificateSigningRequestCondition(
            type="Approved", status="True")]
        with self.assertRaises(ApiException) as ctx:
            self.certs.replace_certificate_signing_request_status(name, csr)
        self.assertEqual(ctx.exception.status, 422)
        self.assertIn('updates may not add a condition of type "Approved"',
                      status_of(ctx.exception)["message"])

    def test_a_signer_replaces_the_read_object_with_its_certificate(self):
        # The client sends condition times back as "+00:00"; the server parses metav1.Time, so
        # the approval is unchanged and the certificate is accepted (as kube-apiserver does).
        name = unique("signed")
        self.create(name, make_request("/CN=signed"), "example.com/custom", ["client auth"])
        csr = self.certs.read_certificate_signing_request(name)
        csr.status.conditions = [client.V1CertificateSigningRequestCondition(
            type="Approved", status="True", reason="PythonApprove")]
        self.certs.replace_certificate_signing_request_approval(name, csr)
        csr = self.certs.read_certificate_signing_request(name)
        with open(self.api.configuration.ssl_ca_cert, "rb") as ca:
            csr.status.certificate = base64.b64encode(ca.read()).decode()
        issued = self.certs.replace_certificate_signing_request_status(name, csr)
        self.assertTrue(issued.status.certificate)
        raw = self.api.call_api(
            f"/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}", "GET",
            auth_settings=["BearerToken"], _preload_content=False)[0]
        condition = json.loads(raw.data)["status"]["conditions"][0]
        self.assertTrue(condition["lastUpdateTime"].endswith("Z"), condition)

    def test_invalid_request_is_422(self):
        with self.assertRaises(ApiException) as ctx:
            self.create(unique("bad"), b"garbage", "example.com/custom", ["client auth"])
        self.assertEqual(ctx.exception.status, 422)
        self.assertIn("PEM block type must be CERTIFICATE REQUEST",
                      status_of(ctx.exception)["message"])


if __name__ == "__main__":
    unittest.main()
