"""Round trips Image/CompressedImage <-> numpy over encodings, sizes, padded rows, byte order;
Frame <-> header <-> Frame over stamps and frame ids; the node's FrameReader."""

from __future__ import annotations

import sys

import cv2
import numpy as np
import pytest
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.image_header import DEFAULT_MAX_PIXELS
from sam3_agent_ros.ros.conversions import (
    SUPPORTED_ENCODINGS,
    FrameReader,
    FrameUnusable,
    ImageConversionError,
    array_to_image,
    check_compressed_header,
    check_image_header,
    compressed_to_rgb,
    frame_header,
    frame_problem,
    frame_stamp_ns,
    header_frame,
    image_to_rgb,
    jpeg_image,
    message_to_frame,
    mono8_image,
    rgb8_image,
    stamp_ns,
)
from test.fakes.image_bombs import png_bomb

SIZES = [(1, 1), (3, 5), (480, 640), (7, 13)]


def random_rgb(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def encode(rgb: np.ndarray, encoding: str) -> np.ndarray:
    """``rgb`` in the channel layout of ``encoding`` (what a camera driver would publish)."""
    if encoding == "rgb8":
        return rgb
    if encoding == "bgr8":
        return rgb[:, :, ::-1]
    alpha = np.full(rgb.shape[:2] + (1,), 200, np.uint8)
    if encoding == "rgba8":
        return np.concatenate([rgb, alpha], axis=2)
    if encoding == "bgra8":
        return np.concatenate([rgb[:, :, ::-1], alpha], axis=2)
    if encoding == "mono8":
        return rgb[:, :, 0]
    if encoding == "mono16":
        return rgb[:, :, 0].astype(np.uint16) * 257
    raise AssertionError(encoding)


def expected_rgb(rgb: np.ndarray, encoding: str) -> np.ndarray:
    if encoding not in ("mono8", "mono16"):
        return rgb
    grey = rgb[:, :, 0]
    if encoding == "mono16" and grey.max() > 0:  # scaled so the frame's peak becomes 255
        grey = np.rint(grey.astype(np.float64) * 255.0 / grey.max()).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


def raw_message(array: np.ndarray, encoding: str, padding: int = 0,
                big_endian: bool = False) -> Image:
    """An Image built by hand (rows padded by ``padding`` bytes, chosen byte order)."""
    height, width = array.shape[:2]
    if array.dtype.itemsize > 1:
        array = array.astype(array.dtype.newbyteorder(">" if big_endian else "<"))
    row = np.ascontiguousarray(array).reshape(height, -1).view(np.uint8)
    padded = np.zeros((height, row.shape[1] + padding), np.uint8)
    padded[:, : row.shape[1]] = row
    padded[:, row.shape[1]:] = 0xAB  # garbage that must not leak into the image
    msg = Image(height=height, width=width, encoding=encoding, is_bigendian=int(big_endian),
                step=padded.shape[1])
    msg.data = padded.tobytes()
    return msg


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("padding", [0, 2, 64])
def test_image_to_rgb_round_trip(encoding, size, padding):
    rgb = random_rgb(*size, seed=size[0] * 31 + padding)
    msg = raw_message(encode(rgb, encoding), encoding, padding)
    out = image_to_rgb(msg)
    assert out.shape == (size[0], size[1], 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, expected_rgb(rgb, encoding))
    assert not out.flags.writeable


@pytest.mark.parametrize("encoding", ["rgb8", "bgra8", "mono8"])
def test_odd_row_padding_of_8_bit_encodings(encoding):
    rgb = random_rgb(6, 5, seed=3)
    out = image_to_rgb(raw_message(encode(rgb, encoding), encoding, padding=3))
    np.testing.assert_array_equal(out, expected_rgb(rgb, encoding))


@pytest.mark.parametrize("big_endian", [False, True])
def test_mono16_respects_byte_order(big_endian):
    values = np.array([[0, 1000], [4000, 250]], np.uint16)
    out = image_to_rgb(raw_message(values, "mono16", big_endian=big_endian))
    np.testing.assert_array_equal(out[:, :, 0], [[0, 64], [255, 16]])


def test_mono16_all_zero_is_black():
    out = image_to_rgb(raw_message(np.zeros((4, 4), np.uint16), "mono16"))
    assert out.max() == 0


def test_rgb8_without_padding_is_a_zero_copy_view():
    rgb = random_rgb(48, 64)
    msg = rgb8_image(rgb)
    out = image_to_rgb(msg)
    assert np.shares_memory(out, np.frombuffer(msg.data, np.uint8))
    np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize("encoding,array", [
    ("rgb8", random_rgb(5, 7)),
    ("bgr8", random_rgb(5, 7)),
    ("rgba8", np.zeros((4, 6, 4), np.uint8)),
    ("mono8", np.arange(35, dtype=np.uint8).reshape(5, 7)),
    ("mono16", np.arange(35, dtype=np.uint16).reshape(5, 7) * 1000),
])
def test_array_to_image_round_trip(encoding, array):
    header = Header(frame_id="camera")
    header.stamp.sec, header.stamp.nanosec = 12, 345
    msg = array_to_image(array, encoding, header)
    assert (msg.encoding, msg.height, msg.width) == (encoding, array.shape[0], array.shape[1])
    assert msg.step * msg.height == len(msg.data)
    assert msg.is_bigendian == int(sys.byteorder == "big")
    assert msg.header.frame_id == "camera" and msg.header.stamp.sec == 12
    back = np.frombuffer(msg.data, array.dtype).reshape(array.shape)
    np.testing.assert_array_equal(back, array)


def test_mono8_image_from_bool_mask():
    mask = np.zeros((4, 5), bool)
    mask[1:3, 2:4] = True
    msg = mono8_image(mask)
    out = np.frombuffer(msg.data, np.uint8).reshape(4, 5)
    np.testing.assert_array_equal(out, mask.astype(np.uint8) * 255)


@pytest.mark.parametrize("encoding,array,match", [
    ("rgb8", np.zeros((4, 4), np.uint8), "3 channel"),
    ("mono8", np.zeros((4, 4), np.uint16), "dtype uint8"),
    ("yuv422", np.zeros((4, 4), np.uint8), "unsupported"),
])
def test_array_to_image_rejects_mismatches(encoding, array, match):
    with pytest.raises(ImageConversionError, match=match):
        array_to_image(array, encoding)


def _bad(**fields) -> Image:
    msg = Image(height=4, width=4, encoding="rgb8", step=12)
    msg.data = bytes(48)
    for name, value in fields.items():
        setattr(msg, name, value)
    return msg


@pytest.mark.parametrize("msg,match", [
    (_bad(encoding="yuv422"), "unsupported image encoding 'yuv422'"),
    (_bad(encoding="32FC1"), "unsupported"),
    (_bad(height=0, step=12, data=b""), "zero-size"),
    (_bad(width=0, step=0), "zero-size"),
    (_bad(data=bytes(47)), "47 bytes, expected step\\*height = 48"),
    (_bad(step=11), "step 11 is smaller"),
    (_bad(encoding="mono16", step=9, data=bytes(64)), "not a multiple"),
])
def test_bad_images_raise_with_a_reason(msg, match):
    with pytest.raises(ImageConversionError, match=match):
        image_to_rgb(msg)
    assert check_image_header(msg) is not None


def test_check_image_header_accepts_good_frames():
    assert check_image_header(rgb8_image(random_rgb(3, 3))) is None


def test_duck_typed_message_with_bytes_data():
    class Plain:
        height, width, encoding, is_bigendian, step = 2, 2, "bgr8", 0, 6
        data = bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])

    np.testing.assert_array_equal(image_to_rgb(Plain())[0, 0], [3, 2, 1])


@pytest.mark.parametrize("ext", [".png", ".jpg"])
@pytest.mark.parametrize("size", [(480, 640), (5, 9)])
def test_compressed_round_trip(ext, size):
    rgb = np.zeros(size + (3,), np.uint8)
    rgb[: size[0] // 2] = (200, 30, 40)
    rgb[size[0] // 2:] = (20, 60, 210)
    ok, encoded = cv2.imencode(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    msg = CompressedImage(format=ext[1:])
    msg.data = encoded.tobytes()
    out = compressed_to_rgb(msg)
    assert out.shape == rgb.shape
    error = np.abs(out.astype(int) - rgb.astype(int))
    if ext == ".png":
        assert error.max() == 0
    else:  # JPEG: lossy, chroma subsampled at the colour edge
        assert np.median(error) <= 3


@pytest.mark.parametrize("size", [(540, 960), (5, 9)])
def test_jpeg_image_round_trip_keeps_colours_header_and_the_image_transport_format(size):
    rgb = np.zeros(size + (3,), np.uint8)
    rgb[: size[0] // 2] = (200, 30, 40)  # red over blue: a swapped channel order would show
    rgb[size[0] // 2:] = (20, 60, 210)
    header = Header(frame_id="cam")
    header.stamp.sec = 7
    msg = jpeg_image(rgb, 90, header)
    assert isinstance(msg, CompressedImage) and msg.format == "rgb8; jpeg compressed bgr8"
    assert (msg.header.frame_id, msg.header.stamp.sec) == ("cam", 7)
    assert check_compressed_header(msg) is None
    out = compressed_to_rgb(msg)
    assert out.shape == rgb.shape
    assert np.median(np.abs(out.astype(int) - rgb.astype(int))) <= 3
    assert len(jpeg_image(rgb, 20).data) <= len(msg.data)
    with pytest.raises(ImageConversionError, match="JPEG needs an"):
        jpeg_image(np.zeros((4, 4), np.uint8), 80)


def test_compressed_grey_png_becomes_rgb():
    grey = np.arange(64, dtype=np.uint8).reshape(8, 8)
    msg = CompressedImage(format="png")
    msg.data = cv2.imencode(".png", grey)[1].tobytes()
    out = compressed_to_rgb(msg)
    np.testing.assert_array_equal(out[:, :, 1], grey)


@pytest.mark.parametrize("data,match", [(b"", "no data"),
                                        (b"not an image at all", "cannot decode")])
def test_undecodable_compressed_images_raise(data, match):
    msg = CompressedImage(format="jpeg")
    msg.data = data
    with pytest.raises(ImageConversionError, match=match):
        compressed_to_rgb(msg)


# --- attacks: frames larger than max_image_pixels are refused from their header ---------------

def compressed(data: bytes, fmt: str = "png", stamp=(12, 34), frame_id="cam") -> CompressedImage:
    msg = CompressedImage(format=fmt)
    msg.data = data
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
    msg.header.frame_id = frame_id
    return msg


def test_the_decompression_bomb_is_refused_before_decoding():
    """389 kB declaring 20000x20000: refused from the PNG header, by every entry point."""
    bomb = compressed(png_bomb(20_000, 20_000))
    reason = (f"compressed image declares 20000x20000 = 400000000 pixels, more than "
              f"max_image_pixels={DEFAULT_MAX_PIXELS} (not decoded)")
    with pytest.raises(ImageConversionError) as caught:
        compressed_to_rgb(bomb)
    assert str(caught.value) == reason
    assert check_compressed_header(bomb) == reason == frame_problem(bomb)
    with pytest.raises(FrameUnusable) as unusable:
        message_to_frame(bomb)
    assert unusable.value.reason == reason
    frame = unusable.value.frame  # the failed result still names the frame it refers to
    assert (frame.stamp_sec, frame.stamp_nanosec, frame.frame_id) == (12, 34, "cam")
    assert frame.image.size == 0


def test_the_cap_is_a_parameter_for_compressed_frames():
    ok, data = cv2.imencode(".jpg", np.zeros((30, 40, 3), np.uint8))
    msg = compressed(data.tobytes(), "jpeg")
    assert compressed_to_rgb(msg, max_pixels=1200).shape == (30, 40, 3)
    assert message_to_frame(msg, max_pixels=1200).width == 40
    assert "40x30 = 1200 pixels, more than max_image_pixels=1199" in frame_problem(msg, 1199)


def test_a_raw_frame_over_the_cap_is_refused_from_its_header_fields():
    """A raw frame declaring 20000x20000 is refused for its size, before its data is looked at."""
    msg = _bad(height=20_000, width=20_000, step=60_000, data=bytes(10))
    reason = "image is 20000x20000 = 400000000 pixels, more than max_image_pixels="
    with pytest.raises(ImageConversionError, match=reason):
        image_to_rgb(msg)
    assert reason in check_image_header(msg) and reason in frame_problem(msg)
    small = rgb8_image(random_rgb(4, 5))
    assert image_to_rgb(small, max_pixels=20).shape == (4, 5, 3)
    with pytest.raises(FrameUnusable, match="5x4 = 20 pixels, more than max_image_pixels=19"):
        message_to_frame(small, max_pixels=19)


@pytest.mark.parametrize("data,match", [
    (png_bomb(64, 64)[:20], "truncated PNG header"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "truncated JPEG header"),
    (b"GIF89a" + bytes(20), "neither PNG nor JPEG"),
])
def test_truncated_or_foreign_compressed_frames_are_refused_with_the_reason(data, match):
    msg = compressed(data)
    with pytest.raises(ImageConversionError, match=match) as caught:
        compressed_to_rgb(msg)
    assert str(caught.value).startswith("cannot decode compressed image (format 'png'")
    assert match in frame_problem(msg)


def test_frame_problem_accepts_good_frames_of_both_kinds():
    assert frame_problem(rgb8_image(random_rgb(3, 3))) is None
    assert frame_problem(compressed(cv2.imencode(".png", random_rgb(3, 3))[1].tobytes())) is None


# --- stamps, headers and frames ------------------------------------------------------------------
STAMPS = [(0, 0), (1, 999_999_999), (1_700_000_000, 123_456_789), (2**31 - 1, 999_999_999)]
FRAME_IDS = ["", "camera_color_optical_frame", "robot1/cam", "kamera_ü"]


@pytest.mark.parametrize("stamp", STAMPS)
@pytest.mark.parametrize("frame_id", FRAME_IDS)
def test_frame_header_frame_round_trip(stamp, frame_id):
    frame = Frame(random_rgb(3, 4), *stamp, frame_id)
    header = frame_header(frame)
    assert isinstance(header, Header)
    assert (header.stamp.sec, header.stamp.nanosec, header.frame_id) == (*stamp, frame_id)
    back = header_frame(header, frame.image)
    assert (back.stamp_sec, back.stamp_nanosec, back.frame_id) == (*stamp, frame_id)
    assert back.image is frame.image
    again = frame_header(header_frame(header))  # header -> pixel-less frame -> header
    assert again == header


def test_a_frame_from_a_header_alone_has_no_pixels_and_no_frame_an_empty_header():
    header = Header(frame_id="cam")
    header.stamp.sec, header.stamp.nanosec = 7, 8
    frame = header_frame(header)
    assert frame.image.shape == (0, 0, 3) and frame.image.dtype == np.uint8
    assert (frame.stamp_sec, frame.stamp_nanosec, frame.frame_id) == (7, 8, "cam")
    assert frame_header(None) == Header()


@pytest.mark.parametrize("stamp", STAMPS)
@pytest.mark.parametrize("kind", ["raw", "png"])
def test_frame_message_frame_round_trip(stamp, kind):
    """What the node publishes for a frame comes back as that frame: pixels and header."""
    frame = Frame(random_rgb(5, 7, seed=stamp[1] % 97), *stamp, "cam")
    if kind == "raw":
        msg = rgb8_image(frame.image, frame_header(frame))
    else:
        msg = CompressedImage(header=frame_header(frame), format="png")
        msg.data = cv2.imencode(".png", frame.image[:, :, ::-1])[1].tobytes()
    back = message_to_frame(msg)
    np.testing.assert_array_equal(back.image, frame.image)
    assert (back.stamp_sec, back.stamp_nanosec, back.frame_id) == (*stamp, "cam")


def test_stamps_in_nanoseconds_are_exact_and_ordered():
    assert stamp_ns(1, 999_999_999) + 1 == stamp_ns(2, 0)
    assert stamp_ns(2**31 - 1, 999_999_999) == (2**31 - 1) * 10**9 + 999_999_999  # no float
    nanoseconds = [stamp_ns(*stamp) for stamp in STAMPS]
    assert nanoseconds == sorted(nanoseconds)
    frame = Frame(np.zeros((1, 1, 3), np.uint8), 1_700_000_000, 123_456_789, "cam")
    assert frame_stamp_ns(frame) == 1_700_000_000_123_456_789
    assert frame_stamp_ns(header_frame(frame_header(frame))) == frame_stamp_ns(frame)


def test_the_frame_reader_converts_under_its_cap_and_says_what_it_refuses():
    header = Header(frame_id="cam")
    header.stamp.sec = 3
    msg = rgb8_image(random_rgb(4, 5), header)
    assert FrameReader().frame(msg).width == 5 and FrameReader().problem(msg) is None
    capped = FrameReader(max_pixels=19)
    assert "5x4 = 20 pixels, more than max_image_pixels=19" in capped.problem(msg)
    with pytest.raises(FrameUnusable) as unusable:
        capped.frame(msg)
    assert unusable.value.frame.stamp_sec == 3 and unusable.value.frame.image.size == 0
    # The image callback's check never raises, whatever arrives.
    assert capped.problem(object()).startswith("AttributeError: ")


def test_a_peers_encoding_or_format_is_clipped_and_escaped_in_the_reason():
    """Issue 25: a frame problem quotes the peer's encoding / format name, which is logged by the
    node (throttled) and echoed in results: one short line whatever the peer sent."""
    msg = Image(height=2, width=2, step=6, encoding="x\n[ERROR] [0.0] forged" + "y" * 100_000,
                data=bytes(12))
    with pytest.raises(ImageConversionError) as raised:
        image_to_rgb(msg)
    reason = str(raised.value)
    assert "\n" not in reason and len(reason) < 300
    compressed = CompressedImage(format="png\n" + "z" * 100_000, data=b"not an image")
    with pytest.raises(ImageConversionError) as raised:
        compressed_to_rgb(compressed)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 300


def test_one_camera_message_is_decoded_once_for_every_consumer(monkeypatch):
    from sam3_agent_ros.ros import conversions

    decoded = []
    real = conversions.message_to_frame

    def counting(msg, max_pixels):
        decoded.append(msg)
        return real(msg, max_pixels)

    monkeypatch.setattr(conversions, "message_to_frame", counting)
    reader = FrameReader()
    first, second = rgb8_image(random_rgb(4, 5), Header()), rgb8_image(random_rgb(4, 5), Header())
    frame = reader.frame(first)
    assert reader.frame(first) is frame and decoded == [first]  # the query worker, then follow
    assert reader.frame(second) is not frame and decoded == [first, second]  # the newest only
    capped = FrameReader(max_pixels=19)
    for _ in range(2):  # an unusable frame is refused every time, from one conversion
        with pytest.raises(FrameUnusable, match="max_image_pixels=19"):
            capped.frame(first)
    assert decoded == [first, second, first]
