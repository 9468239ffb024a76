// A real S3 server (s3rver) for the MinIO migration tests, with MinIO's health endpoints beside
// it on the same port (s3rver answers 404 for them): GET /minio/health/{live,ready,cluster}
// answers the status written in <dir>.health (200 when the file is absent), so a test can make
// the server "unhealthy"; with ?maintenance=true (MinIO's "would the cluster stay healthy
// without this server") the status in <dir>.health-maintenance when that file exists. Usage (tests/s3/s3rver_fixture.h):
//   node --openssl-legacy-provider serve.js DIR HOST PORT     (PORT 0: any; prints "listening N")
// --openssl-legacy-provider: s3rver's continuation tokens use DES, without it a listing past
// 1,000 keys answers 500 (ERR_OSSL_EVP_UNSUPPORTED).
'use strict';
const fs = require('fs');
const http = require('http');
const S3rver = require('s3rver');

const [dir, host, port] = process.argv.slice(2);
const s3 = new S3rver({ directory: dir, silent: true, vhostBuckets: false });
const handle = s3.callback();

function readStatus(file) {
  try {
    return parseInt(fs.readFileSync(file, 'utf8'), 10) || 200;
  } catch (e) {
    return null;
  }
}

function healthStatus(url) {
  const query = new URL(url, 'http://localhost').searchParams;
  if (query.get('maintenance') === 'true') {
    const maintenance = readStatus(dir + '.health-maintenance');
    if (maintenance !== null) return maintenance;
  }
  return readStatus(dir + '.health') || 200;
}

const server = http.createServer((req, res) => {
  if (req.url.startsWith('/minio/health/')) {
    res.writeHead(healthStatus(req.url), { 'Content-Length': '0' });
    res.end();
    return;
  }
  handle(req, res);
});
server.listen(parseInt(port, 10), host, () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
