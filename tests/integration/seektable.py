"""seektable.py - pack's seek table for the hostile bundle tests
(bundle_hostile.sh): a bundle's frames as [bytes, tar bytes] pairs read
through its table, and a bundle made again from such a list."""
import struct

TABLE_MAGIC = 0x184D2A5E   # the skippable frame holding the table
FOOTER_MAGIC = 0x8F92EAB1  # the zstd seekable format's footer


def frames(d):
    """The frames the seek table at the end of d lists, in order."""
    n = struct.unpack("<I", d[-9:-5])[0]
    st = len(d) - (8 + 8 * n + 9)
    out, at = [], 0
    for i in range(n):
        c, u = struct.unpack("<II", d[st + 8 + 8 * i:st + 16 + 8 * i])
        out.append([d[at:at + c], u])
        at += c
    return out


def build(fr, desc=0):
    """The frames of fr, then a seek table listing them (descriptor desc)."""
    tab = b"".join(struct.pack("<II", len(f), u) for f, u in fr)
    tab += struct.pack("<I", len(fr)) + bytes([desc]) + struct.pack("<I", FOOTER_MAGIC)
    return b"".join(f for f, u in fr) + struct.pack("<II", TABLE_MAGIC, len(tab)) + tab
