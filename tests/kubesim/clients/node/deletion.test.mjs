// Deletion propagation through the official JavaScript client: a Deployment → ReplicaSet → Pod
// chain deleted in the foreground and orphaning.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { codeOf, k8s, kubeConfig, unique } from './kubesim_client.mjs';

const namespace = 'default';

function ownerRef(obj, kind) {
  return {
    apiVersion: 'apps/v1', kind, name: obj.metadata.name, uid: obj.metadata.uid,
    controller: true, blockOwnerDeletion: true,
  };
}

async function chain(name) {
  const kc = kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  const labels = { app: name };
  const template = { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'busybox' }] } };
  const d = await apps.createNamespacedDeployment({ namespace, body: {
    metadata: { name }, spec: { replicas: 1, selector: { matchLabels: labels }, template } } });
  const rs = await apps.createNamespacedReplicaSet({ namespace, body: {
    metadata: { name: `${name}-1`, ownerReferences: [ownerRef(d, 'Deployment')] },
    spec: { replicas: 1, selector: { matchLabels: labels }, template } } });
  await core.createNamespacedPod({ namespace, body: {
    metadata: { name: `${name}-1-a`, labels, ownerReferences: [ownerRef(rs, 'ReplicaSet')] },
    spec: template.spec } });
  return { core, apps };
}

async function gone(read) {
  for (let i = 0; i < 200; i++) {
    try {
      await read();
    } catch (err) {
      if (codeOf(err) === 404) return true;
      throw err;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

test('foreground deletion removes the whole chain, the owner last', async () => {
  const name = unique('fg');
  const { core, apps } = await chain(name);
  // (The answer is typed V1Status by the client, so the owner's finalizer is read elsewhere.)
  await apps.deleteNamespacedDeployment({
    namespace, name, body: { propagationPolicy: 'Foreground' } });
  assert.ok(await gone(() => core.readNamespacedPod({ namespace, name: `${name}-1-a` })));
  assert.ok(await gone(() => apps.readNamespacedReplicaSet({ namespace, name: `${name}-1` })));
  assert.ok(await gone(() => apps.readNamespacedDeployment({ namespace, name })));
});

test('orphan deletion keeps the pod and drops its owner reference', async () => {
  const name = unique('orphan');
  const { core, apps } = await chain(name);
  await apps.deleteNamespacedReplicaSet({ namespace, name: `${name}-1`, propagationPolicy: 'Orphan' });
  assert.ok(await gone(() => apps.readNamespacedReplicaSet({ namespace, name: `${name}-1` })));
  const pod = await core.readNamespacedPod({ namespace, name: `${name}-1-a` });
  assert.equal(pod.metadata.ownerReferences, undefined);
  await assert.rejects(apps.deleteNamespacedDeployment({ namespace, name, propagationPolicy: 'No' }),
    (err) => codeOf(err) === 422);
});
