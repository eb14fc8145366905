#!/usr/bin/env python3
"""tokenizer_fuzz.py - seeded generator of hard text for the differential
tokenizer test (tokenizer_fuzz.sh), and the comparison of its results.

    tokenizer_fuzz.py gen TOKENIZER_JSON SEED N OUTDIR
    tokenizer_fuzz.py compare OUTDIR
    tokenizer_fuzz.py minimize TOKENIZER_JSON FGPACK TEXT_HEX [MODEL]

gen writes, deterministically from SEED (and the tokenizer's own vocabulary
and added tokens, which it draws pieces and lookalikes from):
  cases.hex    N texts, one per line as the hex of their UTF-8 bytes (texts
               hold newlines, NULs, anything); invalid UTF-8 already replaced
               by U+FFFD (as TextDecoder does), since the JavaScript reference
               only sees strings
  raw.hex      the same texts before that replacement (invalid bytes kept)
  randids.txt  N/4 random id sequences (byte tokens, added tokens, pieces)
  bom.ids      the byte tokens of a BOM, then "a" (one id sequence)
  fixture.hex  tests/fixtures/tokenizer_fuzz_regress.txt (the minimal inputs of
               every difference found so far), appended to cases.hex too

compare reads OUTDIR/{js,c}.ids, {js,c}.dec, {js,c}.rdec, c.raw.dec
and prints every difference (the case, where the ids part, both sides);
exit 1 when there is one.

minimize shrinks a text whose ids differ (given as hex) to a shortest one
that still differs, deleting pieces of it (halves, quarters, ... single
characters) with each round run through both sides in one batch, and prints
it as a line for the regression fixture.
"""
import glob
import json
import os
import random
import sys
import unicodedata

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(TOP, "tests", "fixtures", "tokenizer_fuzz_regress.txt")


def read_fixture():
    """The regression inputs: one per line, Python string-literal escapes
    (\\n, \\x00, \\u2028, \\U0001f600, and \\xNN bytes >= 0x80 as raw bytes via
    the b'' form when the line starts with b:)."""
    out = []
    if not os.path.exists(FIXTURE):
        return out
    for line in open(FIXTURE, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        if line.startswith("b:"):
            out.append(line[2:].encode("latin-1").decode("unicode_escape").encode("latin-1"))
        else:
            out.append(line.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("utf-8", "surrogatepass"))
    return out


def categories():
    """Code points by Unicode general category (surrogates left out: they
    cannot be in UTF-8 text)."""
    cats = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        cats.setdefault(unicodedata.category(chr(cp)), []).append(cp)
    return cats


WS = [" ", "  ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\u00a0", "\u1680", "\u2000", "\u2002", "\u2009",
      "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u0085", "\u180e",
      "\u2581", "\u2581\u2581", " \u2581", "\u2581 "]
BIDI = ["\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
        "\u2069", "\u061c"]
EMOJI = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F469\u200D\U0001F4BB", "\U0001F3F3\uFE0F\u200D\U0001F308",
         "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466", "\u2764\uFE0F", "1\uFE0F\u20E3", "#\u20E3",
         "\U0001F9D1\U0001F3FF\u200D\U0001F680", "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
         "\U0001FAE0", "\u270C\U0001F3FB", "\U0001F441\uFE0F\u200D\U0001F5E8\uFE0F", "\u200D", "\uFE0F", "\uFE0E",
         "\U0001F3FB", "\U0001F9B0", "\U0001F1E6", "\U0001F1FF\U0001F1E6", "\u00a9\ufe0f"]
BAD = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf",
       b"\xed\xa0\xbd\xed\xb8\x80", b"\xf4\x90\x80\x80", b"\xe2\x96", b"\xe2", b"\x80", b"\xbf\xbf",
       b"\xf0\x9f\x98", b"\xc3", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"\xef\xbb",
       b"\xf0\x80\x80\x80", b"\xe2\x96\x81\x81"]
SCRIPTS = [(0x0E01, 0x0E5B), (0x0900, 0x097F), (0x0600, 0x06FF), (0x0590, 0x05FF), (0x1100, 0x11FF),
           (0xAC00, 0xD7A3), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xFF01, 0xFF5E), (0x1D400, 0x1D7FF),
           (0x0300, 0x036F), (0x0400, 0x04FF), (0x0370, 0x03FF), (0x0980, 0x09FF), (0x0B80, 0x0BFF),
           (0x1780, 0x17FF), (0x1000, 0x109F), (0x20000, 0x2A6DF), (0xE000, 0xF8FF), (0xF0000, 0xF00FF),
           (0xFDD0, 0xFDEF), (0x2500, 0x25FF), (0x1F300, 0x1FAFF), (0x0020, 0x007E), (0x00A0, 0x00FF),
           (0x2000, 0x206F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x1F1E6, 0x1F1FF), (0x10000, 0x1007F)]


class Gen:
    def __init__(self, tj, seed):
        self.r = random.Random(seed)
        with open(tj, encoding="utf-8") as f:
            j = json.load(f)
        self.added = sorted(a["content"] for a in j.get("added_tokens", []))
        vocab = j["model"]["vocab"]
        self.pieces = sorted(vocab, key=lambda p: vocab[p])
        # byte value -> its byte token's id (Gemma 2 has none for a tab)
        self.byte_id = {x: vocab["<0x%02X>" % x] for x in range(256) if "<0x%02X>" % x in vocab}
        self.nids = max(vocab.values()) + 1
        for a in j.get("added_tokens", []):
            self.nids = max(self.nids, a["id"] + 1)
        self.cats = categories()
        self.catnames = sorted(self.cats)
        # real text to cut fragments from (words BPE merges a long way)
        self.real = ""
        for path in sorted(glob.glob("/usr/share/common-licenses/*"))[:6]:
            try:
                with open(path, encoding="utf-8") as f:
                    self.real += f.read(40000)
            except (OSError, UnicodeDecodeError):
                pass
        if not self.real:
            self.real = " ".join(self.pieces[1000:3000]).replace("\u2581", " ")

    def cp(self):
        r = self.r
        if r.random() < 0.5:
            lst = self.cats[r.choice(self.catnames)]
            return chr(r.choice(lst))
        lo, hi = r.choice(SCRIPTS)
        return chr(r.randint(lo, hi))

    def word(self):
        return "".join(self.cp() for _ in range(self.r.randint(1, 12)))

    def piece(self):
        """A vocabulary piece as text (▁ back to a space), maybe one
        character short or long: text at piece boundaries."""
        r = self.r
        p = r.choice(self.pieces)
        if p.startswith("<0x") and len(p) == 6:
            return p  # the byte token's own spelling, as literal text
        if r.random() < 0.7:
            p = p.replace("\u2581", " ")
        k = r.random()
        if k < 0.15 and len(p) > 1:
            p = p[:-1]
        elif k < 0.3 and len(p) > 1:
            p = p[1:]
        elif k < 0.45:
            p = p + self.cp()
        return p

    def added_like(self):
        r = self.r
        a = r.choice(self.added[:120] + self.added) if r.random() < 0.5 else r.choice(self.added)
        k = r.random()
        if k < 0.35:
            return a
        if k < 0.55 and len(a) > 1:
            return a[: r.randint(1, len(a) - 1)]  # a prefix: <start_of
        if k < 0.65 and len(a) > 1:
            return a[r.randint(1, len(a) - 1):]
        if k < 0.75:
            return a.upper() if r.random() < 0.5 else "<" + a
        if k < 0.85:
            return a + a
        return r.choice(["<unused99>", "<unused", "<0x41>", "<0xFF>", "<0x0A>", "<0x", "<0x00>", "<<bos>>",
                         "<bos", "< bos>", "<bos >", "</start_of_turn>", "<start_of_turn", "<div class=\"a\">",
                         "<br/>", "<!-- -->", "<unk>", "<pad>", "<mask>", "<start_of_image>", "[multimodal]",
                         "<image_soft_token>", "<unused6241>", "<unused-1>", "<UNUSED5>", "<>", "<<>>"])

    def ws_run(self):
        r = self.r
        k = r.random()
        if k < 0.3:
            return " " * r.randint(1, 40) + "\n" * r.randint(1, 3)
        if k < 0.45:
            return r.choice(WS) * r.randint(1, 70)
        return "".join(r.choice(WS) for _ in range(r.randint(1, 10)))

    def real_text(self):
        """A fragment of real text, maybe with a hard character put in, its
        case changed or a space made another kind of space."""
        r = self.r
        a = r.randrange(len(self.real))
        t = self.real[a:a + r.randint(5, 200)]
        k = r.random()
        if k < 0.3 and t:
            i = r.randrange(len(t))
            t = t[:i] + r.choice([self.cp(), r.choice(WS), r.choice(EMOJI), r.choice(BIDI), self.added_like()]) + t[i:]
        elif k < 0.4:
            t = t.upper()
        elif k < 0.55:
            t = t.replace(" ", r.choice(WS))
        return t

    def atom(self):
        r = self.r
        k = r.random()
        if r.random() < 0.2:
            return self.real_text()
        if k < 0.16:
            return self.word()
        if k < 0.30:
            return "".join(self.piece() for _ in range(r.randint(1, 5)))
        if k < 0.42:
            return self.added_like()
        if k < 0.54:
            return self.ws_run()
        if k < 0.62:
            return "".join(r.choice(EMOJI) for _ in range(r.randint(1, 4)))
        if k < 0.68:
            return r.choice(BIDI) + self.word() + r.choice(BIDI)
        if k < 0.74:
            base = self.cp()
            return base + "".join(chr(r.choice(self.cats["Mn"])) for _ in range(r.randint(1, 6)))
        if k < 0.80:
            return "".join(chr(r.randint(0, 0x20)) if r.random() < 0.7 else chr(r.randint(0x7f, 0x9f))
                           for _ in range(r.randint(1, 6)))
        if k < 0.84:
            return r.choice(["\ufffd", "\ufeff", "\uffff", "\ufffe", "\U0010ffff", "\U0001fffe", "\x00",
                             "\u00ad", "\u034f", "\u2060", "\ue000"]) * r.randint(1, 3)
        if k < 0.88:
            return BAD_MARK + str(r.randrange(len(BAD))) + BAD_MARK
        if k < 0.94:
            return "".join(r.choice("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"()[]{}<>/\\-_=+*&^%$#@~`| ")
                           for _ in range(r.randint(1, 20)))
        if k < 0.975:
            c = r.choice(["a", "Z", "0", "9", "1", " ", "\u2581", "\n", "\t", ".", "-", "=", "\u4e00", "\u0e01",
                          "\uac00", "\U0001F600", "\u00e9", "e\u0301", "ab", "<", ">"])
            return c * r.randint(50, 700)
        return "".join(self.cp() for _ in range(r.randint(50, 400)))

    def text(self, i):
        r = self.r
        if i % 500 == 7:  # a very long word now and then
            c = r.choice(["a", "x", "7", "\u0e01", "\u4e00", " ", "\u2581", "ab", "12"])
            return c * (10000 // len(c))
        if i % 500 == 8:
            return "".join(r.choice("0123456789") for _ in range(10000))
        n = r.choice([1, 1, 2, 3, 4, 6, 8])
        parts = []
        for _ in range(n):
            parts.append(self.atom())
            parts.append(r.choice(["", "", " ", "\n", "  ", "\t", "\u2581"]))
        if r.random() < 0.3:
            parts.pop()
        return "".join(parts)

    def ids(self):
        r = self.r
        out = []
        for _ in range(r.randint(1, 12)):
            k = r.random()
            if k < 0.4:
                out.append(r.randint(0, self.nids - 1))
            elif k < 0.7:
                out.append(r.randint(0, 600))
            else:
                out.append(r.randint(0, 300))
        return out


BAD_MARK = "\U0010FFFE\U0010FFFE"  # never drawn otherwise: marks where invalid bytes go


def realize(t):
    """The text's raw bytes: the marks replaced by invalid UTF-8."""
    b = t.encode("utf-8", "surrogatepass")
    m = BAD_MARK.encode()
    parts = b.split(m)
    out = []
    for k, p in enumerate(parts):
        out.append(BAD[int(p)] if k % 2 else p)
    return b"".join(out)


def gen(tj, seed, n, outdir):
    os.makedirs(outdir, exist_ok=True)
    g = Gen(tj, seed)
    # byte tokens' ids, for the random id sequences
    bid = g.byte_id
    byte_ids = sorted(bid.values())
    texts = [realize(g.text(i)) for i in range(n)]
    fixture = read_fixture()
    texts += fixture
    with open(os.path.join(outdir, "raw.hex"), "w") as f:
        for t in texts:
            f.write(t.hex() + "\n")
    with open(os.path.join(outdir, "cases.hex"), "w") as f:
        for t in texts:
            f.write(t.decode("utf-8", "replace").encode("utf-8").hex() + "\n")
    bom = [bid.get(x) for x in (0xef, 0xbb, 0xbf)]
    byte_set = set(byte_ids)

    def bom_starts_run(ids):
        """Whether the byte tokens of a BOM start a run of byte tokens: the
        reference drops that BOM (see bom.ids), so such sequences are drawn
        again and that case is checked on its own."""
        return any(ids[i:i + 3] == bom and (i == 0 or ids[i - 1] not in byte_set) for i in range(len(ids)))

    with open(os.path.join(outdir, "randids.txt"), "w") as f:
        for _ in range(max(1, n // 4)):
            ids = None
            while ids is None or bom_starts_run(ids):
                ids = g.ids()
                if byte_ids and g.r.random() < 0.6:
                    ids += [g.r.choice(byte_ids) for _ in range(g.r.randint(1, 8))]
                    g.r.shuffle(ids)
                if byte_ids and g.r.random() < 0.5:
                    # the byte tokens of a few characters, maybe cut short,
                    # among the other ids
                    for _ in range(g.r.randint(1, 4)):
                        c = g.cp().encode("utf-8")
                        if g.r.random() < 0.2:
                            c = c[: g.r.randint(0, len(c))]
                        k = g.r.randint(0, len(ids))
                        ids[k:k] = [bid[x] for x in c if x in bid]
            f.write(json.dumps(ids) + "\n")
    with open(os.path.join(outdir, "bom.ids"), "w") as f:
        f.write(json.dumps([bid.get(x, 0) for x in (0xef, 0xbb, 0xbf, ord("a"))]) + "\n")
    with open(os.path.join(outdir, "raw.bin"), "wb") as f:
        f.write(b"".join(texts))
    print("%d texts, %d bytes (%d invalid-UTF-8 texts, %d from the regression fixture)" % (
        len(texts), sum(len(t) for t in texts), sum(1 for t in texts if t != t.decode("utf-8", "replace").encode()),
        len(fixture)))


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def show(b, lim=160):
    s = repr(b.decode("utf-8", "replace"))
    return s if len(s) <= lim else s[:lim] + "...(%d bytes)" % len(b)


def compare(outdir):
    d = lambda name: os.path.join(outdir, name)
    texts = [bytes.fromhex(h) for h in lines(d("cases.hex"))]
    bad = 0

    def diff_ids(what, ts, a, b):
        nonlocal bad
        if len(a) != len(ts) or len(b) != len(ts):
            print("%s: %d texts, %d reference lines, %d of ours" % (what, len(ts), len(a), len(b)))
            bad += 1
            return
        for i, (t, x, y) in enumerate(zip(ts, a, b)):
            if x == y:
                continue
            bad += 1
            xa, ya = json.loads(x), json.loads(y)
            k = 0
            while k < min(len(xa), len(ya)) and xa[k] == ya[k]:
                k += 1
            print("%s: text %d %s\n  ids part at %d: reference %s, ours %s" % (
                what, i, show(t), k, xa[max(0, k - 2):k + 6], ya[max(0, k - 2):k + 6]))

    diff_ids("encode", texts, lines(d("js.ids")), lines(d("c.ids")))
    # decoded text of our ids: ours against the reference's
    jd, cd = lines(d("js.dec")), lines(d("c.dec"))
    rtj = 0
    for i, (t, x, y) in enumerate(zip(texts, jd, cd)):
        if json.loads(x) == t.decode("utf-8"):
            rtj += 1
        if x != y and json.loads(x) != json.loads(y):
            bad += 1
            print("decode: text %d %s\n  reference %s\n  ours      %s" % (i, show(t), x[:200], y[:200]))
    if len(jd) != len(texts) or len(cd) != len(texts):
        bad += 1
        print("decode: %d texts, %d reference lines, %d of ours" % (len(texts), len(jd), len(cd)))
    # decoding random id sequences
    ids = lines(d("randids.txt"))
    for i, (x, y) in enumerate(zip(lines(d("js.rdec")), lines(d("c.rdec")))):
        if json.loads(x) != json.loads(y):
            bad += 1
            print("decode of ids %s\n  reference %s\n  ours      %s" % (ids[i], x[:200], y[:200]))
    # invalid UTF-8: ours gives the raw bytes back (but a "▁" decodes to " ")
    raw = open(d("raw.bin"), "rb").read().replace("\u2581".encode(), b" ")
    back = raw
    if os.path.exists(d("c.raw.dec")):
        back = open(d("c.raw.dec"), "rb").read()
    else:
        raw = back = b""  # not checked (Llama 2's normalizer prepends a "▁" to each text)
    if raw != back:
        bad += 1
        k = 0
        while k < min(len(raw), len(back)) and raw[k] == back[k]:
            k += 1
        print("raw round trip: differs at byte %d: %r against %r" % (k, raw[k:k + 20], back[k:k + 20]))
    print("%d texts compared (encode, decode; the reference round-trips %d), "
          "%d id sequences decoded, %d raw bytes round-tripped: %d differences" % (
              len(texts), rtj, len(ids), len(raw), bad))
    return 1 if bad else 0


def run_both(tj, fgpack, model, texts, tmp):
    """Ids of each text from ours and from the reference: two lists."""
    import subprocess
    hexf = os.path.join(tmp, "min.hex")
    with open(hexf, "w") as f:
        for t in texts:
            f.write(t.encode("utf-8").hex() + "\n")
    with open(hexf) as f:
        ours = subprocess.run([fgpack, "tokenize", "--tokenizer", tj, "--lines", "--hex"], stdin=f,
                              capture_output=True, check=True).stdout.decode().split("\n")[:-1]
    js = subprocess.run(["node", os.path.join(TOP, "tests", "node", "gemma_tokenize.js"), "--model=" + model,
                         "--lines", "--hex", hexf], capture_output=True, check=True).stdout.decode().split("\n")[:-1]
    return ours, js


def minimize(tj, fgpack, hx, model="gemma3"):
    import tempfile
    t = bytes.fromhex(hx).decode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        ours, js = run_both(tj, fgpack, model, [t], tmp)
        if ours == js:
            print("the text does not differ")
            return 1
        k = max(1, len(t) // 2)
        while True:
            cands = []
            for size in sorted({k, max(1, k // 2), 1}, reverse=True):
                for a in range(0, len(t), size):
                    c = t[:a] + t[a + size:]
                    if c and c not in cands:
                        cands.append(c)
            if not cands:
                break
            ours, js = run_both(tj, fgpack, model, cands, tmp)
            bad = [c for c, x, y in zip(cands, ours, js) if x != y]
            if not bad:
                if k == 1:
                    break
                k = max(1, k // 4)
                continue
            t = min(bad, key=len)
            k = max(1, len(t) // 2)
            print("%d characters: %r" % (len(t), t), file=sys.stderr)
        ours, js = run_both(tj, fgpack, model, [t], tmp)
        print("ours %s\nreference %s" % (ours[0], js[0]), file=sys.stderr)
    print(t.encode("unicode_escape").decode("ascii"))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) in (5, 6) and sys.argv[1] == "minimize":
        sys.exit(minimize(*sys.argv[2:]))
    elif len(sys.argv) == 3 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2]))
    else:
        sys.exit(__doc__)
