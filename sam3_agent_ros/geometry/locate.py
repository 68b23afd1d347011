"""A mask's depth, sampled robustly, and its 3D point (``locate_mask``; ROS-free).

``sample_mask_depth`` is the step ``locate_mask`` and ``box.fit_box`` share: the argument
checks, the mask's pixels with valid depth (``mask_pixels``: its crop, eroded when enough
remain; the target's points are taken from them too) and the depth statistic.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics, ideal_pixels
from sam3_agent_ros.geometry.depth_image import resize_depth_to
from sam3_agent_ros.masks import PixelBox, pixel_box

STATISTICS = ("median", "trimmed_mean", "min_cluster")

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
class Located:
    """The outcome of ``locate_mask``: a position in metres, or None with the reason in ``error``.

    ``spread_m`` is a robust spread of the depths used (1.4826 * MAD), a rough position error.
    """

    position: tuple[float, float, float] | None
    error: str | None
    valid_pixels: int = 0
    spread_m: float | None = None


@dataclass(frozen=True)
class MaskPixels:
    """A mask's pixels with valid depth: its crop (with a margin) at ``x0``, ``y0`` in the
    image, the depth there, and the pixels used (eroded when enough remain). The 3D step
    measures them; the target's points (``target_points``) are taken from the same pixels."""

    x0: int
    y0: int
    crop: np.ndarray  # bool, the whole (un-eroded) mask in the crop
    depth: np.ndarray  # metres, the crop of the depth image
    valid: np.ndarray  # bool, depth within [min_m, max_m]
    used: np.ndarray  # bool, the pixels the statistic used
    count: int  # pixels in used


@dataclass(frozen=True)
class MaskDepth(MaskPixels):
    """What ``locate_mask`` and ``fit_box`` share: the mask's pixels and the depth statistic's
    result over them."""

    z: float  # the statistic's depth
    spread: float  # 1.4826 * MAD of the used depths


def mask_pixels(mask: np.ndarray, depth_m: np.ndarray, erode_px: int, min_m: float,
                max_m: float, min_valid_pixels: int) -> tuple[MaskPixels | None, str | None, int]:
    """(the mask's pixels, None, count) or (None, the reason, count): the crop, the valid
    depths (NaN, 0 and outside ``[min_m, max_m]`` dropped) and the erosion by ``erode_px``,
    which falls back to the whole mask when it leaves fewer than ``min_valid_pixels``."""
    if mask.ndim != 2 or depth_m.ndim != 2:
        raise ValueError(f"mask and depth must be 2D, got {mask.shape} and {depth_m.shape}")
    height, width = mask.shape
    depth_m = resize_depth_to(depth_m, height, width)

    box = pixel_box(mask)
    if box is None:
        return None, "empty mask", 0
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
        return None, reason, count
    return MaskPixels(x0, y0, crop, depth_crop, valid, used, count), None, count


def sample_mask_depth(mask: np.ndarray, depth_m: np.ndarray, erode_px: int, min_m: float,
                      max_m: float, min_valid_pixels: int, statistic: str
                      ) -> tuple[MaskDepth | None, str | None, int]:
    """(the mask's depths, None, count) or (None, the reason, count): ``mask_pixels`` and the
    depth statistic of ``locate_mask`` (see there)."""
    if statistic not in STATISTICS:
        raise ValueError(
            f"unknown depth statistic {statistic!r}; use one of {', '.join(STATISTICS)}")
    pixels, reason, count = mask_pixels(mask, depth_m, erode_px, min_m, max_m,
                                        min_valid_pixels)
    if pixels is None:
        return None, reason, count
    samples = pixels.depth[pixels.used]
    if samples.size > MAX_STATISTIC_SAMPLES:
        samples = samples[::-(-samples.size // MAX_STATISTIC_SAMPLES)]
    z, spread = _robust_depth(samples, statistic, min_valid_pixels)
    return MaskDepth(pixels.x0, pixels.y0, pixels.crop, pixels.depth, pixels.valid,
                     pixels.used, pixels.count, z, spread), None, count


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
    intr = as_intrinsics(k)
    sampled, reason, count = sample_mask_depth(mask, depth_m, erode_px, min_m, max_m,
                                               min_valid_pixels, statistic)
    if sampled is None:
        return Located(None, reason, valid_pixels=count)
    return locate_sampled(sampled, intr)


def locate_sampled(sampled: MaskDepth, intr: Intrinsics) -> Located:
    z, spread = sampled.z, sampled.spread
    band = max(INLIER_MIN_BAND_M + INLIER_BAND_FRACTION * z, INLIER_BAND_SIGMAS * spread)
    # The centroid comes from the whole (un-eroded) mask: erosion is for the depth statistic, and
    # eroding a mask that includes a visible side wall would shift the centre of the top face.
    inliers = sampled.crop & sampled.valid & (np.abs(sampled.depth - np.float32(z)) <= band)
    moments = cv2.moments(inliers.view(np.uint8), binaryImage=True)
    if moments["m00"] == 0:
        inliers = sampled.used
        moments = cv2.moments(inliers.view(np.uint8), binaryImage=True)
    if intr.lens is None:
        u = moments["m10"] / moments["m00"] + sampled.x0
        v = moments["m01"] / moments["m00"] + sampled.y0
    else:  # a raw stream: the centroid of the pixels' undistorted places
        rows, cols = np.nonzero(inliers)
        ideal_u, ideal_v = ideal_pixels(intr, rows + sampled.y0, cols + sampled.x0)
        u, v = float(ideal_u.mean()), float(ideal_v.mean())
    position = ((u - intr.cx) * z / intr.fx, (v - intr.cy) * z / intr.fy, z)
    return Located(position, None, valid_pixels=sampled.count, spread_m=spread)


def _robust_depth(zs: np.ndarray, statistic: str, min_valid_pixels: int) -> tuple[float, float]:
    """(depth, MAD-based spread) of the valid depths by the chosen statistic."""
    if statistic == "trimmed_mean":
        ordered = np.sort(zs)
        cut = int(len(ordered) * TRIM_FRACTION)
        kept = ordered[cut:len(ordered) - cut] if len(ordered) > 2 * cut else ordered
        z = float(kept.mean(dtype=np.float64))
    elif statistic == "min_cluster":
        zs = _nearest_cluster(zs, min_valid_pixels)
        z = median(zs)
    else:
        z = median(zs)
    spread = MAD_TO_SIGMA * median(np.abs(zs - np.float32(z)))
    return z, spread


def median(values: np.ndarray) -> float:
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


def strided(values: np.ndarray, limit: int) -> np.ndarray:
    """An evenly strided subset of at most ``limit`` rows."""
    if len(values) <= limit:
        return values
    return values[::-(-len(values) // limit)]
