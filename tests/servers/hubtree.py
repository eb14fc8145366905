#!/usr/bin/env python3
"""hubtree.py - lays out a Hugging Face shaped site from plain folders, for tests.

Given folders standing for buckets and model repos, writes into OUT:
  api/buckets/<ns>/<name>/tree[/<dir>]/_tree[<cursor>].json   recursive listing pages
  api/models/<ns>/<repo>/tree/<rev>/_tree.json                model repo listing (lfs sha256)
  data/buckets/<ns>/<name> -> DIR, data/models/<ns>/<repo> -> DIR (symlinks)
  links.json   {"<uri>|<cursor>": "<uri>?recursive=true&cursor=<next>"}  (Link rel=next)
  files.json   {"<resolve uri>": {"size", "etag", "commit", "cdn"}}  headers per file
--lexical lists a bucket's tree/<prefix> as the Hub does, matching the prefix as
a string: tree/w/v1 also holds w/v1-old/... and w/v10/..., and a file's own
path lists that file (and any file whose name it begins).
--rev NAME adds a revision name (refs/pr/3, a tag) to every model repo; its
pages and resolve entries use the name decoded (faultd.py matches the
percent-encoded segment the Hub expects).
  maps.conf    the same two tables as nginx `map` blocks for nginx.conf.in
Served by nginx (nginx.conf.in) or by faultd.py. Paths are listed sorted by bytes.
The fake xetHash is sha256("xet\\0" + content): content-dependent like the real one."""
import argparse, fnmatch, hashlib, json, os, sys, time


def walk(top):
    files, dirs = [], []
    for root, dnames, fnames in os.walk(top, followlinks=True):
        dnames[:] = sorted(d for d in dnames if not d.startswith('.'))
        rel = os.path.relpath(root, top)
        if rel != '.':
            dirs.append(rel.replace(os.sep, '/'))
        for f in sorted(fnames):
            if f.startswith('.'):
                continue
            p = f if rel == '.' else rel.replace(os.sep, '/') + '/' + f
            files.append(p)
    return sorted(files, key=lambda s: s.encode()), sorted(dirs, key=lambda s: s.encode())


def digests(path):
    sha, xet, git = hashlib.sha256(), hashlib.sha256(b'xet\0'), None
    size = os.path.getsize(path)
    git = hashlib.sha1(b'blob %d\0' % size)
    with open(path, 'rb') as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            sha.update(b); xet.update(b); git.update(b)
    return size, sha.hexdigest(), xet.hexdigest(), git.hexdigest()


def iso(t):
    return time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(t))


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(obj, f, separators=(',', ':'))


def pages(out, base_uri, entries, page_size, links):
    """Writes listing pages for base_uri; page k>0 is reached by cursor 'p<k>'."""
    chunks = [entries[i:i + page_size] for i in range(0, len(entries), page_size)] or [[]]
    for k, chunk in enumerate(chunks):
        cur = '' if k == 0 else 'p%d' % k
        write_json(os.path.join(out, base_uri.lstrip('/'), '_tree%s.json' % cur), chunk)
        if k + 1 < len(chunks):
            links['%s|%s' % (base_uri, cur)] = '%s?recursive=true&cursor=p%d' % (base_uri, k + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--bucket', action='append', default=[], help='ns/name=DIR')
    ap.add_argument('--model', action='append', default=[], help='ns/repo@commit=DIR')
    ap.add_argument('--page-size', type=int, default=1000)
    ap.add_argument('--cdn', action='append', default=[], help='glob of bucket/repo paths served by redirect')
    ap.add_argument('--mtime', help='fixed ISO mtime for every entry (deterministic locks)')
    ap.add_argument('--lfs-min', type=int, default=1024, help='model files at least this big are LFS')
    ap.add_argument('--lexical', action='store_true', help='bucket tree prefixes match as strings (as the Hub)')
    ap.add_argument('--rev', action='append', default=[],
                    help='another revision name of every model repo (a branch, a tag, refs/pr/N)')
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    links, files = {}, {}
    for spec in a.bucket:
        bid, d = spec.split('=', 1)
        d = os.path.abspath(d)
        link = os.path.join(out, 'data/buckets', bid)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(d, link)
        fl, dl = walk(d)
        ent = {}
        for p in fl:
            full = os.path.join(d, p)
            size, sha, xet, _ = digests(full)
            mt = a.mtime or iso(os.path.getmtime(full))
            ent[p] = {'type': 'file', 'path': p, 'size': size, 'xetHash': xet, 'mtime': mt,
                      'uploadedAt': mt}
            uri = '/buckets/%s/resolve/%s' % (bid, p)
            files[uri] = {'size': size, 'etag': xet,
                          'cdn': any(fnmatch.fnmatch(p, g) for g in a.cdn)}
        dent = {q: {'type': 'directory', 'path': q, 'uploadedAt': a.mtime or iso(0)} for q in dl}
        for prefix in [''] + dl + (fl if a.lexical else []):
            sel = [e for p, e in sorted(list(ent.items()) + list(dent.items()), key=lambda kv: kv[0].encode())
                   if prefix == '' or p.startswith(prefix if a.lexical else prefix + '/')]
            base = '/api/buckets/%s/tree%s' % (bid, '/' + prefix if prefix else '')
            pages(out, base, sel, a.page_size, links)
    for spec in a.model:
        rid, d = spec.split('=', 1)
        repo, commit = rid.split('@', 1)
        d = os.path.abspath(d)
        link = os.path.join(out, 'data/models', repo)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(d, link)
        fl, dl = walk(d)
        entries = []
        for p in fl:
            size, sha, _, git = digests(os.path.join(d, p))
            e = {'type': 'file', 'path': p, 'size': size, 'oid': git}
            lfs = size >= a.lfs_min
            if lfs:
                e['lfs'] = {'oid': sha, 'size': size, 'pointerSize': 134}
            entries.append(e)
            for rev in ['main', commit] + a.rev:
                uri = '/%s/resolve/%s/%s' % (repo, rev, p)
                files[uri] = {'size': size, 'etag': sha if lfs else git, 'commit': commit,
                              'cdn': lfs and any(fnmatch.fnmatch(p, g) for g in a.cdn)}
        entries += [{'type': 'directory', 'path': q, 'oid': hashlib.sha1(q.encode()).hexdigest(), 'size': 0}
                    for q in dl]
        entries.sort(key=lambda e: e['path'].encode())
        for rev in ['main', commit] + a.rev:
            pages(out, '/api/models/%s/tree/%s' % (repo, rev), entries, a.page_size, links)
        write_json(os.path.join(out, 'api/models', repo, '_info.json'), {'id': repo, 'sha': commit})
    with open(os.path.join(out, 'links.json'), 'w') as f:
        json.dump(links, f, indent=1, sort_keys=True)
    with open(os.path.join(out, 'files.json'), 'w') as f:
        json.dump(files, f, indent=1, sort_keys=True)

    def q(s):
        return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'
    with open(os.path.join(out, 'maps.conf'), 'w') as f:
        f.write('map "$fg_orig|$arg_cursor" $fg_next {\n    default "";\n')
        for k, v in sorted(links.items()):
            f.write('    %s %s;\n' % (q(k), q('<$scheme://$http_host' + v + '>; rel="next"')))
        f.write('}\n')
        for var, key in (('fg_cdn', 'cdn'), ('fg_size', 'size'), ('fg_etag', 'etag'), ('fg_commit', 'commit')):
            f.write('map $uri $%s {\n    default "";\n' % var)
            for k, v in sorted(files.items()):
                if key not in v or v[key] is False:
                    continue
                val = '1' if v[key] is True else str(v[key])
                if key == 'etag':
                    val = '"' + val + '"'
                f.write('    %s %s;\n' % (q(k), q(val)))
            f.write('}\n')


if __name__ == '__main__':
    sys.exit(main())
