#!/usr/bin/env python3
"""s3faultd.py - a small S3-compatible server that misbehaves on purpose
(Python stdlib only), for tests/integration/publish_interop.sh.

Path-style (/<bucket>/<key>), and virtual-hosted (Host <bucket>.<SUFFIX>,
path /<key>) for each --vhost SUFFIX given (as AWS, and MinIO with
MINIO_DOMAIN, take the bucket from the host). PUT object, CreateMultipartUpload
(POST ?uploads), UploadPart (PUT ?partNumber&uploadId), CompleteMultipartUpload
(POST ?uploadId), AbortMultipartUpload (DELETE ?uploadId), DELETE object,
ListObjectsV2 (GET ?list-type=2: prefix, max-keys, continuation-token,
encoding-type), HEAD, GET with Range. Signatures are NOT checked (s3rver's
launcher and sigv4_botocore.sh do that); requests must carry an Authorization
header all the same. Objects live as files under --root/<bucket>/ (the key
percent-encoded into one file name), so a test can read them back directly.

Behaviours come from a JSON rules file re-read on every request:
  [{"op": OP, "key": "<glob>", "fault": KIND, "times": K, ...options}]
OP is put, create, part, complete, abort, delete, list, head or get (absent:
every request); "times" K makes the rule apply to K matching requests only;
"port": "main" limits it to requests on the first --port. KIND, each with
the documented fact or known server behaviour it stands for:
  status    code=C s3code=NAME [retry_after=S | retry_after_date=S]: answer C
            with an S3 <Error> XML body (AWS S3 error responses: 503 SlowDown
            "Reduce your request rate", 500 InternalError "We encountered an
            internal error. Please try again."; 400 RequestTimeout), and a
            Retry-After in seconds or as an HTTP-date S seconds ahead (RFC
            9110 10.2.3 allows both; proxies in front of a store send either)
  error200  CompleteMultipartUpload answers 200, sends blank lines, then an
            <Error> body and does NOT complete (AWS CompleteMultipartUpload
            docs: "a request could fail after the initial 200 OK response has
            been sent ... check the response body")
  lost      does the operation, then closes the connection without an answer
            (a completed upload whose answer was lost; the retry then meets
            404 NoSuchUpload, as AWS answers for a finished upload id)
  skew      by=S: the server's clock runs S seconds ahead; a request whose
            x-amz-date is more than 15 minutes off gets 403
            RequestTimeTooSkewed (AWS S3 error codes list; the answer carries
            RequestTime, ServerTime and MaxAllowedSkewMilliseconds)
  redirect  to=URL [code=307]: answer 307 TemporaryRedirect with Location =
            URL + the original path and query, and x-amz-bucket-region
            (AWS: a request sent to the wrong regional endpoint; the client
            must re-send the body to the new endpoint); cdn=1 (GET) answers
            302 with a RELATIVE Location, /_cdn/<bucket>/<key>?sig=..., which
            this server then serves without Authorization (a gateway handing
            a GetObject to a CDN path on its own host; RFC 9110 10.2.2: a
            Location may be a relative reference)
  region    name=R: the bucket lives in region R; a request signed for another
            region gets 400 AuthorizationHeaderMalformed naming R in <Region>
            (AWS S3 error codes; MinIO answers so too: "the region 'us-east-1'
            is wrong; expecting 'R'"), with x-amz-bucket-region: R (AWS);
            style=301 answers 301 PermanentRedirect instead, without a
            Location, R only in x-amz-bucket-region (AWS's answer to a
            request at an endpoint of another region: "The bucket you are
            attempting to access must be addressed using the specified
            endpoint"); with style=301 a request whose Host names another
            AWS region (s3.<region>.amazonaws.com, whatever it was signed
            for) gets that 301 too: AWS serves a bucket only at its own
            region's endpoint
  rangecap  cap=N: a ranged GET's 206 carries at most N bytes (a CDN in front
            of the store capping ranges; RFC 9110 14.4: Content-Range says
            which bytes came)
  rangeback back=N: a ranged GET's 206 starts N bytes before the asked start
            (its Content-Range says so)
  lower     every response header name in lowercase (what HTTP/2 gives)
  unquoted  ETags without their double quotes (some gateways; RFC 9110
            wants quotes, AWS sends them)
  chunked   every answer with a body sent with Transfer-Encoding: chunked, no
            Content-Length (nginx/Ceph RGW in front of listings)
  gzip      every 200 GET (objects, listings) sent with Content-Encoding: gzip
            unless the request's Accept-Encoding rules gzip out (RFC 9110
            12.5.3: a request without the field accepts any coding; a proxy
            or CDN in front of the store may compress so)
  headnolen HEAD without Content-Length (a proxy dropping it; HTTP/2 HEAD)
  no100     never answer Expect: 100-continue (many proxies and servers; curl
            then waits 1 s before sending the body)
  entities  every non-ASCII character of a listed key written as &#xHEX; and
            '&' as &amp; (valid XML any server may emit)
  nourlenc  ignore encoding-type=url in ListObjectsV2 (an older server): keys
            as they are, no <EncodingType>. By default it is honoured as AWS
            does (ListObjectsV2 docs: Key, Prefix, ... percent-encoded and
            <EncodingType>url</EncodingType> in the answer; '+' for a space,
            which botocore decodes with unquote_plus). A key holding a
            character XML 1.0 cannot carry is then written as it is.
  close     close the connection after every answer (keep-alive dropped)
  listlag   listings leave out objects written in the last 30 s, while GET
            and HEAD find them (a store whose listings are eventually
            consistent: OpenStack Swift's S3 API, AWS S3 before December
            2020: "a process writes a new object ... and immediately lists
            keys within its bucket. Until the change is fully propagated,
            the object might not appear in the list")
  vhostonly refuse a path-style request to a --vhost host with 400
            InvalidRequest (a service that serves buckets by host name only;
            AWS announced the end of path-style requests for new buckets)
  v1list    answer every listing as ListObjects version 1 (list-type=2
            ignored, as a server that only has v1 does): pages by `marker`
            (keys after it), <Marker> echoed, no KeyCount and no continuation
            tokens; without a delimiter no <NextMarker> (AWS ListObjects
            docs: the client then takes the last Key as the next marker)
Several global kinds may be on at once: rules are all read, first rule wins
only for status/error200/lost/skew/redirect/region.
--tls CERT KEY serves the first --port over TLS (the others stay plain http).
Every request is logged as one JSON line (method, op, path, host, bucket,
port, status, expect, bytes, time) to --log before the body of the answer goes out."""
import argparse, base64, fnmatch, gzip, hashlib, json, os, re, threading, time, email.utils
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs, quote, quote_plus, unquote

from rules import gzip_ok, load_rules  # this folder: the script's own, first on sys.path

ARGS = None
COUNTS = {}
LOCK = threading.Lock()
UPLOADS = {}   # upload id -> {'bucket', 'key', 'parts': {n: (etag, bytes)}}
ETAGS = {}     # (bucket, key) -> ETag of a multipart object (md5 of the part md5s, "-N")
GLOBAL = ('lower', 'unquoted', 'chunked', 'gzip', 'listlag', 'headnolen', 'no100', 'entities', 'nourlenc', 'close', 'v1list', 'vhostonly')




def rule_matches(r, op, key, port):
    if 'op' in r and r['op'] != op:
        return False
    if 'key' in r and not fnmatch.fnmatchcase(key or '', r['key']):
        return False
    if r.get('port') == 'main' and port != ARGS.port[0]:
        return False
    if 'times' in r:
        k = json.dumps(r, sort_keys=True)
        with LOCK:
            n = COUNTS.get(k, 0)
            if n >= int(r['times']):
                return False
            COUNTS[k] = n + 1
    return True


def esc(s, entities=False):
    s = s.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;').replace('"', '&quot;')
    if entities:
        s = ''.join(c if ord(c) < 0x80 else '&#x%X;' % ord(c) for c in s)
    return s


def objfile(bucket, key):
    return os.path.join(ARGS.root, bucket, quote(key, safe=''))


class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt, *a):
        pass

    def parse_request(self):
        # one handler object serves every request of a kept-alive connection
        self.__dict__.pop('_flags', None)
        self.saw_expect = False
        self.date_override = None
        return super().parse_request()

    def handle_expect_100(self):
        self.saw_expect = True
        if 'no100' in self.flags():
            return True   # never say 100 Continue; the client must send anyway
        return super().handle_expect_100()

    def flags(self):
        if not hasattr(self, '_flags'):
            self._flags = set()
            for r in load_rules(ARGS.faults):
                if r.get('fault') in GLOBAL and 'op' not in r:
                    self._flags.add(r['fault'])
        return self._flags

    def send_header(self, k, v):
        if 'lower' in self.flags():
            k = k.lower()
        super().send_header(k, v)

    def log(self, status, nbytes):
        rec = {'method': self.command, 'op': getattr(self, 'op', None), 'path': self.path,
               'host': self.headers.get('Host'), 'bucket': getattr(self, 'bucket', None),
               'port': self.server.server_port, 'status': status, 'bytes': nbytes,
               'region': self.signed_region(),
               'expect': getattr(self, 'saw_expect', False) or bool(self.headers.get('Expect')),
               'time': round(time.time(), 3)}
        with LOCK:
            with open(ARGS.log, 'a') as f:
                f.write(json.dumps(rec) + '\n')

    def signed_region(self):
        # Authorization: AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/s3/aws4_request, ...
        a = self.headers.get('Authorization') or ''
        i = a.find('Credential=')
        parts = a[i + 11:].split(',')[0].split('/') if i >= 0 else []
        return parts[2] if len(parts) >= 5 else None

    def answer(self, code, body=b'', headers=(), length=None):
        if ('gzip' in self.flags() and body and self.command == 'GET' and code == 200 and
                gzip_ok(self.headers.get('Accept-Encoding'))):
            body = gzip.compress(body, mtime=0)
            headers = list(headers) + [('Content-Encoding', 'gzip')]
            length = None
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        chunked = 'chunked' in self.flags() and body and self.command != 'HEAD'
        if chunked:
            self.send_header('Transfer-Encoding', 'chunked')
        elif not (self.command == 'HEAD' and 'headnolen' in self.flags()):
            self.send_header('Content-Length', str(len(body) if length is None else length))
        if 'close' in self.flags():
            self.send_header('Connection', 'close')
            self.close_connection = True
        self.end_headers()
        self.log(code, 0 if self.command == 'HEAD' else len(body))
        if self.command == 'HEAD':
            return
        if chunked:
            for i in range(0, len(body), 1000):
                c = body[i:i + 1000]
                self.wfile.write(b'%x\r\n%s\r\n' % (len(c), c))
            self.wfile.write(b'0\r\n\r\n')
        else:
            self.wfile.write(body)

    def error(self, code, s3code, msg, extra='', headers=()):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>%s'
                '<RequestId>4442587FB7D0A2F9</RequestId></Error>' % (s3code, esc(msg), extra)).encode()
        hd = [('Content-Type', 'application/xml'), ('x-amz-request-id', '4442587FB7D0A2F9')] + list(headers)
        if 'retry_after' in (self.rule or {}):
            hd.append(('Retry-After', str(self.rule['retry_after'])))
        if 'retry_after_date' in (self.rule or {}):
            hd.append(('Retry-After', email.utils.formatdate(time.time() + float(self.rule['retry_after_date']), usegmt=True)))
        self.answer(code, body, hd)

    def etag_hdr(self, etag):
        return etag if 'unquoted' in self.flags() else '"%s"' % etag

    def read_body(self):
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            out = b''
            while True:
                n = int(self.rfile.readline().split(b';')[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get('Content-Length') or 0))

    def do_GET(self):
        self.route()

    def do_HEAD(self):
        self.route()

    def do_PUT(self):
        self.route()

    def do_POST(self):
        self.route()

    def do_DELETE(self):
        self.route()

    def vhost_bucket(self):
        """The bucket a Host <bucket>.<SUFFIX> names, '' for a host that is a
        --vhost SUFFIX itself, None for any other host."""
        host = (self.headers.get('Host') or '').lower()
        if not host.startswith('['):
            host = host.rsplit(':', 1)[0]
        for suf in ARGS.vhost or ():
            if host == suf:
                return ''
            if host.endswith('.' + suf):
                return host[:-len(suf) - 1]
        return None

    def route(self):
        u = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        vb = self.vhost_bucket()
        if vb:
            # virtual-hosted: the whole path is the key ("/" alone: the bucket)
            bucket, key = vb, (unquote(u.path)[1:] or None)
        else:
            parts = unquote(u.path).lstrip('/').split('/', 1)
            bucket, key = parts[0], (parts[1] if len(parts) > 1 else None)
        self.bucket = bucket
        if vb == '' and 'vhostonly' in self.flags():
            self.op, self.rule = None, None
            self.read_body() if self.command in ('PUT', 'POST') else None
            return self.error(400, 'InvalidRequest', 'path-style requests are not supported here')
        if bucket == '_cdn' and key and self.command in ('GET', 'HEAD'):
            # the "CDN" path a cdn=1 redirect points to: no signature needed
            b2, _, k2 = key.partition('/')
            self.op, self.rule = 'cdn', None
            st = self.stat(b2, k2)
            if not st or 'sig' not in q:
                return self.error(403, 'AccessDenied', 'Access Denied')
            return self.answer(200, st[0], [('ETag', '"%s"' % st[1])])
        m = self.command
        op = {'GET': 'list' if key is None else 'get', 'HEAD': 'head', 'DELETE': 'abort' if 'uploadId' in q else 'delete',
              'POST': 'create' if 'uploads' in q else 'complete',
              'PUT': 'part' if 'partNumber' in q else 'put'}[m]
        self.op = op
        # a body sent (or not) before the answer must be read first; a rule
        # that answers without reading it closes the connection instead
        body = self.read_body() if m in ('PUT', 'POST') else b''
        self.rule = None
        for r in load_rules(ARGS.faults):
            if r.get('fault') in GLOBAL and 'op' not in r:
                continue
            if rule_matches(r, op, key, self.server.server_port):
                self.rule = r
                break
        kind = self.rule.get('fault') if self.rule else None
        if not self.headers.get('Authorization'):
            return self.error(403, 'AccessDenied', 'Access Denied')
        if kind == 'skew':
            amz = self.headers.get('x-amz-date', '')
            try:
                t = time.mktime(time.strptime(amz, '%Y%m%dT%H%M%SZ')) - time.timezone
            except ValueError:
                return self.error(403, 'AccessDenied', 'no x-amz-date')
            now = time.time() + float(self.rule.get('by', 3600))
            if abs(now - t) > 900:
                self.date_override = now
                return self.error(403, 'RequestTimeTooSkewed',
                                  'The difference between the request time and the current time is too large.',
                                  '<RequestTime>%s</RequestTime><ServerTime>%s</ServerTime>'
                                  '<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>' %
                                  (amz, time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))))
        m_host = re.match(r'(?:.+\.)?s3[.-](?:dualstack\.)?([a-z0-9-]+)\.amazonaws\.com(?::\d+)?$',
                          (self.headers.get('Host') or '').lower())
        host_region = m_host.group(1) if m_host else None
        if kind == 'region' and (self.signed_region() != self.rule['name'] or
                                 (self.rule.get('style') == '301' and host_region and
                                  host_region != self.rule['name'])):
            hd = [('x-amz-bucket-region', self.rule['name'])]
            if self.rule.get('style') == '301':
                return self.error(301, 'PermanentRedirect',
                                  'The bucket you are attempting to access must be addressed using the specified '
                                  'endpoint. Please send all future requests to this endpoint.',
                                  '<Endpoint>s3.%s.amazonaws.com</Endpoint><Bucket>%s</Bucket>' %
                                  (esc(self.rule['name']), esc(bucket)), hd)
            return self.error(400, 'AuthorizationHeaderMalformed',
                              "The authorization header is malformed; the region '%s' is wrong; expecting '%s'" %
                              (self.signed_region(), self.rule['name']), '<Region>%s</Region>' % esc(self.rule['name']), hd)
        if kind == 'status':
            code = int(self.rule.get('code', 503))
            s3code = self.rule.get('s3code', 'SlowDown' if code == 503 else 'InternalError')
            msg = {'SlowDown': 'Please reduce your request rate.',
                   'InternalError': 'We encountered an internal error. Please try again.'}.get(s3code, s3code)
            return self.error(code, s3code, msg)
        if kind == 'redirect' and self.rule.get('cdn'):
            return self.answer(302, b'', [('Location', '/_cdn/%s/%s?sig=abc' % (quote(bucket), quote(key or '')))])
        if kind == 'redirect':
            loc = self.rule['to'].rstrip('/') + self.path
            return self.answer(int(self.rule.get('code', 307)),
                               ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>TemporaryRedirect</Code>'
                                '<Message>Please re-send this request to the specified temporary endpoint. '
                                'Continue to use the original request endpoint for future requests.</Message>'
                                '<Endpoint>%s</Endpoint></Error>' % esc(self.rule['to'])).encode(),
                               [('Location', loc), ('x-amz-bucket-region', 'eu-west-1'),
                                ('Content-Type', 'application/xml')])
        os.makedirs(os.path.join(ARGS.root, bucket), exist_ok=True)
        getattr(self, 'op_' + op)(bucket, key, q, body, kind)

    def lose(self):
        self.log(0, 0)
        self.close_connection = True
        try:
            self.connection.shutdown(2)
        except OSError:
            pass

    def op_put(self, bucket, key, q, body, kind):
        with open(objfile(bucket, key), 'wb') as f:
            f.write(body)
        with LOCK:
            ETAGS.pop((bucket, key), None)
        if kind == 'lost':
            return self.lose()
        self.answer(200, b'', [('ETag', self.etag_hdr(hashlib.md5(body).hexdigest()))])

    def op_create(self, bucket, key, q, body, kind):
        # ids with characters that need encoding in a query (R2's are base64-like)
        uid = base64.b64encode(os.urandom(30)).decode() + '+/=.x'
        with LOCK:
            UPLOADS[uid] = {'bucket': bucket, 'key': key, 'parts': {}}
        self.answer(200, ('<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult '
                          'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>%s</Bucket><Key>%s</Key>'
                          '<UploadId>%s</UploadId></InitiateMultipartUploadResult>' %
                          (esc(bucket), esc(key), esc(uid))).encode(), [('Content-Type', 'application/xml')])

    def op_part(self, bucket, key, q, body, kind):
        with LOCK:
            up = UPLOADS.get(q.get('uploadId'))
            if up:
                up['parts'][int(q['partNumber'])] = (hashlib.md5(body).hexdigest(), body)
        if not up:
            return self.error(404, 'NoSuchUpload', 'The specified upload does not exist.')
        if kind == 'lost':
            return self.lose()
        self.answer(200, b'', [('ETag', self.etag_hdr(up['parts'][int(q['partNumber'])][0]))])

    def op_complete(self, bucket, key, q, body, kind):
        import re
        with LOCK:
            up = UPLOADS.get(q.get('uploadId'))
        if not up:
            return self.error(404, 'NoSuchUpload', 'The specified upload does not exist. The upload ID may '
                              'be invalid, or the upload may have been aborted or completed.')
        if kind == 'error200':
            # the status goes out first; the failure only shows in the body
            self.send_response(200)
            self.send_header('Content-Type', 'application/xml')
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            self.log(200, 0)
            for c in (b'\n', b' \n', b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
                      b'<Message>We encountered an internal error. Please try again.</Message></Error>'):
                self.wfile.write(b'%x\r\n%s\r\n' % (len(c), c))
            self.wfile.write(b'0\r\n\r\n')
            return
        listed = re.findall(r'<PartNumber>(\d+)</PartNumber>\s*<ETag>([^<]*)</ETag>', body.decode())
        data, md5s = b'', b''
        for n, et in listed:
            et = et.replace('&quot;', '"').strip('"')
            p = up['parts'].get(int(n))
            if not p or p[0] != et:
                return self.error(400, 'InvalidPart', 'One or more of the specified parts could not be found.')
            data += p[1]
            md5s += bytes.fromhex(p[0])
        with open(objfile(bucket, key), 'wb') as f:
            f.write(data)
        with LOCK:
            UPLOADS.pop(q.get('uploadId'), None)
        etag = '%s-%d' % (hashlib.md5(md5s).hexdigest(), len(listed))
        with LOCK:
            ETAGS[(bucket, key)] = etag
        if kind == 'lost':
            return self.lose()
        self.answer(200, ('<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult '
                          'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>%s</Bucket><Key>%s</Key>'
                          '<ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>' %
                          (esc(bucket), esc(key), etag)).encode(), [('Content-Type', 'application/xml')])

    def op_abort(self, bucket, key, q, body, kind):
        with LOCK:
            UPLOADS.pop(q.get('uploadId'), None)
        self.answer(204)

    def op_delete(self, bucket, key, q, body, kind):
        try:
            os.unlink(objfile(bucket, key))
        except OSError:
            pass
        self.answer(204)

    def stat(self, bucket, key):
        p = objfile(bucket, key)
        if not os.path.isfile(p):
            return None
        with open(p, 'rb') as f:
            data = f.read()
        with LOCK:
            etag = ETAGS.get((bucket, key)) or hashlib.md5(data).hexdigest()
        return data, etag, os.path.getmtime(p)

    def op_head(self, bucket, key, q, body, kind):
        self.op_get(bucket, key, q, body, kind)

    def op_get(self, bucket, key, q, body, kind):
        st = self.stat(bucket, key)
        if not st:
            return self.error(404, 'NoSuchKey', 'The specified key does not exist.')
        data, etag, mtime = st
        hd = [('ETag', self.etag_hdr(etag)), ('Last-Modified', email.utils.formatdate(mtime, usegmt=True)),
              ('Content-Type', 'application/octet-stream'), ('Accept-Ranges', 'bytes')]
        rg = self.headers.get('Range')
        if rg and rg.startswith('bytes='):
            a, _, b = rg[6:].partition('-')
            a = int(a)
            b = min(int(b) if b else len(data) - 1, len(data) - 1)
            if a >= len(data):
                return self.answer(416, b'', [('Content-Range', 'bytes */%d' % len(data))])
            if kind == 'rangecap':
                b = min(b, a + int(self.rule.get('cap', 1)) - 1)
            elif kind == 'rangeback':
                a = max(0, a - int(self.rule.get('back', 1)))
            hd.append(('Content-Range', 'bytes %d-%d/%d' % (a, b, len(data))))
            return self.answer(206, data[a:b + 1], hd)
        self.answer(200, data, hd)

    def op_list(self, bucket, key, q, body, kind):
        prefix = q.get('prefix', '')
        maxk = int(q.get('max-keys') or 1000)
        d = os.path.join(ARGS.root, bucket)
        keys = sorted(k for k in (unquote(n) for n in os.listdir(d)) if k.startswith(prefix))
        if 'listlag' in self.flags():
            keys = [k for k in keys if time.time() - os.path.getmtime(objfile(bucket, k)) > 30]
        start = ''
        v1 = 'v1list' in self.flags()
        tok = None if v1 else q.get('continuation-token')
        if tok:
            start = base64.b64decode(tok.encode())[:-2].decode()
            keys = [k for k in keys if k > start]
        if v1 and q.get('marker'):
            keys = [k for k in keys if k > q['marker']]
        page, rest = keys[:maxk], keys[maxk:]
        enc = q.get('encoding-type') == 'url' and 'nourlenc' not in self.flags()
        ent = 'entities' in self.flags()
        out = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               '<Name>%s</Name><Prefix>%s</Prefix>' % (esc(bucket), esc(quote_plus(prefix, safe='/') if enc else prefix, ent))]
        if v1:
            m = q.get('marker', '')
            out.append('<Marker>%s</Marker><MaxKeys>%d</MaxKeys>' % (esc(quote_plus(m, safe='/') if enc else m, ent), maxk))
        else:
            out.append('<KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys>' % (len(page), maxk))
        if enc:
            out.append('<EncodingType>url</EncodingType>')
        if tok:
            out.append('<ContinuationToken>%s</ContinuationToken>' % esc(tok))
        out.append('<IsTruncated>%s</IsTruncated>' % ('true' if rest else 'false'))
        if rest and not v1:
            # base64 with '+', '/', '=' in it: the client must encode it in the query
            out.append('<NextContinuationToken>%s</NextContinuationToken>' %
                       base64.b64encode(page[-1].encode() + b'\xfe\xff').decode())
        for k in page:
            data, etag, mtime = self.stat(bucket, k)
            out.append('<Contents><Key>%s</Key><LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>'
                       '<Size>%d</Size><StorageClass>STANDARD</StorageClass></Contents>' %
                       (esc(quote_plus(k, safe='/') if enc else k, ent),
                        time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(mtime)), etag, len(data)))
        out.append('</ListBucketResult>')
        self.answer(200, ''.join(out).encode(), [('Content-Type', 'application/xml')])

    def date_time_string(self, timestamp=None):
        return super().date_time_string(getattr(self, 'date_override', None) or timestamp)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, action='append', required=True,
                    help='listen here; repeat for a second endpoint (redirect targets)')
    ap.add_argument('--root', required=True)
    ap.add_argument('--faults')
    ap.add_argument('--log', required=True)
    ap.add_argument('--tls', nargs=2, metavar=('CERT', 'KEY'))
    ap.add_argument('--vhost', action='append', help='host suffix of virtual-hosted buckets (repeatable)')
    ARGS = ap.parse_args()
    servers = [ThreadingHTTPServer(('127.0.0.1', p), H) for p in ARGS.port]
    if ARGS.tls:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*ARGS.tls)
        servers[0].socket = ctx.wrap_socket(servers[0].socket, server_side=True)
    for s in servers:
        s.daemon_threads = True
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    servers[0].serve_forever()


if __name__ == '__main__':
    main()
