"""The size of an encoded image from its header, and decoding refused past a pixel cap.

A PNG of a few hundred kilobytes can declare 20000x20000 pixels and decode to gigabytes (a
decompression bomb): the decoder allocates the whole image first. PNG and JPEG state their size
in their first bytes (PNG: the IHDR chunk right after the signature; JPEG: the SOF segment,
reached by skipping the segments before it by their lengths), so the size is checked from the
header before anything is decoded. Other formats are refused: their size is not read here.

ROS-free and pure except ``decode_bounded`` (OpenCV): used by ``ros/conversions.py`` (compressed
frames), ``inputs.read_rgb`` (``sam3-agent run`` and eval) and eval's mask reading.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sam3_agent_ros.config import PARAMETERS_BY_NAME

DEFAULT_MAX_PIXELS: int = PARAMETERS_BY_NAME["max_image_pixels"].default
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers: C0..CF except DHT (C4), JPG (C8) and DAC (CC).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers without a length field: TEM, RST0..7, SOI, EOI.
_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8), 0xD8, 0xD9})
_SOS = 0xDA  # start of scan: the entropy-coded data follows; a frame header must come before
MAX_JPEG_SEGMENTS = 256  # real files have a handful (APPn, DQT, DHT) before the frame header
MAX_JPEG_FILL = 64  # 0xFF fill bytes allowed before one marker


class ImageHeaderError(ValueError):
    """The header is missing, truncated or malformed, or declares too many pixels; the message
    says which."""


class ImageTooLarge(ImageHeaderError):
    """The header declares more pixels than the cap (nothing was decoded)."""


def encoded_size(data: Any) -> tuple[str, int, int]:
    """``(format, width, height)`` of PNG or JPEG ``data`` (bytes, bytearray, array.array,
    uint8 ndarray), read from the header alone; ``ImageHeaderError`` otherwise."""
    buffer = byte_view(data)
    if len(buffer) >= 2 and buffer[0] == 0xFF and buffer[1] == 0xD8:
        width, height = _jpeg_size(buffer)
        return "jpeg", width, height
    if bytes(buffer[:8]) == PNG_SIGNATURE:
        width, height = _png_size(buffer)
        return "png", width, height
    raise ImageHeaderError(f"neither PNG nor JPEG (starts with {bytes(buffer[:8])!r}); only "
                           "these are read, their size being checked before decoding")


def byte_view(data: Any) -> np.ndarray:
    """``data`` as a flat uint8 array, without a copy when it exposes a buffer."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8) if data.dtype.itemsize == 1 \
            else np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except TypeError:  # a list of ints (test doubles)
        return np.asarray(data, dtype=np.uint8)


def _png_size(buffer: np.ndarray) -> tuple[int, int]:
    if len(buffer) < 24:
        raise ImageHeaderError(f"truncated PNG header ({len(buffer)} bytes, the size is in the "
                               "first 24)")
    if bytes(buffer[12:16]) != b"IHDR":
        raise ImageHeaderError("malformed PNG: its first chunk is not IHDR")
    width, height = _u32(buffer, 16), _u32(buffer, 20)
    if width == 0 or height == 0:
        raise ImageHeaderError(f"malformed PNG: IHDR declares {width}x{height}")
    return width, height


def _jpeg_size(buffer: np.ndarray) -> tuple[int, int]:
    """Walk the segments after SOI by their lengths up to the first SOF (strictly: a marker must
    start where the previous segment ends; a bounded number of segments and fill bytes)."""
    position, size = 2, len(buffer)
    for _ in range(MAX_JPEG_SEGMENTS):
        if position >= size:
            raise ImageHeaderError("truncated JPEG header: no frame size (SOF) segment")
        if buffer[position] != 0xFF:
            raise ImageHeaderError(f"malformed JPEG: no segment marker at byte {position}")
        fill = buffer[position:position + MAX_JPEG_FILL + 1] == 0xFF
        run = int(np.argmin(fill)) if not fill.all() else len(fill)
        if run > MAX_JPEG_FILL:
            raise ImageHeaderError(f"malformed JPEG: more than {MAX_JPEG_FILL} fill bytes at "
                                   f"byte {position}")
        position += run
        if position >= size:
            raise ImageHeaderError("truncated JPEG header: a marker is cut off")
        marker = int(buffer[position])
        position += 1
        if marker in _STANDALONE_MARKERS:
            continue
        if position + 2 > size:
            raise ImageHeaderError("truncated JPEG header: a segment length is cut off")
        length = _u16(buffer, position)
        if length < 2:
            raise ImageHeaderError(f"malformed JPEG: segment FF{marker:02X} has length {length}")
        if marker in _SOF_MARKERS:
            if position + 7 > size:
                raise ImageHeaderError("truncated JPEG header: the frame size is cut off")
            height, width = _u16(buffer, position + 3), _u16(buffer, position + 5)
            if width == 0 or height == 0:
                raise ImageHeaderError(f"malformed JPEG: the frame declares {width}x{height}")
            return width, height
        if marker == _SOS:
            raise ImageHeaderError("malformed JPEG: image data before any frame size (SOF)")
        position += length
    raise ImageHeaderError(f"malformed JPEG: no frame size (SOF) in its first "
                           f"{MAX_JPEG_SEGMENTS} segments")


def _u16(buffer: np.ndarray, at: int) -> int:
    return int(buffer[at]) << 8 | int(buffer[at + 1])


def _u32(buffer: np.ndarray, at: int) -> int:
    return _u16(buffer, at) << 16 | _u16(buffer, at + 2)


def pixel_cap_problem(width: int, height: int, max_pixels: int) -> str | None:
    """Why a ``width`` x ``height`` image is refused by the cap ``max_pixels``, or None."""
    pixels = int(width) * int(height)
    if pixels <= max_pixels:
        return None
    return (f"{width}x{height} = {pixels} pixels, more than max_image_pixels={max_pixels}")


def check_encoded(data: Any, max_pixels: int) -> tuple[int, int]:
    """``(width, height)`` of PNG/JPEG ``data`` within ``max_pixels``; ``ImageTooLarge`` past
    it, ``ImageHeaderError`` for a header that cannot be read."""
    _, width, height = encoded_size(data)
    problem = pixel_cap_problem(width, height, max_pixels)
    if problem:
        raise ImageTooLarge(problem)
    return width, height


def decode_bounded(data: Any, max_pixels: int, flags: int | None = None) -> np.ndarray:
    """``cv2.imdecode`` (default ``IMREAD_COLOR``: BGR) of PNG/JPEG ``data`` whose header
    declares at most ``max_pixels``; ``ImageHeaderError`` before decoding, else ``ValueError``
    when the data does not decode."""
    import cv2

    check_encoded(data, max_pixels)
    decoded = cv2.imdecode(byte_view(data), cv2.IMREAD_COLOR if flags is None else flags)
    if decoded is None or decoded.size == 0:
        raise ValueError("the image data does not decode")
    return decoded
