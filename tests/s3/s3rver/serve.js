// A real S3 server (s3rver) for the MinIO migration tests, with MinIO's health endpoints beside
// it on the same port (s3rver answers 404 for them): GET /minio/health/{live,ready,cluster}
// answers the status written in <dir>.health (200 when the file is absent), so a test can make
// the server "unhealthy"; with ?maintenance=true (MinIO's "would the cluster stay healthy
// without this server") the status in <dir>.health-maintenance when that file exists. Usage (tests/s3/s3rver_fixture.h):
//   node --openssl-legacy-provider serve.js DIR HOST PORT     (PORT 0: any; prints "listening N")
// --openssl-legacy-provider: s3rver's continuation tokens use DES, without it a listing past
// 1,000 keys answers 500 (ERR_OSSL_EVP_UNSUPPORTED).
// A multipart upload's ETag is made MinIO's and S3's ("<MD5 of the parts' MD5s>-<parts>", not
// the object's MD5; s3rver gives the object's MD5), so the tests meet ETags that prove nothing
// about the content.
// Listings treat keys as MinIO does (s3rver ignores encoding-type and writes control characters
// into its XML as they are): with ?encoding-type=url each Key (and Prefix, StartAfter) is
// URL-encoded as MinIO's s3URLEncode does and <EncodingType>url</EncodingType> is added; without
// it, a character XML 1.0 cannot carry becomes U+FFFD, as Go's encoding/xml writes it.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');
const S3rver = require('s3rver');

const [dir, host, port] = process.argv.slice(2);
const s3 = new S3rver({ directory: dir, silent: true, vhostBuckets: false });

// MinIO's s3URLEncode: every UTF-8 byte but A-Z a-z 0-9 - _ . / * as %XX, a space as '+'.
function s3UrlEncode(text) {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.\/*]/.test(c)) out += c;
    else if (c === ' ') out += '+';
    else out += '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}
function xmlSafe(text) {
  return text.replace(/[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '\uFFFD');
}
// Inside s3rver's XML encoder (its second middleware): sees the answer before it becomes XML.
s3.middleware.splice(2, 0, async (ctx, next) => {
  await next();
  const list = ctx.body && ctx.body.ListBucketResult;
  if (!list) return;
  const url = String(ctx.query['encoding-type'] || '').toLowerCase() === 'url';
  const encode = url ? s3UrlEncode : xmlSafe;
  for (const field of ['Prefix', 'StartAfter', 'Delimiter']) {
    if (typeof list[field] === 'string') list[field] = encode(list[field]);
  }
  for (const object of list.Contents || []) object.Key = encode(object.Key);
  if (url) list.EncodingType = 'url';
});
const handle = s3.callback();

const store = s3.store;
const putObjectMultipart = store.putObjectMultipart.bind(store);
store.putObjectMultipart = async (bucket, uploadId, parts) => {
  const uploadDir = path.join(store.getResourcePath(bucket, undefined, 'uploads'), uploadId);
  const key = fs.readFileSync(path.join(uploadDir, 'key'), 'utf8');
  const md5s = [...parts]
    .sort((a, b) => a.number - b.number)
    .map(p => Buffer.from(fs.readFileSync(path.join(uploadDir, `${p.number}.md5`), 'utf8'), 'hex'));
  const etag = `${crypto.createHash('md5').update(Buffer.concat(md5s)).digest('hex')}-${md5s.length}`;
  const result = await putObjectMultipart(bucket, uploadId, parts);
  fs.writeFileSync(store.getResourcePath(bucket, key, 'object.md5'), etag);
  return { ...result, md5: etag };
};

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
