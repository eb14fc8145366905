"""rules.py - the fault rules file both test servers read (faultd.py for the
Hub and plain HTTP, s3faultd.py for S3): a JSON list re-read on every
request, so a test can change it between runs. A missing or unreadable file
(a test mid-write) means no rules. Also the Accept-Encoding reading both
servers' gzip faults share."""
import json
import os


def load_rules(path):
    if not path or not os.path.exists(path):
        return []
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError:
        return []


def gzip_ok(accept):
    """Whether an Accept-Encoding value (None: no header) lets the answer be
    gzipped (RFC 9110 12.5.3): absent accepts anything; otherwise gzip, x-gzip
    or * listed with a q above 0."""
    if accept is None:
        return True
    q = {}
    for item in accept.split(','):
        parts = [x.strip() for x in item.split(';')]
        if not parts[0]:
            continue
        w = 1.0
        for pa in parts[1:]:
            if pa.lower().startswith('q='):
                try:
                    w = float(pa[2:])
                except ValueError:
                    w = 0.0
        q[parts[0].lower()] = w
    w = q.get('gzip', q.get('x-gzip', q.get('*', 0.0)))
    return w > 0
