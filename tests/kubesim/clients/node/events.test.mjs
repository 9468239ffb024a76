// core/v1 and events.k8s.io/v1 Events as two views of one set, through the official JavaScript
// client: creation through either is seen converted through the other, field selectors on each
// view, watches across views, deletion through either.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { k8s, kubeConfig, unique, codeOf } from './kubesim_client.mjs';

const namespace = 'default';

test('an events.k8s.io event is a core event and back', async () => {
  const kc = kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const eventsApi = kc.makeApiClient(k8s.EventsV1Api);
  const name = unique('ev');
  const target = unique('node');
  const created = await eventsApi.createNamespacedEvent({ namespace, body: {
    metadata: { name }, eventTime: new Date('2024-01-01T00:00:00Z'),
    reportingController: 'example.com/ctl', reportingInstance: 'ctl-1', action: 'Drain',
    reason: 'Drained', note: 'drained ' + target, type: 'Normal',
    regarding: { kind: 'Node', name: target } } });
  assert.equal(created.note, 'drained ' + target);
  const asCore = await core.readNamespacedEvent({ name, namespace });
  assert.equal(asCore.message, 'drained ' + target);
  assert.equal(asCore.involvedObject.name, target);
  assert.equal(asCore.reportingComponent, 'example.com/ctl');
  assert.equal(asCore.metadata.resourceVersion, created.metadata.resourceVersion);

  const byRegarding = await eventsApi.listNamespacedEvent({ namespace,
    fieldSelector: `regarding.name=${target}` });
  assert.deepEqual(byRegarding.items.map((e) => e.metadata.name), [name]);
  const byInvolved = await core.listNamespacedEvent({ namespace,
    fieldSelector: `involvedObject.name=${target},reason=Drained` });
  assert.deepEqual(byInvolved.items.map((e) => e.metadata.name), [name]);

  await eventsApi.deleteNamespacedEvent({ name, namespace });
  await assert.rejects(core.readNamespacedEvent({ name, namespace }),
    (err) => codeOf(err) === 404);
});

test('a watch on events.k8s.io sees an event created through core/v1', async () => {
  const kc = kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const target = unique('pod');
  const seen = new Promise((resolve, reject) => {
    new k8s.Watch(kc).watch(`/apis/events.k8s.io/v1/namespaces/${namespace}/events`,
      { fieldSelector: `regarding.name=${target}` },
      (type, obj) => resolve({ type, obj }),
      (err) => { if (err) reject(err); })
      .then((req) => setTimeout(() => req.abort(), 5000));
  });
  await new Promise((r) => setTimeout(r, 300));
  const name = unique('ev');
  await core.createNamespacedEvent({ namespace, body: {
    metadata: { name }, involvedObject: { kind: 'Pod', name: target, namespace },
    reason: 'Pulled', message: 'pulled', type: 'Normal', count: 1,
    source: { component: 'kubelet' } } });
  const { type, obj } = await seen;
  assert.equal(type, 'ADDED');
  assert.equal(obj.apiVersion, 'events.k8s.io/v1');
  assert.equal(obj.metadata.name, name);
  assert.equal(obj.note, 'pulled');
  assert.deepEqual(obj.deprecatedSource, { component: 'kubelet' });
});
