# sigv4_botocore.py - the independent side of sigv4_botocore.sh: signs the same
# requests with botocore's S3SigV4Auth (Debian python3-botocore) at a fixed
# time. `cases` prints the JSON cases (one per line) fed to test_sigv4 --sign;
# `sign` prints "<url> <Authorization>" per case, like test_sigv4 --sign.
import datetime
import hashlib
import json
import sys
import types

import botocore.auth
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode

DATE = datetime.datetime(2026, 11, 29, 21, 7, 3)


class FixedDatetime(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return DATE


# add_auth reads datetime.datetime.utcnow(); pin it so both sides sign the same moment
botocore.auth.datetime = types.SimpleNamespace(datetime=FixedDatetime)

SECRET_ODD = "wJal rXUt/nFEMI+K7MDENG~bPx%RfiCY=="
BASE = dict(host="127.0.0.1:9000", bucket="gemma-bucket", access="AKIDEXAMPLE",
            secret="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token=None)
CASES = [
    dict(method="PUT", key="weights/model.safetensors", body="hello world"),
    dict(method="PUT", key="dir with spaces/file name.bin", body=""),
    dict(method="PUT", key="模型/权重 é ü.safetensors", body="x" * 1000),
    dict(method="PUT", key="a+b~c%d=e&f?g#h.txt", body="plus"),
    dict(method="GET", key="odd!*'()$,;:@[]{}|^`\"<>.json"),
    dict(method="POST", key="big.fgb", params=[["uploads", None]]),
    dict(method="PUT", key="big.fgb", params=[["uploadId", "2~abc/def+gh=="], ["partNumber", "3"]],
         body="part"),
    dict(method="GET", key="", params=[["prefix", "weights/x y+z"], ["list-type", "2"],
                                       ["max-keys", "2"], ["continuation-token", "1/AbC+=="]]),
    dict(method="GET", key="", params=[["b", "2"], ["a", "1"], ["b", "1"], ["a", ""], ["z", None]]),
    dict(method="GET", key="range.bin", headers=[["Range", "bytes=0-9"],
                                                  ["X-Amz-Meta-Note", "  a   b  c "]]),
    dict(method="PUT", key="typed.json", headers=[["Content-Type", "application/json"],
                                                  ["If-None-Match", "*"]], body="{}"),
    dict(method="HEAD", key="token/obj", token="FQoGZXIvYXdzE//session+token=="),
    dict(method="DELETE", key="k", params=[["uploadId", "u p"]], secret=SECRET_ODD),
    dict(method="PUT", key="~user/%41%2F", body="pct", access="HFAK~odd"),
]


def full(c):
    d = dict(BASE)
    d.update(c)
    d.setdefault("params", [])
    d.setdefault("headers", [])
    d.setdefault("body", "")
    return d


def cases():
    for c in map(full, CASES):
        out = {k: c[k] for k in ("method", "host", "bucket", "key", "params", "headers",
                                 "access", "secret")}
        if c["token"]:
            out["token"] = c["token"]
        out["payload"] = hashlib.sha256(c["body"].encode()).hexdigest()
        out["date"] = DATE.strftime("%Y%m%dT%H%M%SZ")
        print(json.dumps(out, ensure_ascii=False))


def sign():
    for c in map(full, CASES):
        url = "http://%s/%s/%s" % (c["host"], c["bucket"], percent_encode(c["key"], safe="/~"))
        q = "&".join(percent_encode(n) + ("" if v is None else "=" + percent_encode(v))
                     for n, v in c["params"])
        if q:
            url += "?" + q
        req = AWSRequest(method=c["method"], url=url, headers=dict(c["headers"]),
                         data=c["body"].encode())
        S3SigV4Auth(Credentials(c["access"], c["secret"], c["token"]), "s3",
                    "us-east-1").add_auth(req)
        print(url, req.headers["Authorization"])


{"cases": cases, "sign": sign}[sys.argv[1]]()
