// Strategic merge patch through the official JavaScript client: Service ports merge by port.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { k8s, kubeConfig, unique } from './kubesim_client.mjs';

const namespace = 'default';

test('a strategic merge patch merges Service ports by port', async () => {
  const core = kubeConfig().makeApiClient(k8s.CoreV1Api);
  const name = unique('svc');
  await core.createNamespacedService({ namespace, body: { metadata: { name }, spec: { ports: [
    { name: 'http', port: 80, targetPort: 8080 }, { name: 'https', port: 443, targetPort: 8443 }] } } });
  const patched = await core.patchNamespacedService(
    { name, namespace, body: { spec: { ports: [{ port: 80, targetPort: 9090 }] } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
  const ports = Object.fromEntries(patched.spec.ports.map((p) => [p.port, p.targetPort]));
  assert.deepEqual(ports, { 80: 9090, 443: 8443 });
});
