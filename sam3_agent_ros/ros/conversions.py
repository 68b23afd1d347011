"""Messages <-> the core's values: Image / CompressedImage <-> numpy and ``Frame``, headers and
stamps, without cv_bridge.

ROS 2's cv_bridge is not pip-installable, so the node converts images itself. Readers take any
object with the message's fields (duck-typed: real messages, rosbags messages, test doubles) and
return an RGB ``(H, W, 3) uint8`` array, raising ``ImageConversionError`` with a reason for
anything malformed or larger than ``max_pixels`` (the node's ``max_image_pixels``: raw frames are
refused from their header fields, compressed ones from their PNG/JPEG header, before any
conversion or decoding; see ``image_header.py``). Writers build ``sensor_msgs/Image`` through the
fast path (``msg.data = array.tobytes()``): assigning a numpy array to ``msg.data`` is converted
element by element by rclpy and costs about a second per 1080p frame. ``jpeg_image`` builds a
``sensor_msgs/CompressedImage`` (JPEG) the same way.

A frame message becomes a ``Frame`` (pixels + its header's stamp and frame_id) through
``FrameReader``, the node's one converter (query worker, follow thread, image callback); an answer's
``Frame`` gives its messages their header back (``frame_header``). Nothing here imports rclpy or
message packages at import time (the ROS-free runners import this module).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from sam3_agent_ros.core.types import Frame, FrameUnusable, stamp_ns
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.image_header import (
    DEFAULT_MAX_PIXELS,
    ImageHeaderError,
    encoded_size,
    pixel_cap_problem,
)

# encoding -> (channels, dtype, to-RGB channel order or None for grey)
_ENCODINGS: dict[str, tuple[int, str, tuple[int, ...] | None]] = {
    "rgb8": (3, "u1", (0, 1, 2)),
    "bgr8": (3, "u1", (2, 1, 0)),
    "rgba8": (4, "u1", (0, 1, 2)),
    "bgra8": (4, "u1", (2, 1, 0)),
    "mono8": (1, "u1", None),
    "mono16": (1, "u2", None),
}
SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(_ENCODINGS)
QUOTED_CHARS = 40  # the most of a peer's encoding / format name a frame problem repeats


class ImageConversionError(ValueError):
    """A frame that cannot be turned into an RGB image; the message says why."""


# --- stamps and headers ----------------------------------------------------------------------


def frame_stamp_ns(frame: Frame) -> int:
    """The stamp of the message a frame came from, in nanoseconds."""
    return stamp_ns(frame.stamp_sec, frame.stamp_nanosec)


def header_frame(header: Any, image: np.ndarray | None = None) -> Frame:
    """A ``Frame`` with ``header``'s stamp and frame_id; without ``image``, one with no pixels
    (results about frames that could not be converted still name their frame)."""
    pixels = np.zeros((0, 0, 3), np.uint8) if image is None else image
    return Frame(pixels, int(header.stamp.sec), int(header.stamp.nanosec), str(header.frame_id))


def frame_header(frame: Frame | None) -> Any:
    """The ``std_msgs/Header`` (stamp, frame_id) of the frame an answer was computed on; an
    empty header for no frame."""
    from std_msgs.msg import Header

    header = Header(frame_id=frame.frame_id if frame is not None else "")
    if frame is not None:
        header.stamp.sec, header.stamp.nanosec = frame.stamp_sec, frame.stamp_nanosec
    return header


@dataclass(frozen=True)
class _Layout:
    encoding: str
    height: int
    width: int
    step: int
    channels: int
    dtype: np.dtype
    order: tuple[int, ...] | None


def _quoted(text: Any) -> str:
    """A peer's encoding or format name quoted for a reason: clipped and escaped, so a frame
    problem logged or echoed stays one short line whatever the peer sent."""
    return repr(for_log(text, QUOTED_CHARS))


def _layout(msg: Any, max_pixels: int) -> _Layout:
    """The validated memory layout of an Image message, or ``ImageConversionError``."""
    encoding = str(msg.encoding).strip().lower()
    if encoding not in _ENCODINGS:
        raise ImageConversionError(
            f"unsupported image encoding {_quoted(msg.encoding)} (supported: "
            f"{', '.join(SUPPORTED_ENCODINGS)})")
    channels, kind, order = _ENCODINGS[encoding]
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height <= 0 or width <= 0:
        raise ImageConversionError(f"zero-size image ({width}x{height})")
    too_large = pixel_cap_problem(width, height, max_pixels)
    if too_large:
        raise ImageConversionError(f"image is {too_large}")
    dtype = np.dtype(kind)
    if dtype.itemsize > 1:
        dtype = dtype.newbyteorder(">" if msg.is_bigendian else "<")
    row_bytes = width * channels * dtype.itemsize
    if step < row_bytes:
        raise ImageConversionError(
            f"step {step} is smaller than width*channels*bytes = {row_bytes} ({encoding})")
    if step % dtype.itemsize:
        raise ImageConversionError(
            f"step {step} is not a multiple of {dtype.itemsize} ({encoding})")
    data = msg.data
    size = data.nbytes if isinstance(data, np.ndarray) else len(data)
    if size < step * height:
        raise ImageConversionError(
            f"image data has {size} bytes, expected step*height = {step * height} "
            f"({width}x{height} {encoding}, step {step})")
    return _Layout(encoding, height, width, step, channels, dtype, order)


def check_image_header(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> str | None:
    """Why ``msg`` cannot be converted (header fields and data length only, O(1)), or None."""
    try:
        _layout(msg, max_pixels)
    except ImageConversionError as exc:
        return str(exc)
    return None


def check_compressed_header(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> str | None:
    """Why a ``CompressedImage`` cannot be decoded, from its PNG/JPEG header alone, or None."""
    try:
        _check_compressed(msg, max_pixels)
    except ImageConversionError as exc:
        return str(exc)
    return None


def is_compressed(msg: Any) -> bool:
    """A ``CompressedImage`` (``format``, no ``encoding``) rather than an ``Image``."""
    return not hasattr(msg, "encoding") and hasattr(msg, "format")


def frame_problem(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> str | None:
    """Why an Image or CompressedImage cannot become a frame, from its header alone, or None
    (cheap enough for an image callback)."""
    if is_compressed(msg):
        return check_compressed_header(msg, max_pixels)
    return check_image_header(msg, max_pixels)


def message_to_frame(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> Frame:
    """An Image or CompressedImage as a ``Frame`` with its header; ``FrameUnusable`` (carrying
    a header-only frame) when it is malformed or larger than ``max_pixels``."""
    try:
        rgb = compressed_to_rgb(msg, max_pixels) if is_compressed(msg) \
            else image_to_rgb(msg, max_pixels)
    except ImageConversionError as exc:
        raise FrameUnusable(str(exc), header_frame(msg.header)) from None
    return header_frame(msg.header, rgb)


class FrameReader:
    """The node's frame converter under its ``max_image_pixels`` (fixed per configuration).

    One camera message is decoded once for every consumer (the query worker, follow mode, the
    standing concepts): the newest message's outcome (its ``Frame``, or why it is unusable) is
    kept, keyed by the message object, and handed to whoever asks for the same message. Frames
    are immutable and their pixels read-only, so sharing one is safe."""

    def __init__(self, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.max_pixels = max_pixels
        self._lock = threading.Lock()  # held while decoding: a second asker waits, then shares
        self._newest: tuple[Any, Frame | FrameUnusable] | None = None

    def frame(self, msg: Any) -> Frame:
        """``message_to_frame`` (query worker, follow thread, concepts thread), once per
        message: ``FrameUnusable`` for a malformed frame or one over the cap (refused before
        decoding)."""
        with self._lock:
            newest = self._newest
            if newest is not None and newest[0] is msg:
                outcome = newest[1]
            else:
                try:
                    outcome = message_to_frame(msg, self.max_pixels)
                except FrameUnusable as exc:
                    outcome = exc
                self._newest = (msg, outcome)  # bounded: the newest message only
        if isinstance(outcome, FrameUnusable):
            raise FrameUnusable(outcome.reason, outcome.frame)
        return outcome

    def problem(self, msg: Any) -> str | None:
        """Why ``msg`` cannot become a frame, from its header alone, or None; never raises (the
        image callback calls it: a callback that raises would stop the executor)."""
        try:
            return frame_problem(msg, self.max_pixels)
        except Exception as exc:  # noqa: BLE001 (e.g. a message without the expected fields)
            return f"{type(exc).__name__}: {exc}"


def image_to_rgb(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """A ``sensor_msgs/Image`` as a read-only RGB ``(H, W, 3) uint8`` array.

    rgb8 with ``step == width * 3`` is a zero-copy view of ``msg.data`` (keep ``msg`` alive while
    the array is used; it is marked read-only). Other encodings, padded rows and big-endian mono16
    are converted into a new array. mono16 is scaled so the frame's largest value becomes 255.
    """
    layout = _layout(msg, max_pixels)
    height, width, channels, order = layout.height, layout.width, layout.channels, layout.order
    needed = layout.step * height
    buffer = np.frombuffer(msg.data, dtype=np.uint8, count=needed)
    pixels = _rows(buffer, height, width * channels, layout.step, layout.dtype)
    if order is None:
        grey = pixels.reshape(height, width)
        if layout.dtype.itemsize > 1:
            grey = _scale_to_u8(grey)
        rgb = np.repeat(grey[:, :, None], 3, axis=2)
    else:
        image = pixels.reshape(height, width, channels)
        if order == (0, 1, 2) and channels == 3 and image.flags.c_contiguous:
            rgb = image  # zero-copy view of msg.data
        else:
            rgb = np.ascontiguousarray(image[:, :, list(order)])
    rgb.flags.writeable = False
    return rgb


def _rows(buffer: np.ndarray, height: int, values_per_row: int, step: int,
          dtype: np.dtype) -> np.ndarray:
    """``(height, values_per_row)`` values of ``dtype`` from rows ``step`` bytes apart."""
    row_bytes = values_per_row * dtype.itemsize
    if step == row_bytes:
        return buffer[: height * row_bytes].view(dtype).reshape(height, values_per_row)
    padded = np.lib.stride_tricks.as_strided(
        buffer, shape=(height, row_bytes), strides=(step, 1), writeable=False)
    return np.ascontiguousarray(padded).view(dtype)


def _scale_to_u8(values: np.ndarray) -> np.ndarray:
    peak = int(values.max())
    if peak == 0:
        return np.zeros(values.shape, np.uint8)
    scaled = values.astype(np.float32) * (255.0 / peak)
    return np.rint(scaled).astype(np.uint8)


def _check_compressed(msg: Any, max_pixels: int) -> None:
    data = msg.data
    if len(data) == 0:
        raise ImageConversionError("compressed image has no data")
    try:
        _, width, height = encoded_size(data)
    except ImageHeaderError as exc:
        raise ImageConversionError(f"cannot decode compressed image (format {_quoted(msg.format)}, "
                                   f"{len(data)} bytes): {exc}") from None
    too_large = pixel_cap_problem(width, height, max_pixels)
    if too_large:
        raise ImageConversionError(f"compressed image declares {too_large} (not decoded)")


def compressed_to_rgb(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """A ``sensor_msgs/CompressedImage`` (JPEG or PNG) as an RGB ``(H, W, 3) uint8`` array;
    its size is checked from its header before it is decoded."""
    _check_compressed(msg, max_pixels)
    data = msg.data
    encoded = np.frombuffer(data, dtype=np.uint8)
    decoded = cv2.imdecode(encoded, cv2.IMREAD_COLOR)
    if decoded is None or decoded.size == 0:
        raise ImageConversionError(
            f"cannot decode compressed image (format {_quoted(msg.format)}, {len(data)} bytes)")
    if decoded.dtype != np.uint8:  # 16-bit PNG
        decoded = _scale_to_u8(decoded)
    rgb = cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB)
    rgb.flags.writeable = False
    return rgb


def array_to_image(array: np.ndarray, encoding: str, header: Any = None) -> Any:
    """A ``sensor_msgs/Image`` holding ``array`` (already in ``encoding``'s channel layout).

    ``array`` is ``(H, W)`` for mono encodings or ``(H, W, C)``; its dtype must match the encoding
    (uint8, or uint16 for mono16). The data is copied once with ``tobytes()``.
    """
    from sensor_msgs.msg import Image

    if encoding not in _ENCODINGS:
        raise ImageConversionError(f"unsupported image encoding {_quoted(encoding)}")
    channels, kind, _ = _ENCODINGS[encoding]
    array = np.asarray(array)
    if array.dtype != np.dtype(kind):
        raise ImageConversionError(
            f"{encoding} needs dtype {np.dtype(kind).name}, got {array.dtype.name}")
    shape_ok = array.ndim == 2 and channels == 1 or array.ndim == 3 and array.shape[2] == channels
    if not shape_ok:
        raise ImageConversionError(f"{encoding} needs {channels} channel(s), got shape "
                                   f"{array.shape}")
    msg = Image()
    if header is not None:
        msg.header = header
    msg.height, msg.width = int(array.shape[0]), int(array.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = int(sys.byteorder == "big")
    msg.step = msg.width * channels * array.dtype.itemsize
    msg.data = np.ascontiguousarray(array).tobytes()
    return msg


def mono8_image(array: np.ndarray, header: Any = None) -> Any:
    """A mono8 ``sensor_msgs/Image`` from an ``(H, W)`` uint8 (or bool: 255 where True) array."""
    array = np.asarray(array)
    if array.dtype == bool:
        array = array.astype(np.uint8) * 255
    return array_to_image(array, "mono8", header)


def rgb8_image(array: np.ndarray, header: Any = None) -> Any:
    """An rgb8 ``sensor_msgs/Image`` from an ``(H, W, 3)`` uint8 RGB array."""
    return array_to_image(array, "rgb8", header)


JPEG_FORMAT = "rgb8; jpeg compressed bgr8"  # what image_transport's compressed publisher writes


def jpeg_image(array: np.ndarray, quality: int, header: Any = None) -> Any:
    """A ``sensor_msgs/CompressedImage`` holding an ``(H, W, 3)`` uint8 RGB array as JPEG
    (``quality`` 1-100). ``format`` is image_transport's own, so RViz, rqt_image_view and
    ``republish`` decode it; ``compressed_to_rgb`` reads it back."""
    from sensor_msgs.msg import CompressedImage

    array = np.asarray(array)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] != 3:
        raise ImageConversionError(f"JPEG needs an (H, W, 3) uint8 RGB array, got "
                                   f"{array.dtype.name} {array.shape}")
    ok, encoded = cv2.imencode(".jpg", cv2.cvtColor(array, cv2.COLOR_RGB2BGR),
                               [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ImageConversionError(f"JPEG encoding failed ({array.shape[1]}x{array.shape[0]})")
    msg = CompressedImage(format=JPEG_FORMAT)
    if header is not None:
        msg.header = header
    msg.data = encoded.tobytes()
    return msg
