// CustomResourceDefinitions through @kubernetes/client-node: the API exists only while its CRD
// does, the CRD is Established at once, writes are pruned and validated (422 with causes),
// status and scale subresources as declared, deleting the CRD removes its objects and API.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { k8s, kubeConfig, unique, codeOf } from './kubesim_client.mjs';

const GROUP = 'nodetest.example.com';

function definition(plural, kind) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { plural, singular: kind.toLowerCase(), kind },
      versions: [{
        name: 'v1',
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                required: ['size'],
                properties: {
                  size: { type: 'string', _enum: ['S', 'M', 'L'] }, // the client's name for "enum"
                  replicas: { type: 'integer', maximum: 5 },
                },
              },
              status: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
            },
          },
        },
        subresources: { status: {}, scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas' } },
      }],
    },
  };
}

function statusOf(err) {
  const body = err?.body;
  if (typeof body === 'string') { try { return JSON.parse(body); } catch { return {}; } }
  return body ?? {};
}

async function rejects(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  assert.fail('the call succeeded');
}

function setup() {
  const kc = kubeConfig();
  const suffix = unique('x').split('-')[1];
  return {
    ext: kc.makeApiClient(k8s.ApiextensionsV1Api),
    custom: kc.makeApiClient(k8s.CustomObjectsApi),
    kind: `Widget${suffix}`,
    plural: `widgets${suffix}`,
  };
}

const ns = 'default';

test('a custom resource is served only while its definition exists', async () => {
  const { ext, custom, kind, plural } = setup();
  const base = { group: GROUP, version: 'v1', namespace: ns, plural };
  assert.equal(codeOf(await rejects(custom.listNamespacedCustomObject(base))), 404);
  const crd = await ext.createCustomResourceDefinition({ body: definition(plural, kind) });
  const conditions = Object.fromEntries(crd.status.conditions.map((c) => [c.type, c.status]));
  assert.deepEqual(conditions, { NamesAccepted: 'True', Established: 'True' });
  assert.equal(crd.status.acceptedNames.kind, kind);

  const created = await custom.createNamespacedCustomObject({
    ...base, body: { apiVersion: `${GROUP}/v1`, kind, metadata: { name: 'w1' }, spec: { size: 'M', color: 'red' } },
  });
  assert.equal(created.spec.color, undefined, 'an unknown field is pruned');
  assert.equal(created.spec.size, 'M');

  const err = await rejects(custom.createNamespacedCustomObject({
    ...base, body: { apiVersion: `${GROUP}/v1`, kind, metadata: { name: 'w2' }, spec: { size: 'XL', replicas: 9 } },
  }));
  assert.equal(codeOf(err), 422);
  const status = statusOf(err);
  assert.equal(status.reason, 'Invalid');
  assert.deepEqual(status.details.causes.map((c) => [c.reason, c.field]).sort(), [
    ['FieldValueInvalid', 'spec.replicas'], ['FieldValueNotSupported', 'spec.size']]);
  assert.match(status.message, new RegExp(`^${kind}\\.${GROUP} "w2" is invalid: \\[`));

  await custom.patchNamespacedCustomObjectStatus({
    ...base, name: 'w1', body: [{ op: 'add', path: '/status', value: { replicas: 1, phase: 'Up' } }],
  });
  const scale = await custom.getNamespacedCustomObjectScale({ ...base, name: 'w1' });
  assert.equal(scale.status.replicas, 1);
  await custom.patchNamespacedCustomObjectScale({
    ...base, name: 'w1', body: [{ op: 'replace', path: '/spec/replicas', value: 4 }],
  });
  const got = await custom.getNamespacedCustomObject({ ...base, name: 'w1' });
  assert.equal(got.spec.replicas, 4);
  assert.equal(got.status.phase, 'Up');

  await ext.deleteCustomResourceDefinition({ name: `${plural}.${GROUP}` });
  assert.equal(codeOf(await rejects(ext.readCustomResourceDefinition({ name: `${plural}.${GROUP}` }))), 404);
  assert.equal(codeOf(await rejects(custom.listNamespacedCustomObject(base))), 404);
  await ext.createCustomResourceDefinition({ body: definition(plural, kind) });
  try {
    const listed = await custom.listNamespacedCustomObject(base);
    assert.deepEqual(listed.items, [], 'the objects went with the old definition');
  } finally {
    await ext.deleteCustomResourceDefinition({ name: `${plural}.${GROUP}` });
  }
});

test('the preloaded definitions are real objects', async () => {
  const { ext } = setup();
  const list = await ext.listCustomResourceDefinition();
  const names = list.items.map((c) => c.metadata.name);
  for (const n of ['cephclusters.ceph.rook.io', 'cephblockpools.ceph.rook.io', 'prometheuses.monitoring.coreos.com']) {
    assert.ok(names.includes(n), names.join(','));
  }
});
