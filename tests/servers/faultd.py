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
  status    code=C [retry_after=S]: answer C (429, 500, 503, ...) with an empty body
  flip      offset=O: serve the content with the byte at file offset O inverted
  stall     at=N [rate=B]: trickle B bytes/s (default 64 KiB/s) up to body byte N, then hang
  short     cut=N: announce the full Content-Length, send N bytes fewer, close
  loop      answer 302 to the same URI forever
  redirect  to=URL: answer 302 to URL + the original path (e.g. another host)
Every request is logged as one JSON line (method, path, range, status, bytes, auth)
to --log, so tests can count bytes served and see where a token went."""
import argparse, fnmatch, json, os, re, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs, unquote

ARGS = None
COUNTS = {}
LOCK = threading.Lock()


def load_rules():
    if not ARGS.faults or not os.path.exists(ARGS.faults):
        return []
    try:
        with open(ARGS.faults) as f:
            return json.load(f)
    except ValueError:
        return []


def pick_rule(path, query):
    if 'fault' in query:
        r = {k: v[0] for k, v in query.items()}
        r['fault'] = r['fault']
        return r
    for r in load_rules():
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

    def log(self, status, nbytes):
        rec = {'method': self.command, 'path': self.path, 'range': self.headers.get('Range'),
               'status': status, 'bytes': nbytes, 'auth': self.headers.get('Authorization')}
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
        if not self.command == 'HEAD':
            self.wfile.write(body)
        self.log(code, 0 if self.command == 'HEAD' else len(body))

    def handle_req(self, head):
        u = urlsplit(self.path)
        path = unquote(u.path)
        query = parse_qs(u.query)
        rule = pick_rule(path, query)
        kind = rule.get('fault') if rule else None
        if kind == 'status':
            hd = []
            if 'retry_after' in rule:
                hd.append(('Retry-After', str(rule['retry_after'])))
            return self.simple(int(rule.get('code', 500)), b'', hd)
        if kind == 'loop':
            return self.simple(302, b'', [('Location', self.path)])
        if kind == 'redirect':
            return self.simple(302, b'', [('Location', rule['to'] + self.path)])
        if path.startswith('/api/'):
            return self.api(path, query)
        m = re.match(r'^/buckets/([^/]+/[^/]+)/resolve/(.+)$', path)
        if m:
            return self.send_file(os.path.join(ARGS.root, 'data/buckets', m.group(1), m.group(2)), {}, rule, head)
        m = re.match(r'^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$', path)
        if m:
            info = self.files().get(path, {})
            hd = {'X-Repo-Commit': info.get('commit', ''), 'X-Linked-Etag': '"%s"' % info.get('etag', ''),
                  'X-Linked-Size': str(info.get('size', ''))}
            return self.send_file(os.path.join(ARGS.root, 'data/models', m.group(1), m.group(3)), hd, rule, head)
        return self.simple(404, b'not found\n')

    def files(self):
        with open(os.path.join(ARGS.root, 'files.json')) as f:
            return json.load(f)

    def api(self, path, query):
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
        if nxt:
            hd.append(('Link', '<http://%s%s>; rel="next"' % (self.headers.get('Host'), nxt)))
        with open(f, 'rb') as fh:
            return self.simple(200, fh.read(), hd)

    def send_file(self, fpath, extra, rule, head):
        if '/../' in fpath or not os.path.isfile(fpath):
            return self.simple(404, b'not found\n')
        size = os.path.getsize(fpath)
        start, end, code = 0, size - 1, 200
        rng = self.headers.get('Range')
        if rng:
            m = re.match(r'^bytes=(\d+)-(\d*)$', rng.strip())
            if not m or int(m.group(1)) >= size:
                return self.simple(416, b'', [('Content-Range', 'bytes */%d' % size)])
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            code = 206
        length = end - start + 1
        kind = rule.get('fault') if rule else None
        self.send_response(code)
        for k, v in extra.items():
            self.send_header(k, v)
        self.send_header('Accept-Ranges', 'bytes')
        self.send_header('Content-Length', str(length))
        if code == 206:
            self.send_header('Content-Range', 'bytes %d-%d/%d' % (start, end, size))
        if kind in ('drop', 'short'):
            self.send_header('Connection', 'close')
        self.end_headers()
        if head:
            return self.log(code, 0)
        limit = length
        if kind == 'drop':
            limit = min(length, int(rule.get('at', 0)))
        elif kind == 'short':
            limit = max(0, length - int(rule.get('cut', 1)))
        elif kind == 'stall':
            limit = min(length, int(rule.get('at', 0)))
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
            self.wfile.flush()
            if kind == 'stall':
                time.sleep(float(rule.get('hang', 60)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.log(code, sent)
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
