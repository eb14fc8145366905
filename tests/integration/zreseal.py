"""zreseal.py - a byte flipped inside a zstd frame's raw block, the frame's
content checksum written again (bundle_pack.sh): the frame then decodes and
its checksum holds, so what a reader finds is the member's digest, not the
frame. python3 has no xxhash here: XXH64 from its public spec (RFC 8878
3.1.1 stores the low 32 bits of the content's XXH64, seed 0, little-endian).

  python3 zreseal.py IN OUT AT   flip byte AT of IN (in a raw block), reseal
  python3 zreseal.py --sum FILE  the low 32 bits of FILE's XXH64, as hex"""
import struct
import sys

M = (1 << 64) - 1
P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P4, P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def _round(acc, v):
    return (_rotl((acc + v * P2) & M, 31) * P1) & M


def _merge(h, v):
    return ((h ^ _round(0, v)) * P1 + P4) & M


def xxh64(d, seed=0):
    n, p = len(d), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        stripes = n // 32
        w = struct.unpack_from("<%dQ" % (4 * stripes), d)
        for i in range(0, 4 * stripes, 4):
            v = [_round(v[0], w[i]), _round(v[1], w[i + 1]),
                 _round(v[2], w[i + 2]), _round(v[3], w[i + 3])]
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M
        for x in v:
            h = _merge(h, x)
        p = 32 * stripes
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while p + 8 <= n:
        h = (_rotl(h ^ _round(0, struct.unpack_from("<Q", d, p)[0]), 27) * P1 + P4) & M
        p += 8
    if p + 4 <= n:
        h = (_rotl(h ^ (struct.unpack_from("<I", d, p)[0] * P1) & M, 23) * P2 + P3) & M
        p += 4
    while p < n:
        h = (_rotl(h ^ (d[p] * P5) & M, 11) * P1) & M
        p += 1
    h = ((h ^ (h >> 33)) * P2) & M
    h = ((h ^ (h >> 29)) * P3) & M
    return h ^ (h >> 32)


def _frame(d, pos):
    """The zstd frame at pos: (its end, its content checksum's offset or
    None, [(kind, header offset, content offset, size)] of its blocks)."""
    magic = struct.unpack_from("<I", d, pos)[0]
    if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable: no blocks
        return pos + 8 + struct.unpack_from("<I", d, pos + 4)[0], None, []
    if magic != 0xFD2FB528:
        raise ValueError("no zstd frame at byte %d" % pos)
    fhd = d[pos + 4]
    single = fhd >> 5 & 1
    p = pos + 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    p += (0, 2, 4, 8)[fhd >> 6] if fhd >> 6 else single
    blocks, last = [], 0
    while not last:
        bh = d[p] | d[p + 1] << 8 | d[p + 2] << 16
        last, kind, size = bh & 1, bh >> 1 & 3, bh >> 3
        blocks.append((kind, p, p + 3, size))
        p += 3 + (1 if kind == 1 else size)
    return (p + 4, p, blocks) if fhd & 4 else (p, None, blocks)


def reseal(d, at):
    """Flips byte at of d (a bytearray) inside a raw block and writes the
    frame's checksum again; returns the frame's offset."""
    pos = 0
    while pos < len(d):
        end, chk, blocks = _frame(d, pos)
        if pos <= at < end:
            break
        pos = end
    else:
        raise ValueError("byte %d is past the last frame" % at)
    if chk is None or not any(k == 0 and c <= at < c + n for k, h, c, n in blocks):
        raise ValueError("byte %d is in no raw block of a frame with a checksum" % at)
    if any(k == 2 for k, h, c, n in blocks):
        raise ValueError("the frame at byte %d has compressed blocks" % pos)
    d[at] ^= 0x01
    content = b"".join(bytes(d[c:c + n]) if k == 0 else bytes(d[c:c + 1]) * n
                       for k, h, c, n in blocks)
    d[chk:chk + 4] = struct.pack("<I", xxh64(content) & 0xFFFFFFFF)
    return pos


if __name__ == "__main__":
    if sys.argv[1] == "--sum":
        print("%08x" % (xxh64(open(sys.argv[2], "rb").read()) & 0xFFFFFFFF))
        sys.exit(0)
    buf = bytearray(open(sys.argv[1], "rb").read())
    reseal(buf, int(sys.argv[3]))
    open(sys.argv[2], "wb").write(buf)
