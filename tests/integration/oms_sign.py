#!/usr/bin/env python3
"""oms_sign.py - makes a signature the way OpenSSF model_signing's key mode
does (src/model_signing/_signing/sign_ec_key.py, signing.py), built by hand
with the python standard library and the openssl CLI, so sign.sh can check
fgpack against another signer without model_signing installed.

  oms_sign.py KEY.pem MODEL SIG [--ignore a,b] [--raw] [--statement FILE]
              [--allow-symlinks] [--v02 [--std-pae]]

The statement: one resource per file (sha256), sorted as model_signing sorts
its manifest keys (PurePosixPath values: component by component), files under
an ignore path skipped; the subject digest is sha256 over the raw digests.
ECDSA over the DSSE PAE with the curve's hash (SHA-256 on P-256, SHA-384 on
P-384, SHA-512 on P-521, as model_signing's get_ec_key_hash), the bundle with
the PEM key hint and no keyid. --raw writes the signature as fixed-width
r||s instead of DER; --statement signs FILE's bytes as the payload instead.
--allow-symlinks records allow_symlinks: true and hashes through links to
files as model_signing then does (os.walk, like model_signing's glob("**/*"),
lists a link to a folder without descending into it).
--v02 writes a signature as model_signing 0.2 did, which model_signing 1.x
still reads (src/model_signing/_signing/signing.py,
dsse_payload_to_manifest_compat; sign_sigstore_pb.py, pae_compat): predicate
type https://model_signing/Digests/v0.1 with one subject per file, the key
as publicKey.rawBytes (no hint), and the signature over the "pae_compat"
text: "DSSEV1 <len> <type> <len> " followed by Python's repr() of the
payload bytes. --std-pae signs that statement over the standard PAE instead."""
import argparse
import base64
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

PAYLOAD_TYPE = b"application/vnd.in-toto+json"


def statement(model, ignore, allow_symlinks=False):
    files = []
    for d, _, fs in os.walk(model):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), model)
            if not any(rel == i or rel.startswith(i + "/") for i in ignore):
                files.append(rel)
    res, root = [], hashlib.sha256()
    for f in sorted(files, key=pathlib.PurePosixPath):
        with open(os.path.join(model, f), "rb") as fh:
            dg = hashlib.sha256(fh.read()).hexdigest()
        res.append({"name": f, "digest": dg, "algorithm": "sha256"})
        root.update(bytes.fromhex(dg))
    st = {"_type": "https://in-toto.io/Statement/v1",
          "subject": [{"name": os.path.basename(os.path.normpath(model)),
                       "digest": {"sha256": root.hexdigest()}}],
          "predicateType": "https://model_signing/signature/v1.0",
          "predicate": {"serialization": {"method": "files", "hash_type": "sha256",
                                          "allow_symlinks": allow_symlinks,
                                          "ignore_paths": ignore},
                        "resources": res}}
    return json.dumps(st, indent=2).encode()


def statement_v02(model):
    # model_signing 0.2's DigestsIntotoPayload: the files are the subjects
    subj = []
    for d, _, fs in os.walk(model):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), model)
            with open(os.path.join(model, rel), "rb") as fh:
                dg = hashlib.sha256(fh.read()).hexdigest()
            subj.append({"name": rel, "digest": {"sha256": dg},
                         "annotations": {"actual_hash_algorithm": "file-sha256"}})
    subj.sort(key=lambda s: pathlib.PurePosixPath(s["name"]))
    st = {"_type": "https://in-toto.io/Statement/v1", "subject": subj,
          "predicateType": "https://model_signing/Digests/v0.1",
          "predicate": {"unused": "Unused, just passed due to API requirements"}}
    return json.dumps(st, indent=2).encode()


def der_len(b, i):
    n = b[i]
    if n < 0x80:
        return n, i + 1
    k = n & 0x7F
    return int.from_bytes(b[i + 1:i + 1 + k], "big"), i + 1 + k


def der_to_raw(sig, width):
    # SEQUENCE { INTEGER r, INTEGER s } -> r||s, each `width` bytes
    _, i = der_len(sig, 1)
    out = b""
    for _ in range(2):
        n, j = der_len(sig, i + 1)
        out += int.from_bytes(sig[j:j + n], "big").to_bytes(width, "big")
        i = j + n
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("key")
    ap.add_argument("model")
    ap.add_argument("sig")
    ap.add_argument("--ignore", default=".git,.gitattributes,.github,.gitignore")
    ap.add_argument("--raw", action="store_true")
    ap.add_argument("--statement")
    ap.add_argument("--allow-symlinks", action="store_true")
    ap.add_argument("--v02", action="store_true")
    ap.add_argument("--std-pae", action="store_true")
    a = ap.parse_args()
    if a.v02:
        body = statement_v02(a.model)
    elif a.statement:
        with open(a.statement, "rb") as fh:
            body = fh.read()
    else:
        body = statement(a.model, [i for i in a.ignore.split(",") if i], a.allow_symlinks)
    pub = subprocess.run(["openssl", "pkey", "-in", a.key, "-pubout"], check=True,
                         capture_output=True).stdout
    text = subprocess.run(["openssl", "pkey", "-pubin", "-noout", "-text"], input=pub,
                          check=True, capture_output=True).stdout.decode()
    bits = 521 if "P-521" in text or "secp521r1" in text else \
        384 if "P-384" in text or "secp384r1" in text else 256
    md = {256: "-sha256", 384: "-sha384", 521: "-sha512"}[bits]
    pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE, len(body), body)
    if a.v02 and not a.std_pae:
        pae = ("DSSEV1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.decode(), len(body),
                                       body)).encode("utf-8")
    with tempfile.NamedTemporaryFile() as f:
        f.write(pae)
        f.flush()
        sig = subprocess.run(["openssl", "dgst", md, "-sign", a.key, f.name], check=True,
                             capture_output=True).stdout
    if a.raw:
        sig = der_to_raw(sig, (bits + 7) // 8)
    b = {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
         "verificationMaterial": {"publicKey": {"hint": hashlib.sha256(pub).hexdigest()}},
         "dsseEnvelope": {"payload": base64.b64encode(body).decode(),
                          "payloadType": PAYLOAD_TYPE.decode(),
                          "signatures": [{"sig": base64.b64encode(sig).decode()}]}}
    if a.v02:
        b["verificationMaterial"] = {"publicKey": {
            "rawBytes": base64.b64encode(pub).decode(),
            "keyDetails": {256: "PKIX_ECDSA_P256_SHA_256", 384: "PKIX_ECDSA_P384_SHA_384",
                           521: "PKIX_ECDSA_P521_SHA_512"}[bits]}}
    with open(a.sig, "w") as fh:
        json.dump(b, fh, indent=2)


if __name__ == "__main__":
    sys.exit(main())
