"""``png_colours``, the screenshot reader of the Chromium tests, against PNGs written here.

It undoes the Up and Sub filters a row at a time with big-integer arithmetic: each of
the five filter types (RFC 2083, section 6) is written here by the specification's own
byte-by-byte formulas, in RGB and RGBA, with bytes that overflow (255 next to 255).
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import pytest

from tests.report.chromium import png_colours


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filtered(kind: int, row: bytes, above: bytes, bpp: int) -> bytes:
    out = bytearray()
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = above[i]
        c = above[i - bpp] if i >= bpp else 0
        predictor = (0, a, b, (a + b) // 2, paeth(a, b, c))[kind]
        out.append((x - predictor) & 0xFF)
    return bytes(out)


def write_png(path: Path, rows: list[bytes], kinds: list[int], width: int, bpp: int) -> None:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    raw, above = b"", bytes(width * bpp)
    for row, kind in zip(rows, kinds, strict=True):
        raw += bytes([kind]) + filtered(kind, row, above, bpp)
        above = row
    header = struct.pack(">IIBBBBB", width, len(rows), 8, 6 if bpp == 4 else 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("bpp", [3, 4])
def test_every_filter_type_gives_the_pixels_colours(tmp_path: Path, bpp: int) -> None:
    rnd = random.Random(bpp)
    width = 37
    rows = [
        bytes(
            rnd.choice((0, 1, 127, 128, 254, 255, rnd.randrange(256))) for _ in range(width * bpp)
        )
        for _ in range(40)
    ]
    rows[5] = rows[4]  # a row like the one above: its colours are already in
    kinds = [y % 5 for y in range(len(rows))]  # None, Sub, Up, Average, Paeth in turn
    path = tmp_path / "shot.png"
    write_png(path, rows, kinds, width, bpp)
    expected = {(r[i], r[i + 1], r[i + 2]) for r in rows for i in range(0, len(r), bpp)}
    assert png_colours(path) == expected


def test_an_unknown_filter_type_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.png"
    write_png(path, [bytes(6)], [0], 2, 3)
    data = bytearray(path.read_bytes())
    # the one row's filter byte, inside the deflated IDAT: rewrite the chunk instead
    raw = b"\x05" + bytes(6)
    body = zlib.compress(raw)
    start = data.index(b"IDAT") - 4
    end = start + 12 + struct.unpack(">I", data[start : start + 4])[0]
    chunk = (
        struct.pack(">I", len(body))
        + b"IDAT"
        + body
        + struct.pack(">I", zlib.crc32(b"IDAT" + body))
    )
    path.write_bytes(bytes(data[:start]) + chunk + bytes(data[end:]))
    with pytest.raises(AssertionError, match="PNG filter type 5"):
        png_colours(path)
