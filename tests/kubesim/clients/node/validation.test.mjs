// Validation, admission, dry run and defaulting through the official JavaScript client: 422
// Invalid with the real Status causes, namespaces (404, Terminating, 403, removal), server-side
// dry run (nothing stored, no watch event, 422 for a bad value), pods Pending with defaults,
// Secrets (stringData, tls, base64), immutable ConfigMaps, pod spec immutability.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { k8s, kubeConfig, unique, codeOf } from './kubesim_client.mjs';

const kc = kubeConfig();
const core = kc.makeApiClient(k8s.CoreV1Api);
const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

function statusOf(err) {
  const body = err?.body;
  if (typeof body === 'string') {
    try { return JSON.parse(body); } catch { return {}; }
  }
  return body ?? {};
}

async function expectError(code, promise) {
  try {
    await promise;
  } catch (err) {
    assert.equal(codeOf(err), code, String(err));
    return statusOf(err);
  }
  assert.fail(`expected HTTP ${code}`);
}

async function eventually(check, what) {
  const deadline = Date.now() + 10000;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('an invalid name is 422 Invalid with the causes', async () => {
  const status = await expectError(422, core.createNamespacedConfigMap({
    namespace: 'default', body: { metadata: { name: 'Bad_Name' } },
  }));
  assert.equal(status.reason, 'Invalid');
  assert.match(status.message,
    /^ConfigMap "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/);
  assert.deepEqual(status.details.causes.map((c) => [c.reason, c.field]),
    [['FieldValueInvalid', 'metadata.name']]);
});

test('namespaces: defaults exist, missing is 404, deletion terminates and removes', async () => {
  const names = (await core.listNamespace()).items.map((n) => n.metadata.name);
  for (const n of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
    assert.ok(names.includes(n), n);
  }
  let status = await expectError(404, core.createNamespacedConfigMap({
    namespace: 'missing', body: { metadata: { name: 'x' } },
  }));
  assert.equal(status.message, 'namespaces "missing" not found');

  const ns = unique('ns');
  const created = await core.createNamespace({ body: { metadata: { name: ns } } });
  assert.equal(created.status.phase, 'Active');
  assert.equal(created.metadata.labels['kubernetes.io/metadata.name'], ns);
  await core.createNamespacedConfigMap({
    namespace: ns, body: { metadata: { name: 'held', finalizers: ['example.com/hold'] } },
  });
  await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'free' } } });
  await core.deleteNamespace({ name: ns });
  const terminating = await core.readNamespace({ name: ns });
  assert.equal(terminating.status.phase, 'Terminating');
  assert.deepEqual(terminating.spec.finalizers, ['kubernetes']);
  status = await expectError(403, core.createNamespacedConfigMap({
    namespace: ns, body: { metadata: { name: 'late' } },
  }));
  assert.equal(status.message,
    `configmaps "late" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`);
  await eventually(async () => (await core.listNamespacedSecret({ namespace: ns })).items.length === 0,
    'the secret to go');
  status = await expectError(422, core.patchNamespacedConfigMap({
    name: 'held', namespace: ns,
    body: [{ op: 'add', path: '/metadata/finalizers/-', value: 'example.com/more' }],
  }));
  assert.match(status.message, /no new finalizers can be added if the object is being deleted/);
  await core.patchNamespacedConfigMap({
    name: 'held', namespace: ns, body: [{ op: 'remove', path: '/metadata/finalizers' }],
  });
  await eventually(async () => {
    try {
      await core.readNamespace({ name: ns });
      return false;
    } catch (err) {
      return codeOf(err) === 404;
    }
  }, 'the namespace to go');
});

test('dry run stores nothing and sends no watch event', async () => {
  const list = await core.listNamespacedConfigMap({ namespace: 'default' });
  const rv = list.metadata.resourceVersion;
  const seen = [];
  const marker = unique('marker');
  let markerSeen;
  const markerPromise = new Promise((resolve) => { markerSeen = resolve; });
  const controller = await new k8s.Watch(kc).watch('/api/v1/namespaces/default/configmaps',
    { resourceVersion: rv }, (type, obj) => {
      seen.push(`${type} ${obj.metadata.name}`);
      if (obj.metadata.name === marker) markerSeen();
    }, () => {});
  try {
    const name = unique('dry');
    const answered = await core.createNamespacedConfigMap({
      namespace: 'default', body: { metadata: { name }, data: { a: 'b' } }, dryRun: 'All',
    });
    assert.equal(answered.metadata.name, name);
    assert.equal(answered.metadata.resourceVersion, undefined);
    await expectError(404, core.readNamespacedConfigMap({ name, namespace: 'default' }));
    await core.createNamespacedConfigMap({
      namespace: 'default', body: { metadata: { name }, data: { a: 'b' } },
    });
    const patched = await core.patchNamespacedConfigMap({
      name, namespace: 'default', body: { data: { a: 'c' } }, dryRun: 'All',
    }, mergePatch);
    assert.equal(patched.data.a, 'c');
    await core.deleteNamespacedConfigMap({ name, namespace: 'default', dryRun: 'All' });
    const got = await core.readNamespacedConfigMap({ name, namespace: 'default' });
    assert.equal(got.data.a, 'b');
    const status = await expectError(422, core.deleteNamespacedConfigMap({
      name, namespace: 'default', dryRun: 'Maybe',
    }));
    assert.equal(status.details.kind, 'DeleteOptions');
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: marker } } });
    await Promise.race([markerPromise,
      new Promise((_, reject) => setTimeout(() => reject(new Error('no marker in 10 s')), 10000))]);
    assert.deepEqual(seen, [`ADDED ${name}`, `ADDED ${marker}`]);
  } finally {
    controller.abort();
  }
});

test('pods start Pending with the defaults and keep their spec', async () => {
  const name = unique('pod');
  const pod = await core.createNamespacedPod({
    namespace: 'default',
    body: {
      metadata: { name },
      spec: { containers: [{ name: 'c', image: 'busybox:1.36', resources: { requests: { cpu: '100m' } } }] },
      status: { phase: 'Running' },
    },
  });
  assert.equal(pod.status.phase, 'Pending');
  assert.equal(pod.status.qosClass, 'Burstable');
  assert.equal(pod.spec.dnsPolicy, 'ClusterFirst');
  assert.equal(pod.spec.schedulerName, 'default-scheduler');
  assert.equal(pod.spec.terminationGracePeriodSeconds, 30);
  assert.deepEqual(pod.spec.tolerations.map((t) => [t.key, t.effect, t.tolerationSeconds]), [
    ['node.kubernetes.io/not-ready', 'NoExecute', 300],
    ['node.kubernetes.io/unreachable', 'NoExecute', 300],
  ]);
  const updated = await core.patchNamespacedPod({
    name, namespace: 'default', body: [{ op: 'replace', path: '/spec/containers/0/image', value: 'busybox:1.37' }],
  });
  assert.equal(updated.spec.containers[0].image, 'busybox:1.37');
  const status = await expectError(422, core.patchNamespacedPod({
    name, namespace: 'default', body: [{ op: 'replace', path: '/spec/restartPolicy', value: 'Never' }],
  }));
  assert.match(status.message, /^Pod ".*" is invalid: spec: Forbidden: pod updates may not change fields other than/);
});

test('secrets fold stringData, need tls keys and valid base64', async () => {
  const name = unique('secret');
  const s = await core.createNamespacedSecret({
    namespace: 'default', body: { metadata: { name }, stringData: { token: 'abc' } },
  });
  assert.deepEqual(s.data, { token: 'YWJj' });
  assert.equal(s.stringData, undefined);
  let status = await expectError(422, core.createNamespacedSecret({
    namespace: 'default',
    body: { metadata: { name: unique('tls') }, type: 'kubernetes.io/tls', data: { 'tls.key': 'eA==' } },
  }));
  assert.deepEqual(status.details.causes, [
    { reason: 'FieldValueRequired', message: 'Required value', field: 'data[tls.crt]' },
  ]);
  status = await expectError(400, core.createNamespacedSecret({
    namespace: 'default', body: { metadata: { name: unique('b64') }, data: { k: 'YWJj=' } },
  }));
  assert.match(status.message, /illegal base64 data at input byte 4/);
});

test('an immutable configmap keeps its data', async () => {
  const name = unique('frozen');
  await core.createNamespacedConfigMap({
    namespace: 'default', body: { metadata: { name }, immutable: true, data: { a: 'b' } },
  });
  const status = await expectError(422, core.patchNamespacedConfigMap({
    name, namespace: 'default', body: { data: { a: 'c' } },
  }, mergePatch));
  assert.equal(status.message,
    `ConfigMap "${name}" is invalid: data: Forbidden: field is immutable when \`immutable\` is set`);
});
