// The official JavaScript client reaches kubesim at all: a typed list, a create and an informer
// that sees it. The area tests beside this file check the API's semantics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { k8s, kubeConfig, unique } from './kubesim_client.mjs';

test('a created namespace is listed', async () => {
  const core = kubeConfig().makeApiClient(k8s.CoreV1Api);
  const name = unique('smoke');
  await core.createNamespace({ body: { metadata: { name } } });
  const list = await core.listNamespace();
  const names = list.items.map((ns) => ns.metadata.name);
  assert.ok(names.includes(name), names.join(','));
});

test('an informer sees a created configmap', async () => {
  const kc = kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const name = unique('smoke');
  const informer = k8s.makeInformer(kc, '/api/v1/namespaces/default/configmaps',
    () => core.listNamespacedConfigMap({ namespace: 'default' }));
  const added = new Promise((resolve) => {
    informer.on('add', (obj) => { if (obj.metadata.name === name) resolve(obj); });
  });
  await informer.start();
  try {
    await core.createNamespacedConfigMap({
      namespace: 'default', body: { metadata: { name }, data: { k: 'v' } },
    });
    const obj = await Promise.race([added,
      new Promise((_, reject) => setTimeout(() => reject(new Error('no add in 10 s')), 10000))]);
    assert.equal(obj.data.k, 'v');
  } finally {
    await informer.stop();
  }
});
