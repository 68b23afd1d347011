"""Pure 3D geometry: a mask + a registered depth image + the colour intrinsics -> a 3D point and
an oriented 3D box.

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
from typing import Any

import cv2
import numpy as np

from sam3_agent_ros.camera_model import (  # noqa: F401 (re-exported: geometry3d's callers)
    Intrinsics,
    as_intrinsics,
    scale_intrinsics,
)
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
# Colour and depth images whose aspect ratios differ by more than this are not aligned.
ASPECT_TOLERANCE = 0.02
POSITION_DECIMALS = 5  # 10 micrometres, in the result JSON
QUATERNION_DECIMALS = 6
# The box (fit_box): the dominant plane is refitted this many times on its inliers; points that
# span less than MIN_SPREAD_M across are a line, not a surface; rays within MIN_RAY_COSINE of the
# plane meet it too far away to be used.
PLANE_ITERATIONS = 3
PLANE_POINTS = 4096  # the plane is fitted on at most this many seed points (evenly strided)
RANSAC_HYPOTHESES = 64  # planes through 3 seed points tried, scored on at most
RANSAC_SCORED_POINTS = 2048  # this many points; the generator's seed makes the fit repeatable
RANSAC_SEED = 0
MIN_SPREAD_M = 0.0005
MIN_RAY_COSINE = 0.05
# The minimum-area rectangle replaces the principal axes when its area is this much smaller.
RECTANGLE_ADVANTAGE = 0.05
# Thickness: points along the normal further apart than the min_cluster gap (or
# THICKNESS_GAP_SIGMAS times the noise) are not connected (background behind a mask edge; a
# steep side wall steps ~1 cm a pixel at 1 m); the extremes are the THICKNESS_PERCENTILE-th
# percentiles (single stray points do not count).
THICKNESS_GAP_SIGMAS = 4.0
# Points further than this many pixel footprints (plus the noise band) outside the face's
# rectangle, along the plane, are not the object's (background seen past its edge).
FOOTPRINT_SLACK_PIXELS = 2.0
THICKNESS_PERCENTILE = 2.0
SIGN_EPSILON = 1e-9


@dataclass(frozen=True)
class Located:
    """The outcome of ``locate_mask``: a position in metres, or None with the reason in ``error``.

    ``spread_m`` is a robust spread of the depths used (1.4826 * MAD), a rough position error.
    """

    position: tuple[float, float, float] | None
    error: str | None
    valid_pixels: int = 0
    spread_m: float | None = None


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
        intrinsics = scale_intrinsics(intrinsics, tuple(k_size), (width, height))
    return resize_depth_to(depth_m, height, width), intrinsics


@dataclass(frozen=True)
class _MaskDepth:
    """What ``locate_mask`` and ``fit_box`` share: the mask's crop (with a margin), its valid
    depths, the pixels the depth statistic used (eroded when enough remain) and its result."""

    x0: int
    y0: int
    crop: np.ndarray  # bool, the whole (un-eroded) mask in the crop
    depth: np.ndarray  # metres, the crop of the depth image
    valid: np.ndarray  # bool, depth within [min_m, max_m]
    used: np.ndarray  # bool, the pixels the statistic used
    count: int  # pixels in used
    z: float  # the statistic's depth
    spread: float  # 1.4826 * MAD of the used depths


def _mask_depth(mask: np.ndarray, depth_m: np.ndarray, erode_px: int, min_m: float,
                max_m: float, min_valid_pixels: int, statistic: str
                ) -> tuple[_MaskDepth | None, str | None, int]:
    """(the mask's depths, None, count) or (None, the reason, count): the argument checks and
    the depth statistic of ``locate_mask`` (see there)."""
    if statistic not in STATISTICS:
        raise ValueError(
            f"unknown depth statistic {statistic!r}; use one of {', '.join(STATISTICS)}")
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

    samples = depth_crop[used]
    if samples.size > MAX_STATISTIC_SAMPLES:
        samples = samples[::-(-samples.size // MAX_STATISTIC_SAMPLES)]
    z, spread = _robust_depth(samples, statistic, min_valid_pixels)
    return _MaskDepth(x0, y0, crop, depth_crop, valid, used, count, z, spread), None, count


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
    sampled, reason, count = _mask_depth(mask, depth_m, erode_px, min_m, max_m,
                                         min_valid_pixels, statistic)
    if sampled is None:
        return Located(None, reason, valid_pixels=count)
    return _locate(sampled, intr)


def _locate(sampled: _MaskDepth, intr: Intrinsics) -> Located:
    z, spread = sampled.z, sampled.spread
    band = max(INLIER_MIN_BAND_M + INLIER_BAND_FRACTION * z, INLIER_BAND_SIGMAS * spread)
    # The centroid comes from the whole (un-eroded) mask: erosion is for the depth statistic, and
    # eroding a mask that includes a visible side wall would shift the centre of the top face.
    inliers = sampled.crop & sampled.valid & (np.abs(sampled.depth - np.float32(z)) <= band)
    moments = cv2.moments(inliers.view(np.uint8), binaryImage=True)
    if moments["m00"] == 0:
        moments = cv2.moments(sampled.used.view(np.uint8), binaryImage=True)
    u = moments["m10"] / moments["m00"] + sampled.x0
    v = moments["m01"] / moments["m00"] + sampled.y0
    position = ((u - intr.cx) * z / intr.fx, (v - intr.cy) * z / intr.fy, z)
    return Located(position, None, valid_pixels=sampled.count, spread_m=spread)


# --- the oriented box ------------------------------------------------------------------------


@dataclass(frozen=True)
class Box3D:
    """An oriented box in the colour camera's optical frame, in metres.

    ``size`` = (x, y, z) extents along the box's own axes, longest first; ``orientation`` =
    (x, y, z, w), the unit quaternion of the rotation that turns the camera axes onto the box
    axes (box x along the longest extent). Sign conventions (a box has no front): box z points
    away from the camera, box x to the image's right (down when exactly vertical), y = z x x.
    """

    center: tuple[float, float, float]
    size: tuple[float, float, float]
    orientation: tuple[float, float, float, float]

    @property
    def rotation(self) -> np.ndarray:
        """The 3x3 rotation matrix: its columns are the box's x, y, z axes in the camera frame."""
        return quaternion_to_matrix(self.orientation)

    def to_json(self, decimals: int = 5) -> dict[str, dict[str, float]]:
        """``{"center", "size", "orientation"}`` as in the result JSON (interface §6)."""
        def named(values, keys, places):  # + 0.0: no "-0.0" in the JSON
            return {key: round(float(value), places) + 0.0 for key, value in zip(keys, values)}

        return {"center": named(self.center, "xyz", decimals),
                "size": named(self.size, "xyz", decimals),
                "orientation": named(self.orientation, "xyzw", QUATERNION_DECIMALS)}


@dataclass(frozen=True)
class Boxed:
    """The outcome of ``fit_box``: a box, or None with the reason in ``error``."""

    box: Box3D | None
    error: str | None
    points: int = 0  # depth points on the box's dominant face


def fit_box(mask: np.ndarray, depth_m: np.ndarray, k: Intrinsics | Sequence[float] | np.ndarray,
            erode_px: int = 3, min_m: float = 0.1, max_m: float = 10.0,
            min_valid_pixels: int = 20, statistic: str = "median") -> Boxed:
    """The oriented 3D box of one mask from registered depth in metres (arguments as for
    ``locate_mask``).

    1. Seed: the depths the statistic used (eroded mask: no edge pixels), kept to the depth
       cluster around the statistic's depth (gaps split off background and flying pixels).
    2. Dominant plane: RANSAC on the seed points, refitted by least squares in inverse depth on
       the points within a robust band (``_fit_plane``).
    3. Footprint: every valid pixel of the whole mask within that band of the plane (mask edges
       that fall on the background are off the plane), intersected with the plane along its
       ray; a minimum-area rectangle (or the principal axes, when they bound the points as
       tightly: ellipses) gives the two in-plane axes and extents, plus one pixel's footprint
       (pixel centres span one pixel less than the surface they sample).
    4. Thickness: the extent along the plane's normal of the mask's points over the face's
       rectangle and connected to the plane (a visible side wall; a gap splits off the
       background), trimmed, less the noise on either side.
    The axes are sorted by extent (``Box3D``). Invalid arguments raise ValueError; a mask without
    enough valid depth, or whose points do not span a plane, gives ``Boxed(None, reason)``.
    """
    intr = as_intrinsics(k)
    sampled, reason, count = _mask_depth(mask, depth_m, erode_px, min_m, max_m,
                                         min_valid_pixels, statistic)
    if sampled is None:
        return Boxed(None, reason)
    return _fit_box(sampled, intr, min_valid_pixels)


def _fit_box(sampled: _MaskDepth, intr: Intrinsics, min_valid_pixels: int) -> Boxed:
    depth = sampled.depth
    lo, hi = _cluster_around(depth[sampled.used], sampled.z, min_valid_pixels)
    seed = sampled.used & (depth >= lo) & (depth <= hi)
    seed_rays = _sampled(_rays(seed, sampled, intr), PLANE_POINTS)
    seed_depths = _sampled(depth[seed], PLANE_POINTS)
    plane = _fit_plane(seed_rays * seed_depths[:, None], sampled.z, min_valid_pixels)
    if isinstance(plane, str):
        return Boxed(None, plane)
    origin, normal, band, noise = plane

    # Every valid pixel of the whole mask, by its signed distance from the plane.
    everywhere = sampled.crop & sampled.valid
    rays = _rays(everywhere, sampled, intr)
    points = rays * depth[everywhere][:, None].astype(np.float64)
    residuals = (points - origin) @ normal
    on_plane = np.abs(residuals) <= band
    face_rays = rays[on_plane]
    facing = face_rays @ normal
    face_rays = face_rays[np.abs(facing) > MIN_RAY_COSINE * np.linalg.norm(face_rays, axis=1)]
    if len(face_rays) < min_valid_pixels:
        return Boxed(None, f"too few depth points on the object's dominant face "
                           f"({len(face_rays)} < {min_valid_pixels})")
    # Pixel rays meet the plane: the face's points without the depth noise.
    face = face_rays * ((origin @ normal) / (face_rays @ normal))[:, None]

    axis_u = _perpendicular(normal)
    axis_v = np.cross(normal, axis_u)
    flat = np.stack([(face - origin) @ axis_u, (face - origin) @ axis_v], axis=1)
    (dir_a, extent_a, mid_a), (dir_b, extent_b, mid_b) = _footprint(flat)
    in_plane = [dir_a[0] * axis_u + dir_a[1] * axis_v, dir_b[0] * axis_u + dir_b[1] * axis_v]
    pitch = _pixel_footprint(origin + mid_a * in_plane[0] + mid_b * in_plane[1], normal, intr)
    extents = [extent_a + pitch(in_plane[0]), extent_b + pitch(in_plane[1])]

    # Thickness: the points over the face's rectangle (a side wall lies along its edge; the
    # background a mask spills onto lies beyond it), connected to the plane along its normal,
    # less the noise on either side.
    # Depth noise moves a point along its ray: sideways by the noise times the ray's slope.
    face_centre = origin + mid_a * in_plane[0] + mid_b * in_plane[1]
    slope = math.hypot(face_centre[0], face_centre[1]) / face_centre[2]
    slack = FOOTPRINT_SLACK_PIXELS * max(pitch(in_plane[0]), pitch(in_plane[1])) \
        + INLIER_BAND_SIGMAS * noise * slope
    over = np.ones(len(points), bool)
    for axis, extent, middle in ((in_plane[0], extent_a, mid_a), (in_plane[1], extent_b, mid_b)):
        over &= np.abs((points - origin) @ axis - middle) <= extent / 2.0 + slack
    near, far = _cluster_around(residuals[over].astype(np.float32), 0.0, 1,
                                max(MIN_GAP_M, GAP_FRACTION * float(origin[2]),
                                    THICKNESS_GAP_SIGMAS * noise))
    attached = residuals[over & (residuals >= near) & (residuals <= far)]
    low, high = np.percentile(attached, (THICKNESS_PERCENTILE, 100.0 - THICKNESS_PERCENTILE))
    margin = INLIER_BAND_SIGMAS * noise
    low, high = min(0.0, float(low) + margin), max(0.0, float(high) - margin)
    centre = (origin + mid_a * in_plane[0] + mid_b * in_plane[1]
              + 0.5 * (low + high) * normal)
    axes = [*in_plane, normal]
    extents.append(high - low)
    order = sorted(range(3), key=lambda i: -extents[i])
    rotation = _box_axes(axes[order[0]], axes[order[2]], centre)
    box = Box3D(center=tuple(float(c) for c in centre),
                size=tuple(float(extents[i]) for i in order),
                orientation=matrix_to_quaternion(rotation))
    return Boxed(box, None, points=len(face))


def _rays(selected: np.ndarray, sampled: _MaskDepth, intr: Intrinsics) -> np.ndarray:
    """(N, 3) float64 rays (x/z, y/z, 1) of the ``selected`` pixels of the crop, in the order
    of ``depth[selected]``."""
    ys, xs = np.nonzero(selected)
    rays = np.empty((len(xs), 3))
    rays[:, 0] = (xs + (sampled.x0 - intr.cx)) / intr.fx
    rays[:, 1] = (ys + (sampled.y0 - intr.cy)) / intr.fy
    rays[:, 2] = 1.0
    return rays


def _sampled(values: np.ndarray, limit: int) -> np.ndarray:
    """An evenly strided subset of at most ``limit`` rows."""
    if len(values) <= limit:
        return values
    return values[::-(-len(values) // limit)]


def _cluster_around(values: np.ndarray, centre: float, min_count: int,
                    gap: float | None = None) -> tuple[float, float]:
    """(lowest, highest) of the run of sorted ``values`` nearest ``centre`` without a gap wider
    than ``gap`` (default: the depth tolerance of ``min_cluster``)."""
    ordered = np.sort(_sampled(values, 4 * MAX_STATISTIC_SAMPLES))
    if gap is None:
        tolerance = np.maximum(MIN_GAP_M, GAP_FRACTION * ordered[:-1])
    else:
        tolerance = gap
    starts = np.concatenate(([0], np.nonzero(np.diff(ordered) > tolerance)[0] + 1,
                             [len(ordered)]))
    best, best_distance = (float(ordered[0]), float(ordered[-1])), math.inf
    for begin, end in itertools.pairwise(starts):
        if end - begin < min(min_count, len(ordered)):
            continue
        low, high = float(ordered[begin]), float(ordered[end - 1])
        distance = max(low - centre, centre - high, 0.0)
        if distance < best_distance:
            best, best_distance = (low, high), distance
    return best


def _fit_plane(points: np.ndarray, z: float, min_valid_pixels: int):
    """(origin, unit normal away from the camera, inlier band, noise sigma) of the dominant
    plane of ``points``, or the reason there is none.

    RANSAC (seeded: the same points give the same plane) finds the plane with the most points
    within the minimum band (a top face beside its side walls, not a compromise between them).
    It is then refitted on its inliers by least squares along the pixel rays: a plane
    ``n . X = d`` seen through pixel rays (x/z, y/z, 1) is linear in inverse depth,
    ``1/z = (n / d) . (x/z, y/z, 1)``, and depth noise lies along the rays, so this fit is not
    tilted by it (PCA is, by noise comparable to the face's size). The band grows to
    ``INLIER_BAND_SIGMAS`` times the noise measured around the plane."""
    if len(points) < max(3, min_valid_pixels):
        return f"too few depth points on a plane ({len(points)} < {min_valid_pixels})"
    band = INLIER_MIN_BAND_M + INLIER_BAND_FRACTION * z
    keep = _ransac_inliers(points, band)
    rays = points / points[:, 2:3]
    noise = 0.0
    for _ in range(PLANE_ITERATIONS):
        kept = points[keep]
        if len(kept) < max(3, min_valid_pixels):
            return f"too few depth points on a plane ({len(kept)} < {min_valid_pixels})"
        centred = kept - kept.mean(axis=0)
        variances = np.linalg.eigvalsh(centred.T @ centred / len(kept))
        if math.sqrt(max(variances[1], 0.0)) < MIN_SPREAD_M:
            return "the mask's depth points do not span a surface (a line or a point)"
        inverse_plane, *_ = np.linalg.lstsq(rays[keep], 1.0 / kept[:, 2], rcond=None)
        scale = float(np.linalg.norm(inverse_plane))
        if not math.isfinite(scale) or scale == 0.0 or inverse_plane[2] <= 0:
            return "the mask's depth points do not span a surface in front of the camera"
        normal, offset = inverse_plane / scale, 1.0 / scale
        residuals = points @ normal - offset
        noise = MAD_TO_SIGMA * _median(np.abs(residuals[keep] - _median(residuals[keep])))
        band = max(INLIER_MIN_BAND_M + INLIER_BAND_FRACTION * z, INLIER_BAND_SIGMAS * noise)
        keep = np.abs(residuals) <= band
    centroid = points[keep].mean(axis=0) if keep.any() else kept.mean(axis=0)
    origin = centroid - (centroid @ normal - offset) * normal  # on the plane
    return origin, normal, band, noise


def _ransac_inliers(points: np.ndarray, band: float) -> np.ndarray:
    """The points within ``band`` of the plane through three of them that holds the most
    (all points when no three span a plane)."""
    rng = np.random.default_rng(RANSAC_SEED)
    scored = _sampled(points, RANSAC_SCORED_POINTS)
    triples = rng.integers(0, len(scored), size=(RANSAC_HYPOTHESES, 3))
    a, b, c = scored[triples[:, 0]], scored[triples[:, 1]], scored[triples[:, 2]]
    normals = np.cross(b - a, c - a)
    lengths = np.linalg.norm(normals, axis=1)
    usable = lengths > 1e-12
    if not usable.any():
        return np.ones(len(points), bool)
    normals = normals[usable] / lengths[usable, None]
    offsets = np.einsum("ij,ij->i", normals, a[usable])
    counts = (np.abs(scored @ normals.T - offsets) <= band).sum(axis=0)
    best = int(np.argmax(counts))
    return np.abs(points @ normals[best] - offsets[best]) <= band


def _perpendicular(normal: np.ndarray) -> np.ndarray:
    """A unit vector in the plane of ``normal``: the camera's x axis projected, else its y."""
    for axis in (np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])):
        projected = axis - (axis @ normal) * normal
        length = np.linalg.norm(projected)
        if length > 0.1:
            return projected / length
    raise AssertionError("unreachable: x and y cannot both be parallel to a unit normal")


def _footprint(flat: np.ndarray):
    """The two in-plane axes of 2D points: ((direction, extent, middle), ...) per axis.

    The minimum-area rectangle bounds any shape tightly but its angle wanders on shapes whose
    rectangles all have nearly the same area (ellipses); the principal axes are exact there.
    The principal axes win unless the rectangle is clearly smaller (squares, rotated or not,
    and partly hidden objects)."""
    rect = cv2.minAreaRect(flat.astype(np.float32))
    corners = cv2.boxPoints(rect).astype(np.float64)
    edge = corners[1] - corners[0]
    if np.linalg.norm(edge) == 0:
        edge = corners[2] - corners[1]
    candidates = [_normalised(edge)]
    centred = flat - flat.mean(axis=0)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    candidates.append(vectors[:, 1])
    fits = []
    for direction in candidates:
        across = np.array([-direction[1], direction[0]])
        axes = []
        for axis in (direction, across):
            along = flat @ axis
            low, high = float(along.min()), float(along.max())
            axes.append((axis, high - low, 0.5 * (low + high)))
        fits.append(axes)
    rect_area, pca_area = (fit[0][1] * fit[1][1] for fit in fits)
    return fits[0] if rect_area < (1.0 - RECTANGLE_ADVANTAGE) * pca_area else fits[1]


def _normalised(vector: np.ndarray) -> np.ndarray:
    length = np.linalg.norm(vector)
    return vector / length if length > 0 else np.array([1.0, 0.0])


def _pixel_footprint(point: np.ndarray, normal: np.ndarray, intr: Intrinsics):
    """A function: 3D direction in the plane -> the length one pixel step covers along it at
    ``point`` (the larger of the u and v steps)."""
    def on_plane(u: float, v: float) -> np.ndarray:
        ray = np.array([(u - intr.cx) / intr.fx, (v - intr.cy) / intr.fy, 1.0])
        return ray * (point @ normal) / (ray @ normal)

    u = intr.fx * point[0] / point[2] + intr.cx
    v = intr.fy * point[1] / point[2] + intr.cy
    here = on_plane(u, v)
    step_u, step_v = on_plane(u + 1.0, v) - here, on_plane(u, v + 1.0) - here
    return lambda direction: max(abs(step_u @ direction), abs(step_v @ direction))


def _box_axes(x_axis: np.ndarray, z_axis: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """The rotation whose columns are the box axes, with the signs of ``Box3D``."""
    z_axis = z_axis / np.linalg.norm(z_axis)
    if z_axis @ centre < 0:
        z_axis = -z_axis
    x_axis = x_axis - (x_axis @ z_axis) * z_axis
    x_axis = x_axis / np.linalg.norm(x_axis)
    if x_axis[0] < -SIGN_EPSILON or (abs(x_axis[0]) <= SIGN_EPSILON and x_axis[1] < 0):
        x_axis = -x_axis
    return np.stack([x_axis, np.cross(z_axis, x_axis), z_axis], axis=1)


def matrix_to_quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """A 3x3 rotation matrix -> the unit quaternion (x, y, z, w) with w >= 0."""
    m = np.asarray(rotation, dtype=np.float64)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4)
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = (s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s)
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = ((m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = ((m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4, (m[1, 0] - m[0, 1]) / s)
    quaternion = np.array(q)
    quaternion /= np.linalg.norm(quaternion)
    if quaternion[3] < 0:
        quaternion = -quaternion
    return tuple(float(c) for c in quaternion)


def quaternion_to_matrix(quaternion: Sequence[float]) -> np.ndarray:
    """A quaternion (x, y, z, w), normalised first -> its 3x3 rotation matrix."""
    x, y, z, w = np.asarray(quaternion, dtype=np.float64) / np.linalg.norm(quaternion)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


# --- both, as the result JSON carries them ---------------------------------------------------


def measure_mask(mask: np.ndarray, depth_m: np.ndarray,
                 k: Intrinsics | Sequence[float] | np.ndarray, cfg: Any) -> dict[str, Any]:
    """The result JSON's 3D fields of one mask (interface §5, §8b): ``position`` (or None and
    ``position_error``), ``position_spread_m``, ``box`` (or None and ``box_error``). ``cfg``
    holds the ``depth.*`` settings (``config.DepthConfig``): erode_px, min_m, max_m,
    min_valid_pixels, statistic. The node (``ros/depth.py``) and ``sam3-agent run --depth`` both
    call it, so they give the same numbers for the same pixels."""
    intr = as_intrinsics(k)
    sampled, reason, _ = _mask_depth(mask, depth_m, cfg.erode_px, cfg.min_m, cfg.max_m,
                                     cfg.min_valid_pixels, cfg.statistic)
    if sampled is None:
        return {"position": None, "position_error": reason, "box": None, "box_error": reason}
    located = _locate(sampled, intr)
    x, y, z = (round(float(c), POSITION_DECIMALS) for c in located.position)
    extras: dict[str, Any] = {"position": {"x": x, "y": y, "z": z}, "position_error": None,
                              "position_spread_m": round(float(located.spread_m),
                                                         POSITION_DECIMALS)}
    boxed = _fit_box(sampled, intr, cfg.min_valid_pixels)
    extras["box"] = boxed.box.to_json(POSITION_DECIMALS) if boxed.box is not None else None
    extras["box_error"] = boxed.error
    return extras


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
