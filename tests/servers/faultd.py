#!/usr/bin/env python3
"""faultd.py - a misbehaving HF-shaped hub for tests (Python stdlib only).

Serves the same tree as nginx.conf.in (made by hubtree.py): listing pages with
Link paging, bucket/model resolve with Range, model resolve headers. Faults come
from a JSON file re-read on every request, so a test can change them between runs:
  [{"match": "<glob on the URI path>", "fault": KIND, ...options, "times": K}]
or from the query string of a request (?fault=KIND&at=N...). A rule with "times"
applies to that many matching requests, then the path behaves (counters live
per rule text until the server stops). KIND:
  drop      at=N: send headers and N body bytes, then close the connection
  status    code=C [retry_after=S]: answer C (429, 500, 503, ...) with an empty body;
            error_code=E, error_message=M send the Hub's X-Error-Code / X-Error-Message
  flip      offset=O: serve the content with the byte at file offset O inverted
  stall     at=N [rate=B]: trickle B bytes/s (default 64 KiB/s) up to body byte N, then hang
  short     cut=N: announce the full Content-Length, send N bytes fewer, close
  loop      answer 302 to the same URI forever
  redirect  to=URL: answer 302 to URL + the original path (e.g. another host);
            code=C picks 301/302/303/307/308; replace=[OLD, NEW] answers a RELATIVE
            Location (the path with OLD replaced by NEW, query kept); name=1 answers
            a relative-path Location (the last segment + "?moved=1")
  norange   ignore Range: 200 and the whole body
  rangecap  cap=N: a 206 carries at most N bytes (a CDN capping ranges)
  rangeback back=N: a 206 starting N bytes before the asked start
  grow      by=N: the file looks N bytes longer than it is (the Content-Range
            total / Content-Length of a file replaced since it was listed)
  shrink    by=N: the file is N bytes shorter than it is (a range past its new
            end gets 416 with Content-Range: bytes */<new size>)
  nohead    HEAD answers 405 (GET works); code=403 answers 403 with S3's
            SignatureDoesNotMatch instead, as a URL presigned for GET does
            (SigV4 query auth signs the method: a HEAD of it is refused)
  nolength  HEAD and 200 answers carry no Content-Length (a 200's body is
            chunked), as a server streaming from a backend does; 206 as usual
  lower     every response header name in lowercase
  chunked   listings sent with Transfer-Encoding: chunked, no Content-Length
  flat      listings ignore recursive=true: a folder's direct entries only
            (its sub-folders as "directory" entries, nothing below them)
  close     answer, then close the connection without saying so
  gzip      listings and files sent with Content-Encoding: gzip (the whole
            file gzipped, Range ignored) unless the request's Accept-Encoding
            rules gzip out (RFC 9110 12.5.3: a request without
            Accept-Encoding accepts any content coding; "identity" alone, or
            gzip;q=0, does not); HEAD says so too, with the gzipped length
  link      style=S for listing Link headers: quoted (a quoted param holding a
            comma before rel), two (a rel="prev" header, then a rel=next one),
            relative (a relative URL), multi (rel="next last", REL=Next),
            raw (the path unencoded: a blank, UTF-8 bytes), badport (a next
            URL with port 99999: no usable URL)
Options for every kind: token=T answers a request that lacks "Authorization:
Bearer T" with 401 and the Hub's X-Error-Code RepoNotFound before any fault,
as the Hub answers for a private or gated repo asked without a token (a rule
of token alone, no fault, serves such a file to its token only);
retry_after_date=S (with status) sends Retry-After as
an HTTP date S seconds ahead, ratelimit=T (with status) the Hub's
RateLimit: "resolvers";r=0;t=T; norange=1 ignores Range as norange does;
nolength=1 sends 200s chunked as nolength does (with grow: the longer body).
--prefix /P serves the whole site below /P (an HF_ENDPOINT with a path).
Every request is logged as one JSON line (method, path, range, status, bytes, auth, time)
to --log, so tests can count requests and see where a token went. The line is
written when the status is known, before the body is sent ('bytes' is what the
answer is meant to carry, 'time' when it started): a client that has read its
answer finds its line already there."""
import argparse, email.utils, fnmatch, gzip, json, os, re, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs, quote, unquote

from rules import gzip_ok, load_rules  # this folder: the script's own, first on sys.path

ARGS = None
COUNTS = {}
LOCK = threading.Lock()




def pick_rule(path, query):
    if 'fault' in query:
        r = {k: v[0] for k, v in query.items()}
        r['fault'] = r['fault']
        return r
    for r in load_rules(ARGS.faults):
        if not fnmatch.fnmatchcase(path, r.get('match', '*')):
            continue
        if 'times' in r:
            key = json.dumps(r, sort_keys=True)
            with LOCK:
                n = COUNTS.get(key, 0)
                if n >= int(r['times']):
                    continue
                COUNTS[key] = n + 1
        return r
    return None


class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt, *a):
        pass

    def send_header(self, k, v):
        if getattr(self, 'lower', False):
            k = k.lower()
        super().send_header(k, v)

    def log(self, status, nbytes):
        rec = {'method': self.command, 'path': self.path, 'range': self.headers.get('Range'),
               'status': status, 'bytes': nbytes, 'auth': self.headers.get('Authorization'),
               'time': round(time.time(), 3)}
        with LOCK:
            with open(ARGS.log, 'a') as f:
                f.write(json.dumps(rec) + '\n')

    def do_HEAD(self):
        self.handle_req(head=True)

    def do_GET(self):
        self.handle_req(head=False)

    def simple(self, code, body=b'', headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        # logged before the body goes out: a client that has read its last
        # byte finds the line already written
        self.log(code, 0 if self.command == 'HEAD' else len(body))
        if not self.command == 'HEAD':
            self.wfile.write(body)

    def handle_req(self, head):
        u = urlsplit(self.path)
        path = unquote(u.path)
        if ARGS.prefix:
            # the site lives below a path prefix (HF_ENDPOINT=http://host/PREFIX)
            if not path.startswith(ARGS.prefix + '/'):
                return self.simple(404, b'outside the prefix\n')
            path = path[len(ARGS.prefix):]
        query = parse_qs(u.query)
        rule = pick_rule(path, query)
        kind = rule.get('fault') if rule else None
        if rule and 'token' in rule and self.headers.get('Authorization') != 'Bearer ' + rule['token']:
            return self.simple(401, b'', [('X-Error-Code', 'RepoNotFound'),
                                          ('X-Error-Message', 'Repository not found')])
        self.lower = kind == 'lower'
        if kind == 'close':
            self.close_connection = True
        if kind == 'nohead' and head:
            if int(rule.get('code', 405)) == 403:
                return self.simple(403, b'', [('Content-Type', 'application/xml'),
                                              ('x-amz-request-id', '4442587FB7D0A2F9')])
            return self.simple(405, b'', [('Allow', 'GET')])
        if kind == 'status':
            hd = []
            if 'retry_after' in rule:
                hd.append(('Retry-After', str(rule['retry_after'])))
            if 'ratelimit' in rule:  # the Hub's form (draft-ietf-httpapi-ratelimit-headers)
                hd.append(('RateLimit', '"resolvers";r=0;t=%d' % int(rule['ratelimit'])))
                hd.append(('RateLimit-Policy', '"fixed window";"resolvers";q=3000;w=300'))
            if 'retry_after_date' in rule:
                hd.append(('Retry-After', email.utils.formatdate(time.time() + float(rule['retry_after_date']), usegmt=True)))
            if 'error_code' in rule:  # the Hub's words for a refusal
                hd.append(('X-Error-Code', rule['error_code']))
            if 'error_message' in rule:
                hd.append(('X-Error-Message', rule['error_message']))
            return self.simple(int(rule.get('code', 500)), b'', hd)
        if kind == 'loop':
            return self.simple(302, b'', [('Location', self.path)])
        if kind == 'redirect':
            code = int(rule.get('code', 302))
            if 'replace' in rule:
                old, new = rule['replace']
                return self.simple(code, b'', [('Location', self.path.replace(old, new, 1))])
            if rule.get('name'):
                return self.simple(code, b'', [('Location', u.path.rsplit('/', 1)[1] + '?moved=1')])
            return self.simple(code, b'', [('Location', rule['to'] + self.path)])
        if path.startswith('/api/'):
            return self.api(path, query, rule)
        m = re.match(r'^/buckets/([^/]+/[^/]+)/resolve/(.+)$', path)
        if m:
            return self.send_file(os.path.join(ARGS.root, 'data/buckets', m.group(1), m.group(2)), {}, rule, head)
        # a model resolve URL, segment by segment as sent: the revision is one
        # segment, so refs/pr/3 must come percent-encoded (refs%2Fpr%2F3)
        raw = u.path[len(ARGS.prefix):] if ARGS.prefix else u.path
        segs = [unquote(x) for x in raw.split('/')]
        if len(segs) >= 6 and segs[0] == '' and segs[3] == 'resolve':
            repo, rev, fpath = segs[1] + '/' + segs[2], segs[4], '/'.join(segs[5:])
            info = self.files().get('/%s/resolve/%s/%s' % (repo, rev, fpath))
            if info is None:
                return self.simple(404, b'no such revision or file\n')
            hd = {'X-Repo-Commit': info.get('commit', ''), 'X-Linked-Etag': '"%s"' % info.get('etag', ''),
                  'X-Linked-Size': str(info.get('size', ''))}
            return self.send_file(os.path.join(ARGS.root, 'data/models', repo, fpath), hd, rule, head)
        return self.simple(404, b'not found\n')

    def files(self):
        with open(os.path.join(ARGS.root, 'files.json')) as f:
            return json.load(f)

    def api(self, path, query, rule):
        cur = query.get('cursor', [''])[0]
        if not re.match(r'^[a-z0-9]*$', cur) or '..' in path:
            return self.simple(400)
        f = os.path.join(ARGS.root, path.lstrip('/'), '_tree%s.json' % cur)
        if not os.path.isfile(f):
            return self.simple(404, b'[]')
        with open(os.path.join(ARGS.root, 'links.json')) as lf:
            links = json.load(lf)
        hd = [('Content-Type', 'application/json')]
        nxt = links.get('%s|%s' % (path, cur))
        kind = rule.get('fault') if rule else None
        if rule and 'token' in rule and self.headers.get('Authorization') != 'Bearer ' + rule['token']:
            return self.simple(401, b'', [('X-Error-Code', 'RepoNotFound'),
                                          ('X-Error-Message', 'Repository not found')])
        style = rule.get('style') if kind == 'link' else None
        if nxt:
            # the path percent-encoded as UTF-8, as a URL in a header must be
            # (the Hub's are); the query as hubtree wrote it
            npath, _, nquery = nxt.partition('?')
            enc = quote(npath, safe='/') + ('?' + nquery if nquery else '')
            absu = 'http://%s%s%s' % (self.headers.get('Host'), ARGS.prefix or '', enc)
            if style == 'raw':
                # a server writing the path raw: a blank and UTF-8 bytes as
                # they are (latin-1 here only carries the bytes through)
                raw = 'http://%s%s%s' % (self.headers.get('Host'), ARGS.prefix or '', nxt)
                hd.append(('Link', ('<%s>; rel="next"' % raw).encode('utf-8').decode('latin-1')))
            elif style == 'badport':
                hd.append(('Link', '<http://127.0.0.1:99999%s%s>; rel="next"' % (ARGS.prefix or '', enc)))
            elif style == 'quoted':
                hd.append(('Link', '<%s>; title="a, b"; rel="next"' % absu))
            elif style == 'two':
                hd.append(('Link', '<%s>; rel="prev"' % absu.replace('cursor=', 'cursor=x')))
                hd.append(('Link', '<%s>; rel=next' % absu))
            elif style == 'relative':
                hd.append(('Link', '<%s>; rel="next"' % nxt.rsplit('/', 1)[1]))
            elif style == 'multi':
                hd.append(('Link', '<%s>; REL="first"; title="next", <%s>; Rel="Next Last"' % (absu.replace('cursor=', 'cursor=x'), absu)))
            else:
                hd.append(('Link', '<%s>; rel="next"' % absu))
        with open(f, 'rb') as fh:
            body = fh.read()
        if kind == 'flat':
            m = (re.match(r'^/api/buckets/[^/]+/[^/]+/tree/?(.*)$', path) or
                 re.match(r'^/api/models/[^/]+/[^/]+/tree/[^/]+/?(.*)$', path))
            skip = len(m.group(1)) + 1 if m and m.group(1) else 0
            body = json.dumps([e for e in json.loads(body) if '/' not in e['path'][skip:]]).encode()
        if kind == 'gzip' and gzip_ok(self.headers.get('Accept-Encoding')):
            hd.append(('Content-Encoding', 'gzip'))
            body = gzip.compress(body, mtime=0)
        if kind == 'chunked':
            self.send_response(200)
            for k, v in hd:
                self.send_header(k, v)
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            self.log(200, len(body))
            for i in range(0, len(body), 7):
                piece = body[i:i + 7]
                self.wfile.write(b'%x\r\n%s\r\n' % (len(piece), piece))
            self.wfile.write(b'0\r\n\r\n')
            return
        return self.simple(200, body, hd)

    def send_file(self, fpath, extra, rule, head):
        if '/../' in fpath or not os.path.isfile(fpath):
            return self.simple(404, b'not found\n')
        size = os.path.getsize(fpath)
        if rule and rule.get('fault') == 'gzip' and gzip_ok(self.headers.get('Accept-Encoding')):
            with open(fpath, 'rb') as f:
                gz = gzip.compress(f.read(), mtime=0)
            hd = list(extra.items()) + [('Content-Encoding', 'gzip'), ('Vary', 'Accept-Encoding')]
            if head:
                self.send_response(200)
                for k, v in hd:
                    self.send_header(k, v)
                self.send_header('Content-Length', str(len(gz)))
                self.end_headers()
                return self.log(200, 0)
            return self.simple(200, gz, hd)
        if rule and rule.get('fault') == 'shrink':
            size = max(0, size - int(rule.get('by', 1)))
        start, end, code = 0, size - 1, 200
        kind = rule.get('fault') if rule else None
        if rule and 'token' in rule and self.headers.get('Authorization') != 'Bearer ' + rule['token']:
            return self.simple(401, b'', [('X-Error-Code', 'RepoNotFound'),
                                          ('X-Error-Message', 'Repository not found')])
        norange = kind == 'norange' or (rule or {}).get('norange')
        rng = self.headers.get('Range') if not norange else None
        if rng:
            m = re.match(r'^bytes=(\d+)-(\d*)$', rng.strip())
            if not m or int(m.group(1)) >= size:
                return self.simple(416, b'', [('Content-Range', 'bytes */%d' % size)])
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            code = 206
            if kind == 'rangecap':
                end = min(end, start + int(rule.get('cap', 1)) - 1)
            elif kind == 'rangeback':
                start = max(0, start - int(rule.get('back', 1)))
        length = end - start + 1
        total = size + (int(rule.get('by', 1)) if kind == 'grow' else 0)
        self.send_response(code)
        for k, v in extra.items():
            self.send_header(k, v)
        self.send_header('Accept-Ranges', 'bytes')
        chunked = (kind == 'nolength' or (rule or {}).get('nolength')) and code == 200
        if chunked:
            self.send_header('Transfer-Encoding', 'chunked')
        else:
            self.send_header('Content-Length', str(length if code == 206 or kind != 'grow' else total))
        if code == 206:
            self.send_header('Content-Range', 'bytes %d-%d/%d' % (start, end, total))
        if kind in ('drop', 'short'):
            self.send_header('Connection', 'close')
        self.end_headers()
        if head:
            return self.log(code, 0)
        if chunked:
            self.log(code, length)
            with open(fpath, 'rb') as f:
                while True:
                    b = f.read(65536)
                    if not b:
                        break
                    self.wfile.write(b'%x\r\n%s\r\n' % (len(b), b))
            if kind == 'grow':
                self.wfile.write(b'%x\r\n%s\r\n' % (total - size, b'\0' * (total - size)))
            self.wfile.write(b'0\r\n\r\n')
            return
        limit = length
        if kind == 'drop':
            limit = min(length, int(rule.get('at', 0)))
        elif kind == 'short':
            limit = max(0, length - int(rule.get('cut', 1)))
        elif kind == 'stall':
            limit = min(length, int(rule.get('at', 0)))
        # logged before the body, with the bytes it is meant to carry
        self.log(code, limit + (total - size if kind == 'grow' and code == 200 else 0))
        rate = int(rule.get('rate', 65536)) if kind == 'stall' else 0
        sent = 0
        try:
            with open(fpath, 'rb') as f:
                f.seek(start)
                while sent < limit:
                    n = min(65536 if not rate else max(1, rate // 10), limit - sent)
                    b = bytearray(f.read(n))
                    if not b:
                        break
                    if kind == 'flip':
                        o = int(rule.get('offset', 0)) - (start + sent)
                        if 0 <= o < len(b):
                            b[o] ^= 0xff
                    self.wfile.write(b)
                    sent += len(b)
                    if rate:
                        self.wfile.flush()
                        time.sleep(0.1)
            if kind == 'grow' and code == 200:
                self.wfile.write(b'\0' * (total - size))
                sent += total - size
            self.wfile.flush()
            if kind == 'stall':
                time.sleep(float(rule.get('hang', 60)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        if kind in ('drop', 'short', 'stall'):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--root', required=True, help='tree made by hubtree.py')
    ap.add_argument('--faults', help='JSON rules file, re-read per request')
    ap.add_argument('--log', required=True)
    ap.add_argument('--pidfile')
    ap.add_argument('--prefix', help='serve the site below this path (e.g. /mirror)')
    ARGS = ap.parse_args()
    ARGS.root = os.path.abspath(ARGS.root)
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer(('127.0.0.1', ARGS.port), H)
    if ARGS.pidfile:
        with open(ARGS.pidfile, 'w') as f:
            f.write('%d\n' % os.getpid())
    srv.serve_forever()


if __name__ == '__main__':
    sys.exit(main())
