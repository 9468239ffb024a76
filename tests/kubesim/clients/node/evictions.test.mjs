// Evictions and PodDisruptionBudgets through the official JavaScript client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { codeOf, k8s, kubeConfig, unique } from './kubesim_client.mjs';

const namespace = 'default';

test('an eviction spends the budget; the next one is 429', async () => {
  const kc = kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const policy = kc.makeApiClient(k8s.PolicyV1Api);
  const app = unique('db');
  for (const name of [`${app}-0`, `${app}-1`]) {
    await core.createNamespacedPod({ namespace, body: {
      metadata: { name, labels: { app } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
    await core.replaceNamespacedPodStatus({ namespace, name, body: {
      ...(await core.readNamespacedPod({ namespace, name })),
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } } });
  }
  await policy.createNamespacedPodDisruptionBudget({ namespace, body: {
    metadata: { name: app }, spec: { minAvailable: 1, selector: { matchLabels: { app } } } } });
  let status;
  for (let i = 0; i < 200; i++) {
    status = (await policy.readNamespacedPodDisruptionBudget({ namespace, name: app })).status;
    if (status?.observedGeneration === 1 && status.disruptionsAllowed === 1) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(status.disruptionsAllowed, 1);
  const evict = (name) => core.createNamespacedPodEviction({ namespace, name, body: {
    apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace } } });
  await evict(`${app}-0`);
  const spent = (await policy.readNamespacedPodDisruptionBudget({ namespace, name: app })).status;
  assert.equal(spent.disruptionsAllowed, 0);
  await assert.rejects(evict(`${app}-1`), (err) => codeOf(err) === 429 &&
    String(err.body).includes("Cannot evict pod as it would violate the pod's disruption budget."));
});
