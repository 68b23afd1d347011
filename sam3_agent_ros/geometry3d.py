"""Pure 3D geometry: a mask + a registered depth image + the colour intrinsics -> one 3D point.

ROS-free (numpy + OpenCV). The depth image must be registered (aligned) to the colour camera, so
that depth pixel (u, v) measures the same ray as colour pixel (u, v); the returned point is in the
colour camera's optical frame (x right, y down, z forward), in metres.

Conventions: pixel centres are at integer coordinates (OpenCV / ROS CameraInfo), so a pixel (u, v)
at depth z back-projects to ``((u - cx) * z / fx, (v - cy) * z / fy, z)``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from sam3_agent_ros.masks import PixelBox, pixel_box

STATISTICS = ("median", "trimmed_mean", "min_cluster")
MM_ENCODINGS = ("16UC1", "mono16")  # unsigned 16-bit millimetres (mono16: older OpenNI drivers)
METRE_ENCODINGS = ("32FC1",)
SUPPORTED_ENCODINGS = MM_ENCODINGS + METRE_ENCODINGS

# Scale from the median absolute deviation to the standard deviation of a normal distribution.
MAD_TO_SIGMA = 1.4826
# trimmed_mean drops this fraction of the depths at each end.
TRIM_FRACTION = 0.1
# min_cluster: sorted depths further apart than max(MIN_GAP_M, GAP_FRACTION * z) start a new
# cluster; the nearest cluster holding at least CLUSTER_MIN_SHARE of the valid pixels is the object.
MIN_GAP_M = 0.02
GAP_FRACTION = 0.03
CLUSTER_MIN_SHARE = 0.1
# Pixels within this band of the chosen depth give the centroid (u, v): the object's own surface,
# not background the mask bled onto.
INLIER_MIN_BAND_M = 0.005
INLIER_BAND_FRACTION = 0.005
INLIER_BAND_SIGMAS = 3.0
# Larger masks feed an evenly strided subset of their depths to the statistic: the result is the
# same to well under a millimetre, and selection among many equal depths (flat, quantised) stays
# fast.
MAX_STATISTIC_SAMPLES = 16384


@dataclass(frozen=True)
class Intrinsics:
    fx: float
    fy: float
    cx: float
    cy: float


@dataclass(frozen=True)
class Located:
    """The outcome of ``locate_mask``: a position in metres, or None with the reason in ``error``.

    ``spread_m`` is a robust spread of the depths used (1.4826 * MAD), a rough position error.
    """

    position: tuple[float, float, float] | None
    error: str | None
    valid_pixels: int = 0
    spread_m: float | None = None


def as_intrinsics(k: Intrinsics | Sequence[float] | np.ndarray) -> Intrinsics:
    """``(fx, fy, cx, cy)``, a 3x3 matrix or its 9 row-major values (CameraInfo.k) -> Intrinsics.

    Raises ValueError for anything else or for a non-positive / non-finite focal length.
    """
    if isinstance(k, Intrinsics):
        result = k
    else:
        values = np.asarray(k, dtype=np.float64).reshape(-1)
        if values.size == 4:
            result = Intrinsics(*(float(v) for v in values))
        elif values.size == 9:
            result = Intrinsics(float(values[0]), float(values[4]), float(values[2]),
                                float(values[5]))
        else:
            raise ValueError(
                f"intrinsics must be (fx, fy, cx, cy) or a 3x3 matrix, got {values.size} values")
    for name in ("fx", "fy", "cx", "cy"):
        if not math.isfinite(getattr(result, name)):
            raise ValueError(f"intrinsics: {name} is not finite")
    if result.fx <= 0 or result.fy <= 0:
        raise ValueError(
            f"intrinsics: focal lengths must be positive (fx={result.fx}, fy={result.fy}); "
            "is the camera calibrated (CameraInfo.k all zeros)?")
    return result


def scale_intrinsics(k: Intrinsics | Sequence[float] | np.ndarray, from_size: tuple[int, int],
                     to_size: tuple[int, int]) -> Intrinsics:
    """Intrinsics of an image of ``from_size`` (width, height) resized to ``to_size``."""
    intr = as_intrinsics(k)
    (w0, h0), (w1, h1) = from_size, to_size
    if min(w0, h0, w1, h1) <= 0:
        raise ValueError(f"image sizes must be positive, got {from_size} -> {to_size}")
    sx, sy = w1 / w0, h1 / h0
    # Pixel centres at integer coordinates: the image edge is at -0.5 in both images.
    return Intrinsics(intr.fx * sx, intr.fy * sy, (intr.cx + 0.5) * sx - 0.5,
                      (intr.cy + 0.5) * sy - 0.5)


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


def locate_mask(mask: np.ndarray, depth_m: np.ndarray,
                k: Intrinsics | Sequence[float] | np.ndarray, erode_px: int = 3,
                min_m: float = 0.1, max_m: float = 10.0, min_valid_pixels: int = 20,
                statistic: str = "median") -> Located:
    """The 3D point of one mask from registered depth in metres.

    The mask is eroded (depth is wrong at object edges; an erosion that leaves too few valid depth
    pixels falls back to the whole mask), invalid depths (NaN, 0, outside [min_m, max_m]) are
    dropped, ``statistic`` picks the depth z, and the centroid (u, v) of the pixels within a band
    around z is back-projected with the intrinsics ``k`` of the mask's image. Depth of another
    resolution is scaled to the mask's (nearest). Invalid arguments raise ValueError; a mask
    without enough valid depth gives ``Located(None, reason)``.
    """
    if statistic not in STATISTICS:
        raise ValueError(
            f"unknown depth statistic {statistic!r}; use one of {', '.join(STATISTICS)}")
    if mask.ndim != 2 or depth_m.ndim != 2:
        raise ValueError(f"mask and depth must be 2D, got {mask.shape} and {depth_m.shape}")
    intr = as_intrinsics(k)
    height, width = mask.shape
    depth_m = resize_depth_to(depth_m, height, width)

    box = pixel_box(mask)
    if box is None:
        return Located(None, "empty mask")
    x0, y0, x1, y1 = _grow(box, erode_px + 1, height, width)
    crop = np.ascontiguousarray(mask[y0:y1, x0:x1], dtype=bool)
    depth_crop = depth_m[y0:y1, x0:x1]
    # NaN fails both comparisons; the explicit > 0 matters when min_m is 0.
    valid = (depth_crop >= min_m) & (depth_crop <= max_m) & (depth_crop > 0)

    candidates = [crop]
    if erode_px > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * erode_px + 1,) * 2)
        candidates.insert(0, cv2.erode(crop.view(np.uint8), kernel).view(bool))
    for candidate in candidates:
        used = candidate & valid
        count = cv2.countNonZero(used.view(np.uint8))
        if count >= min_valid_pixels:
            break
    if count < min_valid_pixels:
        if count == 0:
            reason = (f"no valid depth in the mask ({cv2.countNonZero(crop.view(np.uint8))} "
                      f"pixels; all holes or outside [{min_m:g}, {max_m:g}] m)")
        else:
            reason = f"too few valid depth pixels ({count} < {min_valid_pixels})"
        return Located(None, reason, valid_pixels=count)

    samples = depth_crop[used]
    if samples.size > MAX_STATISTIC_SAMPLES:
        samples = samples[::-(-samples.size // MAX_STATISTIC_SAMPLES)]
    z, spread = _robust_depth(samples, statistic, min_valid_pixels)
    band = max(INLIER_MIN_BAND_M + INLIER_BAND_FRACTION * z, INLIER_BAND_SIGMAS * spread)
    # The centroid comes from the whole (un-eroded) mask: erosion is for the depth statistic, and
    # eroding a mask that includes a visible side wall would shift the centre of the top face.
    inliers = crop & valid & (np.abs(depth_crop - np.float32(z)) <= band)
    moments = cv2.moments(inliers.view(np.uint8), binaryImage=True)
    if moments["m00"] == 0:
        moments = cv2.moments(used.view(np.uint8), binaryImage=True)
    u = moments["m10"] / moments["m00"] + x0
    v = moments["m01"] / moments["m00"] + y0
    position = ((u - intr.cx) * z / intr.fx, (v - intr.cy) * z / intr.fy, z)
    return Located(position, None, valid_pixels=count, spread_m=spread)


def _robust_depth(zs: np.ndarray, statistic: str, min_valid_pixels: int) -> tuple[float, float]:
    """(depth, MAD-based spread) of the valid depths by the chosen statistic."""
    if statistic == "trimmed_mean":
        ordered = np.sort(zs)
        cut = int(len(ordered) * TRIM_FRACTION)
        kept = ordered[cut:len(ordered) - cut] if len(ordered) > 2 * cut else ordered
        z = float(kept.mean(dtype=np.float64))
    elif statistic == "min_cluster":
        zs = _nearest_cluster(zs, min_valid_pixels)
        z = _median(zs)
    else:
        z = _median(zs)
    spread = MAD_TO_SIGMA * _median(np.abs(zs - np.float32(z)))
    return z, spread


def _median(values: np.ndarray) -> float:
    """np.median, several times faster on large arrays (one partition instead of a sort)."""
    half = len(values) // 2
    ordered = np.partition(values, half)
    upper = float(ordered[half])
    return upper if len(values) % 2 else (upper + float(ordered[:half].max())) / 2


def _nearest_cluster(zs: np.ndarray, min_valid_pixels: int) -> np.ndarray:
    """Depths of the nearest cluster big enough to be the object (not a few flying pixels)."""
    ordered = np.sort(zs)
    gaps = np.diff(ordered)
    tolerance = np.maximum(MIN_GAP_M, GAP_FRACTION * ordered[:-1])
    starts = np.concatenate(([0], np.nonzero(gaps > tolerance)[0] + 1, [len(ordered)]))
    needed = max(min_valid_pixels, int(CLUSTER_MIN_SHARE * len(ordered)))
    for begin, end in itertools.pairwise(starts):
        if end - begin >= needed:
            return ordered[begin:end]
    return ordered  # no cluster is big enough on its own: all depths


def _grow(box: PixelBox, margin: int, height: int, width: int) -> PixelBox:
    x0, y0, x1, y1 = box
    return (max(0, x0 - margin), max(0, y0 - margin), min(width, x1 + margin),
            min(height, y1 + margin))
