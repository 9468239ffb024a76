// Server-side Tables read by @kubernetes/client-node's connection (its TLS options) with the
// Table Accept header kubectl sends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { k8s, kubeConfig, unique } from './kubesim_client.mjs';

const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';

async function getTable(kc, path) {
  const server = new URL(kc.getCurrentCluster().server);
  const opts = { hostname: server.hostname, port: server.port, path, method: 'GET', headers: { Accept: TABLE } };
  await kc.applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    const req = https.request(opts, (res) => {
      let data = '';
      res.on('data', (c) => { data += c; });
      res.on('end', () => resolve({ code: res.statusCode, body: JSON.parse(data) }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('pods come as a Table with the real columns', async () => {
  const kc = kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const name = unique('tbl');
  await core.createNamespacedPod({
    namespace: 'default',
    body: { metadata: { name }, spec: { containers: [{ name: 'main', image: 'busybox' }] } },
  });
  try {
    await core.patchNamespacedPodStatus({
      namespace: 'default',
      name,
      body: [{
        op: 'add',
        path: '/status',
        value: {
          phase: 'Running',
          containerStatuses: [{ name: 'main', ready: true, restartCount: 0, image: 'busybox', imageID: '', state: { running: {} } }],
        },
      }],
    });
    const { code, body } = await getTable(kc, '/api/v1/namespaces/default/pods');
    assert.equal(code, 200);
    assert.equal(body.kind, 'Table');
    assert.deepEqual(body.columnDefinitions.filter((c) => c.priority === 0).map((c) => c.name),
      ['Name', 'Ready', 'Status', 'Restarts', 'Age']);
    assert.deepEqual(body.columnDefinitions.filter((c) => c.priority === 1).map((c) => c.name),
      ['IP', 'Node', 'Nominated Node', 'Readiness Gates']);
    const row = body.rows.find((r) => r.cells[0] === name);
    assert.deepEqual(row.cells.slice(1, 4), ['1/1', 'Running', '0']);
    assert.deepEqual(row.cells.slice(5), ['<none>', '<none>', '<none>', '<none>']);
    assert.equal(row.object.kind, 'PartialObjectMetadata');
  } finally {
    await core.deleteNamespacedPod({ namespace: 'default', name, gracePeriodSeconds: 0 });
  }
});

test('a custom resource list is a Table with its printer columns', async () => {
  const kc = kubeConfig();
  const { body } = await getTable(kc, '/apis/monitoring.coreos.com/v1/prometheuses?includeObject=Object');
  assert.deepEqual(body.columnDefinitions.map((c) => [c.name, c.type, c.priority]), [
    ['Name', 'string', 0], ['Version', 'string', 0], ['Desired', 'integer', 0], ['Ready', 'integer', 0],
    ['Reconciled', 'string', 0], ['Available', 'string', 0], ['Age', 'date', 0], ['Paused', 'boolean', 1]]);
});
