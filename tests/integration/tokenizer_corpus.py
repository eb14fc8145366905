#!/usr/bin/env python3
"""tokenizer_corpus.py - builds the varied real text tokenizer_ref.sh compares
our tokenizer on against the JavaScript reference, deterministically.

    tokenizer_corpus.py OUTDIR [SCALE]

Writes into OUTDIR (SCALE multiplies the sizes, default 1 = about 1.3 MB):
  licenses.txt  Debian's license texts (/usr/share/common-licenses)
  man_en.txt    raw roff of English man pages (/usr/share/man/man1)
  man_intl.txt  raw roff of ja, zh_CN, ko, ru, uk man pages
  mo.txt        translations from the machine's .mo catalogs in Thai, Arabic,
                Hindi, Bengali, Tamil, Hebrew, Amharic, Georgian, Greek...
  code.txt      fgpack's own C sources
  synth.txt     seeded random text: words from many Unicode blocks, emoji
                sequences, whitespace runs, control characters, literal added
                tokens, a few hand-written sentences
  invalid.bin   text with invalid UTF-8 sequences mixed in
"""
import gettext
import glob
import gzip
import os
import random
import sys

out = sys.argv[1]
scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.makedirs(out, exist_ok=True)


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def cut(b, limit):
    """b cut to limit bytes without splitting a UTF-8 sequence at the end."""
    b = b[: int(limit)]
    for k in range(1, 4):
        try:
            b.decode("utf-8")
            break
        except UnicodeDecodeError as e:
            if e.reason != "unexpected end of data":
                break
            b = b[:-1]
    return b


def gather(paths, limit, reader):
    parts, total = [], 0
    for p in paths:
        try:
            b = reader(p)
        except Exception:
            continue
        parts.append(b)
        total += len(b)
        if total >= limit:
            break
    return cut(b"".join(parts), limit)


def read_plain(p):
    with open(p, "rb") as f:
        return f.read()


def read_gz(p):
    with gzip.open(p, "rb") as f:
        return f.read()


write("licenses.txt", gather(sorted(glob.glob("/usr/share/common-licenses/*")), 300e3 * scale, read_plain))
man1 = sorted(glob.glob("/usr/share/man/man1/*.gz"))
random.Random(1).shuffle(man1)
write("man_en.txt", gather(man1, 300e3 * scale, read_gz))
intl = []
for lang in ["ja", "zh_CN", "zh_TW", "ko", "ru", "uk", "de", "pl", "tr"]:
    pages = sorted(glob.glob("/usr/share/man/%s/man*/*.gz" % lang))
    intl.append(gather(pages, 30e3 * scale, read_gz))
write("man_intl.txt", b"".join(intl))

mo_parts = []
for lang in ["th", "ar", "hi", "bn", "ta", "he", "am", "ka", "el", "fa", "ur", "ml", "km", "my", "vi", "ja", "zh_CN"]:
    budget = 14e3 * scale
    for mo in sorted(glob.glob("/usr/share/locale/%s/LC_MESSAGES/*.mo" % lang)):
        try:
            with open(mo, "rb") as f:
                cat = gettext.GNUTranslations(f)._catalog
        except Exception:
            continue
        for k in sorted(cat, key=str):
            if k == "":
                continue
            v = cat[k]
            if isinstance(v, str) and v:
                b = (v + "\n").encode("utf-8", "surrogatepass")
                mo_parts.append(b)
                budget -= len(b)
            if budget <= 0:
                break
        if budget <= 0:
            break
write("mo.txt", b"".join(mo_parts))

code = sorted(glob.glob(os.path.join(top, "lib", "*.[ch]")) + glob.glob(os.path.join(top, "cmd", "*.c")))
write("code.txt", gather(code, 150e3 * scale, read_plain))

rng = random.Random(20261129)
blocks = [
    (0x0041, 0x007A), (0x00C0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF), (0x0530, 0x058F),
    (0x0590, 0x05FF), (0x0600, 0x06FF), (0x0900, 0x097F), (0x0980, 0x09FF), (0x0B80, 0x0BFF),
    (0x0E00, 0x0E7F), (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x3040, 0x30FF), (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF), (0xE000, 0xE0FF), (0x2200, 0x22FF),
]
emoji = ["😀", "👍🏽", "👩‍💻", "🏳️‍🌈", "🇩🇪", "🇯🇵", "❤️", "🧑🏿‍🚀", "1️⃣", "🫠", "👨‍👩‍👧‍👦", "✈️", "🦀"]
specials = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>",
            "<unused5>", "<table>", "</td>", "<0x41>", "▁▁", "▁", "<start_of_image>", "[multimodal]",
            "<image_soft_token>", "<h1>", "< bos>", "<bos", "<<bos>>"]
sentences = [
    "The quick brown fox jumps over the lazy dog.",
    "ภาษาไทยเป็นภาษาที่ไม่มีการเว้นวรรคระหว่างคำ",
    "我们今天去公园散步，天气非常好。",
    "العربية لغة جميلة، وتكتب من اليمين إلى اليسار.",
    "हिन्दी भारत की एक प्रमुख भाषा है।",
    "Ünïcödé naïve café — “quotes” ‘single’ … ½ ¼ € £ ¥",
    "def f(x):\n\treturn x ** 2  # comment\n",
    "SELECT * FROM t WHERE a <> 'b' AND c >= 10;",
]
ws = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\ufeff",
      "\u200b", "\u200d"]
controls = [chr(c) for c in list(range(0, 32)) + [127] + list(range(0x80, 0xA0))]
pieces = []
size = 0
target = 250e3 * scale
while size < target:
    r = rng.random()
    if r < 0.45:
        lo, hi = rng.choice(blocks)
        s = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 9)))
    elif r < 0.55:
        s = rng.choice(sentences)
    elif r < 0.63:
        s = "".join(rng.choice(emoji) for _ in range(rng.randint(1, 4)))
    elif r < 0.71:
        s = rng.choice(specials)
    elif r < 0.80:
        s = rng.choice(ws) * rng.randint(1, 40)
    elif r < 0.86:
        s = "".join(rng.choice(controls) for _ in range(rng.randint(1, 5)))
    else:
        s = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"()[]{}<>/\\-_=+*&^%$#@~`|")
                    for _ in range(rng.randint(1, 12)))
    pieces.append(s)
    pieces.append(rng.choice([" ", " ", " ", "", "\n"]))
    size += len(s.encode("utf-8"))
write("synth.txt", "".join(pieces).encode("utf-8"))

bad = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x96",
       b"\xe2", b"\x80", b"\xbf\xbf", b"\xf0\x9f\x98", b"\xc3", b"\xf8\x88\x80\x80\x80"]
text = open(os.path.join(out, "licenses.txt"), "rb").read()[: int(60e3 * scale)]
parts = []
for i in range(0, len(text), 97):
    parts.append(text[i:i + 97])
    parts.append(rng.choice(bad))
write("invalid.bin", b"".join(parts))
