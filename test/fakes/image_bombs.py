"""Decompression bombs: small, valid PNG files that declare a huge image.

``png_bomb(20000, 20000)`` is a ~390 kB 8-bit greyscale PNG of zeros that decodes to 400 MB
(1.2 GB as the RGB frame OpenCV makes of it). It is written by streaming zlib over one row at a
time, so building it never holds the image.
"""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def png_bomb(width: int = 20_000, height: int = 20_000) -> bytes:
    """A complete, decodable greyscale PNG of ``width`` x ``height`` zeros."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grey, no interlace
    compressor = zlib.compressobj(9)
    row = bytes(width + 1)  # filter byte 0, then the zero pixels
    parts = [compressor.compress(row) for _ in range(height)]
    parts.append(compressor.flush())
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", b"".join(parts))
            + _chunk(b"IEND", b""))
