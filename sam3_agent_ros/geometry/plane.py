"""The dominant plane of a mask's depth points (``fit_plane``: seeded RANSAC, then a least-squares
refit in inverse depth; ROS-free)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from sam3_agent_ros.geometry.locate import (
    INLIER_BAND_FRACTION,
    INLIER_BAND_SIGMAS,
    INLIER_MIN_BAND_M,
    MAD_TO_SIGMA,
    median,
    strided,
)
from sam3_agent_ros.geometry.rotations import cross

# The dominant plane is refitted this many times on its inliers; points that span less than
# MIN_SPREAD_M across are a line, not a surface.
PLANE_ITERATIONS = 3
RANSAC_HYPOTHESES = 64  # planes through 3 seed points tried, scored on at most
RANSAC_SCORED_POINTS = 2048  # this many points; the generator's seed makes the fit repeatable
RANSAC_SEED = 0
MIN_SPREAD_M = 0.0005


# Which of RANSAC's hypothesis planes ``n . X = d`` (unit normals (K, 3), offsets (K,)) may win.
PlaneFilter = Callable[[np.ndarray, np.ndarray], np.ndarray]


def fit_plane(points: np.ndarray, z: float, min_valid_pixels: int,
              accept: PlaneFilter | None = None):
    """(origin, unit normal away from the camera, inlier band, noise sigma) of the dominant
    plane of ``points``, or the reason there is none. ``accept`` (when given) says which
    RANSAC hypotheses may win (the support under an object: only planes below it); none
    accepted: the reason.

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
    keep = _ransac_inliers(points, band, accept)
    if keep is None:
        return "no plane through the depth points lies where one is looked for"
    rays = points / points[:, 2:3]
    inverse_depth = 1.0 / points[:, 2]
    noise = 0.0
    for _ in range(PLANE_ITERATIONS):
        kept = np.compress(keep, points, axis=0)  # compress: several times faster than [keep]
        if len(kept) < max(3, min_valid_pixels):
            return f"too few depth points on a plane ({len(kept)} < {min_valid_pixels})"
        centred = kept - kept.mean(axis=0)
        variances = np.linalg.eigvalsh(centred.T @ centred / len(kept))
        if math.sqrt(max(variances[1], 0.0)) < MIN_SPREAD_M:
            return "the mask's depth points do not span a surface (a line or a point)"
        inverse_plane = _least_squares(np.compress(keep, rays, axis=0),
                                       np.compress(keep, inverse_depth))
        scale = float(np.linalg.norm(inverse_plane))
        if not math.isfinite(scale) or scale == 0.0 or inverse_plane[2] <= 0:
            return "the mask's depth points do not span a surface in front of the camera"
        normal, offset = inverse_plane / scale, 1.0 / scale
        residuals = points @ normal - offset
        kept_residuals = np.compress(keep, residuals)
        noise = MAD_TO_SIGMA * median(np.abs(kept_residuals - median(kept_residuals)))
        band = max(INLIER_MIN_BAND_M + INLIER_BAND_FRACTION * z, INLIER_BAND_SIGMAS * noise)
        keep = np.abs(residuals) <= band
    centroid = points[keep].mean(axis=0) if keep.any() else kept.mean(axis=0)
    origin = centroid - (centroid @ normal - offset) * normal  # on the plane
    return origin, normal, band, noise


def _least_squares(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x minimising |a x - b| for a (N, 3) of full rank, by its normal equations (a quarter of
    ``np.linalg.lstsq``'s cost; the rays' columns are well conditioned); NaN when ``a`` has
    not full rank (the caller then says the points span no surface)."""
    try:
        return np.linalg.solve(a.T @ a, a.T @ b)
    except np.linalg.LinAlgError:
        return np.full(3, np.nan)


def _ransac_inliers(points: np.ndarray, band: float,
                    accept: PlaneFilter | None = None) -> np.ndarray | None:
    """The points within ``band`` of the plane through three of them that holds the most
    (all points when no three span a plane; None when ``accept`` refuses every plane)."""
    rng = np.random.default_rng(RANSAC_SEED)
    scored = strided(points, RANSAC_SCORED_POINTS)
    triples = rng.integers(0, len(scored), size=(RANSAC_HYPOTHESES, 3))
    a, b, c = scored[triples[:, 0]], scored[triples[:, 1]], scored[triples[:, 2]]
    normals = cross(b - a, c - a)
    lengths = np.linalg.norm(normals, axis=1)
    usable = lengths > 1e-12
    if not usable.any():
        return np.ones(len(points), bool)
    normals = normals[usable] / lengths[usable, None]
    offsets = np.einsum("ij,ij->i", normals, a[usable])
    # One row per hypothesis: counting along rows is several times faster than down columns.
    residuals = normals @ scored.T
    residuals -= offsets[:, None]
    np.abs(residuals, out=residuals)
    counts = np.count_nonzero(residuals <= band, axis=1)
    if accept is not None:
        allowed = np.asarray(accept(normals, offsets), bool)
        if not allowed.any():
            return None
        counts = np.where(allowed, counts, -1)
    best = int(np.argmax(counts))
    return np.abs(points @ normals[best] - offsets[best]) <= band

