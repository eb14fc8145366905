"""rules.py - the fault rules file both test servers read (faultd.py for the
Hub and plain HTTP, s3faultd.py for S3): a JSON list re-read on every
request, so a test can change it between runs. A missing or unreadable file
(a test mid-write) means no rules."""
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
