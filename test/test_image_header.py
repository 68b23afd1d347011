"""image_header: PNG/JPEG sizes from the header alone, and decoding refused past a pixel cap."""

from __future__ import annotations

import array

import cv2
import numpy as np
import pytest

from sam3_agent_ros.image_header import (
    DEFAULT_MAX_PIXELS,
    MAX_JPEG_SEGMENTS,
    ImageHeaderError,
    ImageTooLarge,
    check_encoded,
    decode_bounded,
    encoded_size,
    pixel_cap_problem,
)
from test.fakes.image_bombs import png_bomb
from test.fakes.peak_rss import peak_rss_mb


def encoded(ext: str, height: int, width: int, channels: int = 3, dtype=np.uint8,
            params: tuple = ()) -> bytes:
    shape = (height, width) if channels == 1 else (height, width, channels)
    image = np.random.default_rng(height * width).integers(0, 200, shape).astype(dtype)
    ok, data = cv2.imencode(ext, image, list(params))
    assert ok
    return data.tobytes()


def with_exif(jpeg: bytes, size: int = 60_000) -> bytes:
    """``jpeg`` with a large APP1 (EXIF-like) segment and a comment before its frame header."""
    app1 = b"\xff\xe1" + (size + 2).to_bytes(2, "big") + b"Exif\x00\x00" + bytes(size - 6)
    comment = b"\xff\xfe\x00\x07hello"
    return jpeg[:2] + app1 + comment + jpeg[2:]


@pytest.mark.parametrize("data,expected", [
    (encoded(".png", 480, 640), ("png", 640, 480)),
    (encoded(".png", 7, 13, channels=1), ("png", 13, 7)),
    (encoded(".png", 5, 3, channels=1, dtype=np.uint16), ("png", 3, 5)),
    (encoded(".png", 9, 4, channels=4), ("png", 4, 9)),
    (encoded(".jpg", 480, 640), ("jpeg", 640, 480)),
    (encoded(".jpg", 1, 1, channels=1), ("jpeg", 1, 1)),
    (encoded(".jpg", 33, 65, params=(cv2.IMWRITE_JPEG_PROGRESSIVE, 1)), ("jpeg", 65, 33)),
    (with_exif(encoded(".jpg", 20, 30)), ("jpeg", 30, 20)),
    (png_bomb(20_000, 20_000), ("png", 20_000, 20_000)),
])
def test_size_comes_from_the_header_and_matches_the_decoder(data, expected):
    assert encoded_size(data) == expected
    if expected[1] * expected[2] < 10**6:
        decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
        assert decoded.shape[:2] == (expected[2], expected[1])


def test_any_byte_container_is_read():
    data = encoded(".png", 4, 6)
    for container in (data, bytearray(data), array.array("B", data), memoryview(data),
                      np.frombuffer(data, np.uint8), list(data)):
        assert encoded_size(container) == ("png", 6, 4)


@pytest.mark.parametrize("ext", [".png", ".jpg"])
def test_every_truncated_header_is_a_clear_error(ext):
    data = with_exif(encoded(ext, 10, 12), 100) if ext == ".jpg" else encoded(ext, 10, 12)
    full = encoded_size(data)
    header_end = next(n for n in range(len(data) + 1)
                      if _size_or_none(data[:n]) == full)
    for cut in range(header_end):
        with pytest.raises(ImageHeaderError) as caught:
            encoded_size(data[:cut])
        assert str(caught.value)


def _size_or_none(data: bytes):
    try:
        return encoded_size(data)
    except ImageHeaderError:
        return None


@pytest.mark.parametrize("data,reason", [
    (b"", "neither PNG nor JPEG"),
    (b"not an image at all", "neither PNG nor JPEG"),
    (b"BM" + bytes(60), "neither PNG nor JPEG"),  # BMP: its size is not read here, refused
    (b"GIF89a" + bytes(20), "neither PNG nor JPEG"),
    (b"\x89PNG\r\n\x1a\n" + bytes(4) + b"IDAT" + bytes(8), "first chunk is not IHDR"),
    (png_bomb(1, 1)[:16] + bytes(8) + png_bomb(1, 1)[24:], "IHDR declares 0x0"),
    (b"\xff\xd8 definitely not a jpeg", "no segment marker at byte 2"),
    (b"\xff\xd8\xff\xda\x00\x02", "image data before any frame size"),
    (b"\xff\xd8\xff\xe0\x00\x01", "has length 1"),
    (b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x00\x00\x10\x03", "the frame declares 16x0"),
    (b"\xff\xd8" + b"\xff" * 100 + b"\xc0", "more than 64 fill bytes"),
    (b"\xff\xd8" + b"\xff\xfe\x00\x02" * (MAX_JPEG_SEGMENTS + 1), "no frame size (SOF) in its"),
    (b"\xff\xd8" + b"\xff\xe1\xff\xff" + bytes(100), "no frame size (SOF) segment"),
])
def test_garbage_and_malformed_headers_say_what_is_wrong(data, reason):
    with pytest.raises(ImageHeaderError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        encoded_size(data)


def test_random_bytes_after_a_signature_never_raise_anything_else():
    rng = np.random.default_rng(7)
    for prefix in (b"\xff\xd8", b"\x89PNG\r\n\x1a\n", b""):
        for _ in range(300):
            data = prefix + rng.integers(0, 256, int(rng.integers(0, 80)), np.uint8).tobytes()
            try:
                _, width, height = encoded_size(data)
            except ImageHeaderError:
                continue
            assert width > 0 and height > 0


def test_the_pixel_cap():
    assert pixel_cap_problem(7680, 4320, DEFAULT_MAX_PIXELS) is None  # 8K UHD fits the default
    assert pixel_cap_problem(20_000, 20_000, DEFAULT_MAX_PIXELS) == (
        f"20000x20000 = 400000000 pixels, more than max_image_pixels={DEFAULT_MAX_PIXELS}")
    assert check_encoded(encoded(".png", 10, 10), 100) == (10, 10)
    with pytest.raises(ImageTooLarge, match="10x11 = 110 pixels, more than max_image_pixels=100"):
        check_encoded(encoded(".png", 11, 10), 100)


def test_decode_bounded_decodes_within_the_cap_and_says_when_data_is_broken():
    data = encoded(".png", 6, 8)
    assert decode_bounded(data, 48).shape == (6, 8, 3)
    assert decode_bounded(data, 48, cv2.IMREAD_UNCHANGED).shape == (6, 8, 3)
    broken = data[:40] + bytes(len(data) - 40)  # the header survives, the pixels do not
    with pytest.raises(ValueError, match="does not decode"):
        decode_bounded(broken, 48)


def test_the_decompression_bomb_is_refused_without_a_big_allocation(png_bomb_file):
    """The issue's attack: a 389 kB PNG that OpenCV decodes to 20000x20000x3 (1.2 GB, peak RSS
    2.4 GB). Refused from its header: the process's peak RSS is that of decoding a tiny PNG."""
    code = """
import cv2, numpy as np
from sam3_agent_ros.image_header import ImageTooLarge, decode_bounded
data = np.fromfile({path!r}, np.uint8)
try:
    decode_bounded(data, {cap})
    print("DECODED")
except ImageTooLarge as exc:
    print("REFUSED", exc)
"""
    small = png_bomb_file.parent / "small.png"
    small.write_bytes(png_bomb(64, 64))
    baseline, out = peak_rss_mb(code.format(path=str(small), cap=DEFAULT_MAX_PIXELS))
    assert "DECODED" in out
    peak, out = peak_rss_mb(code.format(path=str(png_bomb_file), cap=DEFAULT_MAX_PIXELS))
    assert "REFUSED 20000x20000 = 400000000 pixels" in out
    assert png_bomb_file.stat().st_size < 400_000
    assert peak < baseline + 50, (baseline, peak)  # decoding it would take 1200+ MiB
