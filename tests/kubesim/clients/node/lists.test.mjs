// Lists and watches through the official JavaScript client: consistent pages, exact lists, the
// API's 400/422 answers, typed field selectors and a sendInitialEvents watch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { codeOf, k8s, kubeConfig, unique } from './kubesim_client.mjs';

const namespace = 'default';

async function makeSet(core, label, count) {
  const names = [];
  for (let i = 0; i < count; i++) {
    const name = `${label}-${i}`;
    await core.createNamespacedConfigMap({
      namespace, body: { metadata: { name, labels: { set: label } }, data: { k: 'v' } },
    });
    names.push(name);
  }
  return names;
}

test('later pages are served as of the first page', async () => {
  const core = kubeConfig().makeApiClient(k8s.CoreV1Api);
  const label = unique('pages');
  const names = await makeSet(core, label, 4);
  const labelSelector = `set=${label}`;
  const first = await core.listNamespacedConfigMap({ namespace, labelSelector, limit: 2 });
  assert.deepEqual(first.items.map((i) => i.metadata.name), names.slice(0, 2));
  await core.deleteNamespacedConfigMap({ namespace, name: names[3] });
  const second = await core.listNamespacedConfigMap({
    namespace, labelSelector, limit: 2, _continue: first.metadata._continue,
  });
  assert.deepEqual(second.items.map((i) => i.metadata.name), names.slice(2));
  assert.equal(second.metadata.resourceVersion, first.metadata.resourceVersion);
});

test('an exact list shows the past; bad options are 422 and 400', async () => {
  const core = kubeConfig().makeApiClient(k8s.CoreV1Api);
  const label = unique('exact');
  const [name] = await makeSet(core, label, 1);
  const before = await core.listNamespacedConfigMap({ namespace, labelSelector: `set=${label}` });
  await core.replaceNamespacedConfigMap({
    namespace, name, body: { metadata: { name }, data: { k: 'new' } },
  });
  const past = await core.listNamespacedConfigMap({
    namespace, labelSelector: `set=${label}`,
    resourceVersion: before.metadata.resourceVersion, resourceVersionMatch: 'Exact',
  });
  assert.equal(past.items[0].data.k, 'v');
  await assert.rejects(core.listNamespacedConfigMap({ namespace, resourceVersionMatch: 'Exact' }),
    (err) => codeOf(err) === 422);
  await assert.rejects(core.listNode({ fieldSelector: 'status.phase=Ready' }),
    (err) => codeOf(err) === 400 && String(err.body).includes('field label not supported'));
});

test('spec.unschedulable=false selects a node without the field', async () => {
  const core = kubeConfig().makeApiClient(k8s.CoreV1Api);
  const name = unique('node');
  await core.createNode({ body: { metadata: { name } } });
  try {
    const found = await core.listNode({ fieldSelector: 'spec.unschedulable=false' });
    assert.ok(found.items.some((n) => n.metadata.name === name));
    const cordoned = await core.listNode({ fieldSelector: 'spec.unschedulable=true' });
    assert.ok(!cordoned.items.some((n) => n.metadata.name === name));
  } finally {
    await core.deleteNode({ name });
  }
});

test('a sendInitialEvents watch streams the state then the initial-events-end bookmark',
  async () => {
    const kc = kubeConfig();
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const label = unique('initial');
    await makeSet(core, label, 2);
    const events = [];
    let request;
    const done = new Promise((resolve, reject) => {
      new k8s.Watch(kc).watch(`/api/v1/namespaces/${namespace}/configmaps`, {
        labelSelector: `set=${label}`, sendInitialEvents: true,
        resourceVersionMatch: 'NotOlderThan', allowWatchBookmarks: true,
      }, (type, obj) => {
        events.push({ type, obj });
        if (type === 'BOOKMARK') resolve();
      }, (err) => (err ? reject(err) : resolve())).then((r) => { request = r; }, reject);
      setTimeout(() => reject(new Error('no bookmark in 10 s')), 10000).unref();
    });
    await done;
    request?.abort();
    assert.deepEqual(events.map((e) => e.type), ['ADDED', 'ADDED', 'BOOKMARK']);
    assert.equal(events[2].obj.metadata.annotations['k8s.io/initial-events-end'], 'true');
  });
