"""The true oriented box of a scene object's top face, and an estimated box's errors against it
(``scene.SceneFrame.true_box``, the demos' and benchmarks' 3D box scores)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np


class TopFace(Protocol):
    """What ``true_box`` reads of an object (``scene.SceneObject``; not imported: scene.py
    imports this module)."""

    shape: str
    size: tuple[float, float]
    yaw_deg: float
    position: tuple[float, float]

    def top_outline(self) -> np.ndarray: ...

    def tilt(self) -> np.ndarray: ...


@dataclass(frozen=True)
class TrueBox:
    """An object's top face as a box: ``center`` (camera frame, m) of its minimum-area
    rectangle, ``sizes`` (longest, second) of that rectangle, ``long_axis`` and ``normal``
    (unit vectors, camera frame). ``symmetry_deg``: the long axis is defined modulo this angle
    (180; 90 for a square; None when not at all: circles, and triangles). ``ambiguous``: the
    face has several minimum-area rectangles of different centres and sides (a triangle: one
    flush with each side, all of the same area), so only its plane is defined."""

    center: tuple[float, float, float]
    sizes: tuple[float, float]
    long_axis: tuple[float, float, float]
    normal: tuple[float, float, float]
    symmetry_deg: float | None
    ambiguous: bool = False


SQUARE_TOLERANCE = 0.02  # sides within 2 %: a square (the long axis is defined modulo 90 deg)


def true_box(obj: TopFace, top_centre: tuple[float, float, float]) -> TrueBox:
    """``obj``'s top face as a ``TrueBox``, its face centre at ``top_centre`` (camera frame)."""
    if obj.shape == "triangle":  # one of its minimum-area rectangles
        flat = (obj.top_outline() - np.asarray(obj.position)).astype(np.float32)
        (mid_x, mid_y), (width, height), angle = cv2.minAreaRect(flat)
    else:  # rectangles and ellipses are their own rectangles' axes
        (mid_x, mid_y), angle = (0.0, 0.0), obj.yaw_deg
        width, height = obj.size if obj.shape != "circle" else (obj.size[0], obj.size[0])
    direction = np.array([math.cos(math.radians(angle)), math.sin(math.radians(angle)), 0.0])
    if height > width:
        direction = np.array([-direction[1], direction[0], 0.0])
        width, height = height, width
    tilt = obj.tilt()
    center = np.asarray(top_centre) + tilt @ np.array([mid_x, mid_y, 0.0])
    if obj.shape in ("circle", "triangle"):
        symmetry = None
    elif obj.shape == "ellipse":
        symmetry = 180.0 if abs(width - height) > SQUARE_TOLERANCE * width else None
    else:
        symmetry = 90.0 if abs(width - height) <= SQUARE_TOLERANCE * width else 180.0
    return TrueBox(center=tuple(float(c) for c in center), sizes=(float(width), float(height)),
                   long_axis=tuple(float(c) for c in tilt @ direction),
                   normal=tuple(float(c) for c in tilt @ np.array([0.0, 0.0, 1.0])),
                   symmetry_deg=symmetry, ambiguous=obj.shape == "triangle")


@dataclass(frozen=True)
class BoxErrors:
    """An estimated box against a ``TrueBox``: centre distance (cm), the two largest sizes'
    relative errors (%), the in-plane angle between the long axes (deg; None where the truth has
    no long axis); None for what an ambiguous truth does not define."""

    center_cm: float | None
    size_pct: tuple[float, float] | None
    angle_deg: float | None

    def within(self, center_cm: float = 1.0, size_pct: float = 10.0,
               angle_deg: float = 10.0) -> bool:
        """Within the accuracy targets (centre 1 cm, sizes 10 %, angle 10 degrees)."""
        return ((self.center_cm is None or self.center_cm <= center_cm)
                and (self.size_pct is None or max(map(abs, self.size_pct)) <= size_pct)
                and (self.angle_deg is None or self.angle_deg <= angle_deg))

    def describe(self) -> str:
        parts = []
        if self.center_cm is not None:
            parts.append(f"centre {self.center_cm:.2f} cm")
        if self.size_pct is not None:
            parts.append("sizes " + "/".join(f"{v:+.1f}" for v in self.size_pct) + " %")
        if self.angle_deg is not None:
            parts.append(f"angle {self.angle_deg:.1f} deg")
        return ", ".join(parts) or "undefined for this shape"


def box_errors(truth: TrueBox, center: Sequence[float], size: Sequence[float],
               rotation: np.ndarray) -> BoxErrors:
    """Compare a box (centre, sizes longest first, rotation matrix whose columns are its axes)
    with the truth: the sizes and the long axis are those of the box's two axes in the face's
    plane (the third is the one nearest the face's normal), the angle is measured in the face's
    plane, modulo the truth's symmetry."""
    if truth.ambiguous:
        return BoxErrors(None, None, None)
    center_cm = float(np.linalg.norm(np.asarray(center) - np.asarray(truth.center))) * 100.0
    normal, long_axis = np.asarray(truth.normal), np.asarray(truth.long_axis)
    axes = [np.asarray(rotation)[:, i] for i in range(3)]
    across = max(range(3), key=lambda i: abs(axes[i] @ normal))
    in_plane = [i for i in range(3) if i != across]  # longest first, as the sizes are
    size_pct = tuple(float(size[i] / truth.sizes[n] - 1.0) * 100.0
                     for n, i in enumerate(in_plane))
    angle = None
    if truth.symmetry_deg is not None:
        axis = axes[in_plane[0]] - (axes[in_plane[0]] @ normal) * normal
        axis /= np.linalg.norm(axis)
        turned = math.degrees(math.atan2(np.cross(long_axis, axis) @ normal,
                                         long_axis @ axis)) % truth.symmetry_deg
        angle = min(turned, truth.symmetry_deg - turned)
    return BoxErrors(center_cm, size_pct, angle)
