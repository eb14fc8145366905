// s3rver.js - starts s3rver (npm, pinned in tests/node) on 127.0.0.1 for the
// publish tests. Usage: node --openssl-legacy-provider s3rver.js PORT DIR BUCKET...
// (s3rver's continuation tokens use DES, which Node 17+ keeps in the legacy
// provider.)
//
// s3rver 3.7.1 checks that a SigV4 access key exists but never verifies the
// signature ("Signature version 4 calculation is unimplemented"). This
// launcher wraps its authentication middleware with a verifier that rebuilds
// the canonical request from the request exactly as received (method, raw
// path and query, the received values of the signed headers; for a
// virtual-hosted request, s3rver's default serviceEndpoint amazonaws.com
// taking the bucket from Host <bucket>.s3[.<region>].amazonaws.com, the path
// without the bucket) and rejects a
// mismatch with 403 SignatureDoesNotMatch; it also requires host,
// x-amz-date and x-amz-content-sha256 to be signed. Besides s3rver's
// S3RVER/S3RVER pair it accepts FG_S3RVER_KEY / FG_S3RVER_SECRET, so tests
// can use distinctive fake credentials and grep for them. Requests are
// logged on stdout by s3rver; the verifier logs "sigv4 ok"/"sigv4 MISMATCH".
'use strict';
const path = require('path');
const crypto = require('crypto');
const nm = path.join(__dirname, '..', 'node', 'node_modules');
const secrets = new Map([['S3RVER', 'S3RVER']]);
if (process.env.FG_S3RVER_KEY && process.env.FG_S3RVER_SECRET)
  secrets.set(process.env.FG_S3RVER_KEY, process.env.FG_S3RVER_SECRET);

const hmac = (k, s) => crypto.createHmac('sha256', k).update(s, 'utf8').digest();
const sha256hex = (s) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');

function sigv4Error(msg) {
  const S3Error = require(path.join(nm, 's3rver', 'lib', 'models', 'error'));
  console.log(`sigv4 MISMATCH: ${msg}`);
  return new S3Error('SignatureDoesNotMatch', `fgpack test verifier: ${msg}`);
}

function verify(ctx) {
  const auth = ctx.get('authorization');
  if (!auth) return;
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) throw sigv4Error('malformed Authorization');
  const [, ak, day, region, service, signedList, sig] = m;
  const secret = secrets.get(ak);
  if (!secret) return; // s3rver answers InvalidAccessKeyId itself
  const signed = signedList.split(';');
  for (const h of ['host', 'x-amz-date', 'x-amz-content-sha256'])
    if (!signed.includes(h)) throw sigv4Error(`${h} not signed`);
  const date = ctx.get('x-amz-date');
  if (date.slice(0, 8) !== day) throw sigv4Error('date and scope differ');
  // as received: s3rver's vhost middleware has already put a Host's bucket
  // into ctx.url (and req.url) by now; Koa keeps the original
  const raw = ctx.originalUrl;
  const q = raw.indexOf('?');
  const rawPath = q < 0 ? raw : raw.slice(0, q);
  const query = q < 0 ? '' : raw.slice(q + 1);
  const pairs = query ? query.split('&').map((p) => {
    const i = p.indexOf('=');
    return i < 0 ? [p, ''] : [p.slice(0, i), p.slice(i + 1)];
  }) : [];
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const hdrs = signed.map((h) => {
    const v = ctx.req.headers[h];
    if (v === undefined) throw sigv4Error(`signed header ${h} not sent`);
    return `${h}:${String(v).trim().replace(/\s+/g, ' ')}\n`;
  }).join('');
  const canonical = [ctx.method, rawPath, pairs.map((p) => `${p[0]}=${p[1]}`).join('&'), hdrs,
    signedList, ctx.get('x-amz-content-sha256')].join('\n');
  const sts = ['AWS4-HMAC-SHA256', date, `${day}/${region}/${service}/aws4_request`,
    sha256hex(canonical)].join('\n');
  let k = hmac(`AWS4${secret}`, day);
  k = hmac(hmac(hmac(k, region), service), 'aws4_request');
  const want = crypto.createHmac('sha256', k).update(sts, 'utf8').digest('hex');
  if (want !== sig) throw sigv4Error(`${ctx.method} ${raw}`);
  console.log(`sigv4 ok ${ctx.method} ${raw}`);
}

const authPath = require.resolve(path.join(nm, 's3rver', 'lib', 'middleware', 'authentication'));
const origAuth = require(authPath);
require.cache[authPath].exports = function wrapped(...args) {
  const inner = origAuth(...args);
  return async (ctx, next) => {
    verify(ctx);
    return inner(ctx, next);
  };
};

// s3rver 3.7.1's FilesystemStore.putObject answers once the bytes are
// handed to the file's write stream, not once they are written, so a listing
// right after a PUT can see the object short ("listed with 0 bytes", seen
// under load). S3 itself is read-after-write consistent: the launcher's
// putObject returns only when the file holds every byte.
const FilesystemStore = require(path.join(nm, 's3rver', 'lib', 'stores', 'filesystem'));
const nodefs = require('fs');
const { Readable, Transform } = require('stream');
const { pipeline } = require('stream/promises');
FilesystemStore.prototype.putObject = async function putObjectWritten(object) {
  const file = this.getResourcePath(object.bucket, object.key, 'object');
  const md5 = crypto.createHash('md5');
  let size = 0;
  const count = new Transform({
    transform(chunk, enc, cb) {
      md5.update(chunk);
      size += chunk.length;
      cb(null, chunk);
    },
  });
  const src = Buffer.isBuffer(object.content) ? Readable.from([object.content]) : object.content;

  await nodefs.promises.mkdir(path.dirname(file), { recursive: true });
  await pipeline(src, count, nodefs.createWriteStream(file));
  const hex = md5.digest('hex');
  await this.putMetadata(object.bucket, object.key, object.metadata, hex);
  return { size, md5: hex };
};

const S3rver = require(path.join(nm, 's3rver'));
const { DUMMY_ACCOUNT } = require(path.join(nm, 's3rver', 'lib', 'models', 'account'));
for (const [k, v] of secrets) if (k !== 'S3RVER') DUMMY_ACCOUNT.createKeyPair(k, v);

const [port, dir, ...buckets] = process.argv.slice(2);
new S3rver({
  port: Number(port),
  address: '127.0.0.1',
  directory: dir,
  silent: false,
  configureBuckets: buckets.map((name) => ({ name, configs: [] })),
}).run().then(() => console.log(`s3rver listening on 127.0.0.1:${port}`));
