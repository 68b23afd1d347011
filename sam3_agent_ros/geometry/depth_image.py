"""Depth images -> float32 metres at the colour image's resolution (ROS-free).

A sensor_msgs/Image depth message's bytes (``depth_from_buffer``) or an array in its ROS encoding
(``depth_to_metres``: 16UC1 / mono16 millimetres, 32FC1 metres) become metres; registered depth of
another resolution is resized to the colour image by nearest neighbour (``depth_for_colour``),
its intrinsics scaled to match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics, scale_intrinsics

MM_ENCODINGS = ("16UC1", "mono16")  # unsigned 16-bit millimetres (mono16: older OpenNI drivers)
METRE_ENCODINGS = ("32FC1",)
SUPPORTED_ENCODINGS = MM_ENCODINGS + METRE_ENCODINGS
# Colour and depth images whose aspect ratios differ by more than this are not aligned.
ASPECT_TOLERANCE = 0.02


def depth_to_metres(depth: np.ndarray, encoding: str) -> np.ndarray:
    """A depth image in its ROS encoding -> float32 metres (0 / NaN stay invalid).

    16UC1 (and mono16) are millimetres, 32FC1 is metres. Other encodings raise ValueError.
    """
    if encoding in MM_ENCODINGS:
        return depth.astype(np.float32) * np.float32(0.001)
    if encoding in METRE_ENCODINGS:
        return depth.astype(np.float32, copy=False)
    raise ValueError(
        f"unsupported depth encoding {encoding!r}: expected 16UC1 (millimetres) or 32FC1 (metres)")


def depth_from_buffer(data, width: int, height: int, step: int, encoding: str,
                      is_bigendian: bool = False) -> np.ndarray:
    """The raw bytes of a sensor_msgs/Image depth message -> float32 metres (H, W).

    Zero-copy until the unit conversion. Raises ValueError with a clear message for an unsupported
    encoding, a bad size/step or short data.
    """
    dtype: np.dtype[Any]
    if encoding in MM_ENCODINGS:
        dtype = np.dtype(np.uint16)
    elif encoding in METRE_ENCODINGS:
        dtype = np.dtype(np.float32)
    else:
        depth_to_metres(np.zeros((0, 0), np.float32), encoding)  # raises the standard message
        raise AssertionError("unreachable")
    if width <= 0 or height <= 0:
        raise ValueError(f"depth image has no pixels ({width}x{height})")
    row_bytes = width * dtype.itemsize
    if step < row_bytes:
        raise ValueError(f"depth image step {step} is smaller than width * {dtype.itemsize} = "
                         f"{row_bytes} for {encoding}")
    buffer = np.frombuffer(data, dtype=np.uint8)
    needed = step * (height - 1) + row_bytes
    if buffer.size < needed:
        raise ValueError(f"depth image data is too short: {buffer.size} bytes, {width}x{height} "
                         f"{encoding} with step {step} needs {needed}")
    rows = np.lib.stride_tricks.as_strided(buffer, shape=(height, row_bytes),
                                           strides=(step, 1), writeable=False)
    typed = dtype.newbyteorder(">" if is_bigendian else "<")
    try:
        depth = rows.view(typed)
    except ValueError:  # numpy < 1.23 (Humble's apt numpy) views padded rows only after a copy
        depth = np.ascontiguousarray(rows).view(typed)
    return depth_to_metres(depth, encoding)


def resize_depth_to(depth_m: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize depth to (height, width) by nearest neighbour: never invents depths between edges."""
    if depth_m.shape[:2] == (height, width):
        return depth_m
    return cv2.resize(depth_m, (width, height), interpolation=cv2.INTER_NEAREST_EXACT)


def depth_for_colour(depth_m: np.ndarray, colour_size: tuple[int, int],
                     k: Intrinsics | Sequence[float] | np.ndarray,
                     k_size: tuple[int, int] | None = None) -> tuple[np.ndarray, Intrinsics]:
    """Registered depth (metres) and the colour intrinsics ``k`` of an image of ``k_size``
    (width, height; None: the colour image's) -> depth at the colour resolution (nearest) and the
    intrinsics of the colour image. ValueError when the aspect ratios differ (depth that is not
    aligned to the colour camera) or ``k`` is unusable."""
    width, height = colour_size
    depth_height, depth_width = depth_m.shape[:2]
    if min(width, height, depth_width, depth_height) <= 0:
        raise ValueError(f"image sizes must be positive, got colour {width}x{height}, depth "
                         f"{depth_width}x{depth_height}")
    if abs((depth_width / depth_height) / (width / height) - 1.0) > ASPECT_TOLERANCE:
        raise ValueError(f"depth image {depth_width}x{depth_height} does not have the colour "
                         f"image's aspect ratio ({width}x{height}): is it aligned to the colour "
                         "camera?")
    intrinsics = as_intrinsics(k)
    if k_size is not None and tuple(k_size) != (width, height) and min(k_size) > 0:
        intrinsics = scale_intrinsics(intrinsics, (k_size[0], k_size[1]), (width, height))
    return resize_depth_to(depth_m, height, width), intrinsics
