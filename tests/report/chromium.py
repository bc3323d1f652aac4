"""Debian's ``chromium``, headless, for the status page tests: found, or installed once.

Choice: when ``/usr/bin/chromium`` is missing and this process is root with
``apt-get`` on PATH, the session installs the package as ``make test`` does
(``apt-get install -y --no-install-recommends chromium fonts-liberation``, one
``apt-get update`` retry; ``make test`` has usually installed it already), under
a file lock so parallel workers install it once. A failed install as root fails
the tests (they must not vanish silently); without root or apt the tests skip and
say why.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_TIMEOUT = 900.0
RUN_TIMEOUT = 90.0


def ensure_chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if shutil.which("apt-get") is None:
        pytest.skip("no /usr/bin/chromium, and no apt-get to install Debian's chromium package")
    if os.geteuid() != 0:
        pytest.skip("no /usr/bin/chromium; run as root or `apt-get install -y chromium` first")
    lock = Path(tempfile.gettempdir()) / "reconciler-tests-chromium.lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        if not CHROMIUM.exists():
            _apt_install()
    return CHROMIUM


def _apt_install() -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # as the Makefile's test-packages: no recommended packages (they were 116, avahi to
    # samba's libraries, 37 s of wall), but the fonts Chromium recommends for pages
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    install = [*apt, "install", "-y", "--no-install-recommends", "chromium", "fonts-liberation"]
    proc = subprocess.run(install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    if proc.returncode != 0:  # a fresh container has no package lists yet
        subprocess.run([*apt, "update"], env=env, capture_output=True, timeout=INSTALL_TIMEOUT)
        proc = subprocess.run(
            install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
    if proc.returncode != 0 or not CHROMIUM.exists():
        pytest.fail(f"{' '.join(install)} failed: {proc.stderr[-2000:]}")


def headless(chromium: Path, profile: Path, url: str, *args: str) -> str:
    """Run headless Chromium on ``url`` with ``args``; its stdout (the DOM with --dump-dom).

    ``--no-sandbox``: Chromium's sandbox refuses to run as root, as tests in a
    container do; the pages hold no script and a Content Security Policy anyway.
    """
    command = [
        str(chromium),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--window-size=1280,900",
        *args,
        url,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout


def png_colours(path: Path) -> set[tuple[int, int, int]]:
    """Every RGB colour of an 8-bit RGB(A), non-interlaced PNG (what Chromium writes).

    Enough of the PNG format (RFC 2083) to read a screenshot without an imaging
    library: concatenate IDAT, inflate, undo each row's filter. The rows Chromium
    writes are mostly filtered ``Up`` or ``Sub`` (a page's flat areas): those are undone
    a whole row at a time (``_add_rows``); a byte at a time, a 1280x900 screenshot took
    a second of CPU. ``Average`` and ``Paeth`` rows still go byte by byte.
    """
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    bpp = 4 if colour_type == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    colours: set[tuple[int, int, int]] = set()
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, filtered = raw[start], raw[start + 1 : start + 1 + stride]
        if kind == 0:
            row = filtered
        elif kind == 1:
            row = _prefix_sums(filtered, bpp)
        elif kind == 2:
            row = _add_rows(filtered, previous)
        else:
            row = _unfilter_bytewise(kind, filtered, previous, bpp)
        if row != previous or y == 0:
            colours.update(zip(row[0::bpp], row[1::bpp], row[2::bpp], strict=True))
        previous = row
    return colours


def _add_rows(a: bytes, b: bytes) -> bytes:
    """``a[i] + b[i]`` modulo 256 for every byte at once, as one big integer: the low
    seven bits of each byte are added (their carry stays in the byte), the top bit is
    then the XOR of both top bits and that carry."""
    n = len(a)
    x, y = int.from_bytes(a, "big"), int.from_bytes(b, "big")
    high = int.from_bytes(b"\x80" * n, "big")
    low = int.from_bytes(b"\x7f" * n, "big")
    return (((x & low) + (y & low)) ^ ((x ^ y) & high)).to_bytes(n, "big")


def _prefix_sums(filtered: bytes, bpp: int) -> bytes:
    """The ``Sub`` filter undone: each byte plus the one ``bpp`` before it, once that is
    undone too, i.e. a running sum over every ``bpp``-th byte, taken in doubling steps
    (a byte ``shift`` places on is added ``shift`` places later, as big-integer shifts)."""
    row, shift, n = filtered, bpp, len(filtered)
    while shift < n:
        row = _add_rows(row, bytes(shift) + row[: n - shift])
        shift *= 2
    return row


def _unfilter_bytewise(kind: int, filtered: bytes, previous: bytes, bpp: int) -> bytes:
    """The ``Average`` (3) and ``Paeth`` (4) filters undone, a byte at a time."""
    assert kind in (3, 4), f"PNG filter type {kind}"
    row = bytearray(filtered)
    for i in range(len(row)):
        a = row[i - bpp] if i >= bpp else 0
        b = previous[i]
        if kind == 3:
            row[i] = (row[i] + (a + b) // 2) & 0xFF
        else:
            c = previous[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    return bytes(row)


def rgb(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)
