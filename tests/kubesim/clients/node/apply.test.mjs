// Server-side apply through the official JavaScript client (KubernetesObjectApi.patch with
// PatchStrategy.ServerSideApply): create, managedFields, a 409 conflict with its causes, force.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { k8s, kubeConfig, unique, codeOf } from './kubesim_client.mjs';

const namespace = 'default';

function configMap(name, data) {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data };
}

function entry(obj, manager) {
  return (obj.metadata.managedFields ?? []).find((e) => e.manager === manager);
}

test('server-side apply creates, conflicts with another manager and forces', async () => {
  const objects = k8s.KubernetesObjectApi.makeApiClient(kubeConfig());
  const core = kubeConfig().makeApiClient(k8s.CoreV1Api);
  const name = unique('cm');
  const created = await objects.patch(configMap(name, { a: '1', b: '2' }), undefined, undefined,
    'node-applier', undefined, k8s.PatchStrategy.ServerSideApply);
  assert.deepEqual(created.data, { a: '1', b: '2' });
  const applied = entry(created, 'node-applier');
  assert.equal(applied.operation, 'Apply');
  assert.deepEqual(applied.fieldsV1, { 'f:data': { 'f:a': {}, 'f:b': {} } });

  // Another manager changes `a` with a merge patch (an Update entry), then the applier conflicts.
  await core.patchNamespacedConfigMap({ name, namespace, body: { data: { a: '5' } },
    fieldManager: 'node-editor' },
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
  await assert.rejects(
    objects.patch(configMap(name, { a: '1', b: '2' }), undefined, undefined, 'node-applier',
      undefined, k8s.PatchStrategy.ServerSideApply),
    (err) => {
      assert.equal(codeOf(err), 409);
      const status = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
      assert.equal(status.message,
        'Apply failed with 1 conflict: conflict with "node-editor" using v1: .data.a');
      assert.deepEqual(status.details.causes, [{ reason: 'FieldManagerConflict',
        message: 'conflict with "node-editor" using v1', field: '.data.a' }]);
      return true;
    });
  const forced = await objects.patch(configMap(name, { a: '1', b: '2' }), undefined, undefined,
    'node-applier', true, k8s.PatchStrategy.ServerSideApply);
  assert.equal(forced.data.a, '1');
  assert.equal(entry(forced, 'node-editor'), undefined);
});

test('a create records an Update entry for its field manager', async () => {
  const core = kubeConfig().makeApiClient(k8s.CoreV1Api);
  const name = unique('cm');
  const created = await core.createNamespacedConfigMap({ namespace, fieldManager: 'node-maker',
    body: { metadata: { name, labels: { app: 'x' } }, data: { k: 'v' } } });
  const e = entry(created, 'node-maker');
  assert.equal(e.operation, 'Update');
  assert.equal(e.apiVersion, 'v1');
  assert.deepEqual(e.fieldsV1, { 'f:data': { '.': {}, 'f:k': {} },
    'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} } } });
});
