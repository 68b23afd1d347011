"""Parallel-jaw grasps of a box that reaches its support, clear of everything around it
(ROS-free).

Candidates (``plan_grasps``), from the reaching box (``support.reaching_box``: z along the
support's normal, x and y its footprint):
- top-down: approaching against the support's normal, closing across the box's x or its y where
  that side is at most ``max_width`` (``grasp.max_width_m``); the fingertips go down to the
  support's clearance or as far as the fingers reach with the palm clear of the top;
- side: where the box is taller than the side it closes across, approaching horizontally along
  x or y (both ways), closing across the other, at half the height (the fingers' lowest edge
  at least the clearance above the support), the fingertips to the far face or as far as the
  fingers reach with the palm clear of the near face.
Each is refused when its contact along the approach is shorter than ``Gripper.min_grip``.

Pose convention (the grasp's frame): the origin is the middle of the jaws' contact region, x the
approach direction (from the gripper into the object), y the closing direction, z = x cross y.
The gripper is three boxes in that frame (``Gripper``): two fingers of ``finger_length`` along
x, ``finger_thickness`` along y beside the opening, ``finger_breadth`` along z, and the palm of
``palm_depth`` behind them. The jaws open to the side's width plus the clearance each side (at
most ``max_width``).

Every candidate is checked with ``clearance`` (``grasp.clearance_m``): each gripper box at least
that far above the support plane, from every obstacle box (separating axes: a conservative
distance) and from every obstacle point: a point of the scene cloud that is neither the
target's (its ``target_label``, or within ``OWN_MARGIN_M`` of its box: the mask's edges) nor the
support's (within the support's band of its plane, or under it). A neighbour nobody segmented
is such points (those near the gripper, at most ``MAX_CHECKED_POINTS`` of them, evenly). The
survivors are scored, best first: ``FIT_WEIGHT`` x fit (room in the jaws, contact length),
``CLEARANCE_WEIGHT`` x clearance (up to ``CLEARANCE_SCALE_M``), ``GRAVITY_WEIGHT`` x approach
against gravity (1 straight down, 0.5 horizontal). None left: ``Grasps.error`` says why.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.rotations import cross, matrix_to_quaternion, quaternion_to_matrix
from sam3_agent_ros.geometry.support import Support
from sam3_agent_ros.geometry.target_points import evenly

OWN_MARGIN_M = 0.005
# The obstacle points checked: those near the gripper, at most this many, evenly along the
# cloud (at 1080p and 0.8 m the scene cloud samples the crop every ~3 mm; the near ones thinned
# to this are still a few mm apart, finer than the clearance: a finger cannot pass between them
# into a surface).
MAX_CHECKED_POINTS = 3000
GOOD_GRIP_M = 0.03  # contact along the approach worth the whole fit's second half
CLEARANCE_SCALE_M = 0.03
FIT_WEIGHT, CLEARANCE_WEIGHT, GRAVITY_WEIGHT = 0.4, 0.3, 0.3
DECIMALS = 5
SUPPORT = "the support"
POINTS = "depth points that are neither the target nor its support"


@dataclass(frozen=True)
class Gripper:
    """A parallel-jaw gripper's geometry (m); the default: a Franka-Hand-sized one."""

    finger_length: float = 0.05
    finger_thickness: float = 0.01
    finger_breadth: float = 0.02
    palm_depth: float = 0.02
    min_grip: float = 0.01


@dataclass(frozen=True)
class Grasp:
    """A grasp pose (module doc) with the ``width`` it closes on (m), its ``score`` (0-1), its
    ``clearance`` (m: to the nearest thing checked), its ``kind`` (top or side), the jaws'
    ``opening`` and the ``grip`` (contact length along the approach, m)."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]
    width: float
    score: float
    clearance: float
    kind: str
    opening: float = 0.0
    grip: float = 0.0

    @property
    def rotation(self) -> np.ndarray:
        return quaternion_to_matrix(self.orientation)

    def moved(self, matrix: np.ndarray) -> Grasp:
        """The same grasp in another frame (``matrix``, 4x4: this frame's points to that's)."""
        matrix = np.asarray(matrix, np.float64)
        px, py, pz = (float(c) for c in matrix[:3, :3] @ np.asarray(self.position)
                      + matrix[:3, 3])
        orientation = matrix_to_quaternion(matrix[:3, :3] @ self.rotation)
        return Grasp((px, py, pz), orientation, self.width, self.score, self.clearance,
                     self.kind, self.opening, self.grip)

    def to_json(self) -> dict[str, object]:
        """``{"pose": {"position", "orientation"}, "width", "score"}`` (CONTRACTS §12)."""
        return {"pose": {"position": _named(self.position, "xyz", DECIMALS),
                         "orientation": _named(self.orientation, "xyzw", 6)},
                "width": round(self.width, DECIMALS) + 0.0,
                "score": round(self.score, 4) + 0.0}


@dataclass(frozen=True)
class Grasps:
    """The grasps, best first, or none and the reason in ``error``; ``candidates``: how many
    were checked."""

    grasps: tuple[Grasp, ...]
    error: str | None
    candidates: int = 0


@dataclass(frozen=True)
class _Parts:
    """Boxes of the gripper in the scene's frame: centres (P, 3), axes (P, 3, 3: columns),
    half extents (P, 3)."""

    centres: np.ndarray
    axes: np.ndarray
    halves: np.ndarray

    def lowest(self, support: Support) -> np.ndarray:
        """Each box's lowest height above the support plane."""
        normal = np.asarray(support.normal)
        reach = np.einsum("pj,pj->p", np.abs(np.einsum("pij,i->pj", self.axes, normal)),
                          self.halves)
        return support.heights(self.centres) - reach

    def distances(self, points: np.ndarray) -> np.ndarray:
        """(P,): each box's distance from the nearest of the (N, 3) points (0: one inside)."""
        count = len(self.centres)
        kind = points.dtype  # float32 for a scene cloud: ~0.1 um at a few metres, twice as fast
        # Every point along every box's axes in one product, a row per axis: (3P, 3) @ (3, N)
        # (numpy works along rows several times faster than across narrow columns).
        rows = np.swapaxes(self.axes, 1, 2).reshape(3 * count, 3).astype(kind)
        local = rows @ points.T
        local -= np.einsum("pj,pjk->pk", self.centres, self.axes).reshape(-1, 1).astype(kind)
        np.abs(local, out=local)
        local -= self.halves.reshape(-1, 1).astype(kind)
        np.maximum(local, 0.0, out=local)
        local *= local
        squared = local.reshape(count, 3, -1).sum(axis=1)
        return np.sqrt(squared.min(axis=1).astype(np.float64))

    def gaps(self, boxes: Sequence[Box3D]) -> np.ndarray:
        """(B, P): a lower bound of each gripper box's distance to each of ``boxes`` (negative:
        they overlap), the widest separation along the 15 separating axes of the pair; all
        pairs in one set of products."""
        count = len(self.centres)
        if not boxes:
            return np.zeros((0, count))
        other_axes = np.stack([box.rotation for box in boxes])  # (B, 3, 3: columns)
        other_half = np.array([box.size for box in boxes], np.float64) / 2.0
        other_centre = np.array([box.center for box in boxes], np.float64)
        shape = (len(boxes), count, 3, 3)
        mine = np.broadcast_to(np.swapaxes(self.axes, 1, 2), shape)  # rows: the axes
        theirs = np.broadcast_to(np.swapaxes(other_axes, 1, 2)[:, None], shape)
        crossed = cross(mine[:, :, :, None, :], theirs[:, :, None, :, :]).reshape(
            len(boxes), count, 9, 3)
        axes = np.concatenate([mine, theirs, crossed], axis=2)  # (B, P, 15, 3)
        lengths = np.sqrt(np.einsum("bpak,bpak->bpa", axes, axes))
        usable = lengths > 1e-9
        axes = axes / np.where(usable, lengths, 1.0)[..., None]
        offset = np.abs(np.einsum("bpak,bpk->bpa", axes,
                                  other_centre[:, None, :] - self.centres[None]))
        reach = np.einsum("bpaj,pj->bpa", np.abs(np.einsum("bpak,pkj->bpaj", axes, self.axes)),
                          self.halves)
        reach += np.einsum("bpaj,bj->bpa", np.abs(np.einsum("bpak,bkj->bpaj", axes,
                                                            other_axes)), other_half)
        return np.where(usable, offset - reach, -np.inf).max(axis=2)


@dataclass(frozen=True)
class _Candidate:
    kind: str
    centre: np.ndarray
    axes: np.ndarray  # columns: approach, closing, their cross product
    width: float
    opening: float
    grip: float  # contact length along the approach


def gripper_boxes(grasp: Grasp, gripper: Gripper = Gripper()
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gripper of ``grasp`` as the three boxes the checks use (module doc), in the grasp's
    frame of reference: centres (3, 3), axes (3, 3, 3: columns), half extents (3, 3); fingers
    first, then the palm (for markers, and for checks of one's own)."""
    parts = _gripper_parts(np.asarray(grasp.position, np.float64)[None],
                           grasp.rotation[None], np.array([grasp.opening]),
                           np.array([grasp.grip]), gripper)
    return parts.centres, parts.axes, parts.halves


def _gripper_parts(centres: np.ndarray, axes: np.ndarray, openings: np.ndarray,
                   grips: np.ndarray, gripper: Gripper) -> _Parts:
    """The three boxes of each of C grasps (centres (C, 3), axes (C, 3, 3), the jaws'
    openings and the contact lengths (C,)): fingers, then the palm, grasp by grasp."""
    tips = 0.5 * grips  # the fingertips lie half the contact ahead of the origin
    length, thick = gripper.finger_length, gripper.finger_thickness
    breadth, palm = gripper.finger_breadth, gripper.palm_depth
    local = np.zeros((len(centres), 3, 3))  # per grasp its three boxes' centres, its frame
    local[:, :2, 0] = (tips - 0.5 * length)[:, None]
    beside = 0.5 * openings + 0.5 * thick  # each finger's middle beside the opening
    local[:, 0, 1], local[:, 1, 1] = -beside, beside
    local[:, 2, 0] = tips - length - 0.5 * palm
    halves = np.empty((len(centres), 3, 3))
    halves[:, :2] = (0.5 * length, 0.5 * thick, 0.5 * breadth)  # the fingers
    halves[:, 2, 0], halves[:, 2, 2] = 0.5 * palm, 0.5 * breadth  # the palm
    halves[:, 2, 1] = 0.5 * openings + thick
    placed = centres[:, None, :] + np.einsum("cbj,cij->cbi", local, axes)
    return _Parts(placed.reshape(-1, 3), np.repeat(axes, 3, axis=0), halves.reshape(-1, 3))


def plan_grasps(box: Box3D, support: Support, *, obstacles: Sequence[Box3D] = (),
                points: np.ndarray | None = None, labels: np.ndarray | None = None,
                target_label: int | None = None, max_width: float = 0.08,
                clearance: float = 0.01, gripper: Gripper = Gripper(),
                up: Sequence[float] | None = None) -> Grasps:
    """The grasps of the reaching ``box`` on ``support`` (module doc), best first. ``points``
    (N, 3) with ``labels`` (N,): the scene cloud in the box's frame; ``up``: against gravity
    (default: the support's normal)."""
    normal = np.asarray(support.normal, np.float64)
    against_gravity = normal if up is None else np.asarray(up, np.float64) / np.linalg.norm(up)
    candidates, reason = _candidates(box, normal, max_width, clearance, gripper)
    if not candidates:
        return Grasps((), reason, 0)
    parts = _gripper_parts(np.array([c.centre for c in candidates]),
                           np.array([c.axes for c in candidates]),
                           np.array([c.opening for c in candidates]),
                           np.array([c.grip for c in candidates]), gripper)
    blockers = _blockers(box, support, parts, points, labels, target_label)
    nearest, what = _nearest(parts, support, obstacles, blockers)
    grasps: list[Grasp] = []
    blocked: Counter[str] = Counter()
    for index, candidate in enumerate(candidates):
        mine = slice(3 * index, 3 * index + 3)
        worst = int(np.argmin(nearest[mine]))
        gap = float(nearest[mine][worst])
        if gap < clearance - 1e-9:
            blocked[what[mine][worst]] += 1
            continue
        fit = 0.5 * (1.0 - candidate.width / max_width) + 0.5 * min(
            1.0, candidate.grip / GOOD_GRIP_M)
        room = min(1.0, gap / CLEARANCE_SCALE_M)
        gravity = 0.5 * (1.0 - float(candidate.axes[:, 0] @ against_gravity))
        score = FIT_WEIGHT * fit + CLEARANCE_WEIGHT * room + GRAVITY_WEIGHT * gravity
        px, py, pz = (float(c) for c in candidate.centre)
        grasps.append(Grasp((px, py, pz), matrix_to_quaternion(candidate.axes),
                            candidate.width, float(score), gap, candidate.kind,
                            candidate.opening, candidate.grip))
    if not grasps:
        causes = ", ".join(f"{count} with {what}" for what, count in blocked.most_common())
        return Grasps((), f"every candidate grasp ({len(candidates)}) comes within "
                          f"{clearance:g} m (grasp.clearance_m) of something: {causes}",
                      len(candidates))
    ordered = sorted(grasps, key=lambda g: -g.score)  # stable: ties keep the candidates' order
    return Grasps(tuple(ordered), None, len(candidates))


def _candidates(box: Box3D, normal: np.ndarray, max_width: float, clearance: float,
                gripper: Gripper) -> tuple[list[_Candidate], str | None]:
    """The candidates (module doc), or none and why."""
    rotation = box.rotation
    height = float(box.size[2])
    footprint = [(rotation[:, 0], float(box.size[0])), (rotation[:, 1], float(box.size[1]))]
    foot = np.asarray(box.center) - 0.5 * height * normal
    fitting = [(axis, width) for axis, width in footprint if width <= max_width]
    if not fitting:
        return [], (f"no side of the object fits the gripper: it is {footprint[0][1]:.3f} x "
                    f"{footprint[1][1]:.3f} m across, grasp.max_width_m is {max_width:g} m")
    out, short = [], []
    length = gripper.finger_length
    for closing, width in fitting:  # top-down
        tip = max(clearance, height + clearance - length)
        grip = height - tip
        if grip < gripper.min_grip:
            short.append(f"top-down: {grip * 100:.1f} cm of contact")
            continue
        approach = -normal
        axes = np.stack([approach, closing, cross(approach, closing)], axis=1)
        out.append(_Candidate("top", foot + 0.5 * (height + tip) * normal, axes, width,
                              min(width + 2 * clearance, max_width), grip))
    for (along, depth), (closing, width) in itertools.permutations(footprint, 2):  # side
        if width > max_width or height <= width:
            continue
        fingertip = min(0.5 * depth, -0.5 * depth + length - clearance)
        grip = fingertip + 0.5 * depth
        if grip < gripper.min_grip:
            short.append(f"from the side: {grip * 100:.1f} cm of contact")
            continue
        level = max(0.5 * height, clearance + 0.5 * gripper.finger_breadth)
        for sign in (1.0, -1.0):
            approach = sign * along
            axes = np.stack([approach, closing, cross(approach, closing)], axis=1)
            centre = foot + level * normal + (0.5 * (fingertip - 0.5 * depth)) * approach
            out.append(_Candidate("side", centre, axes, width,
                                  min(width + 2 * clearance, max_width), grip))
    if not out:
        return [], ("the object is too flat to grip: " + "; ".join(short)
                    + f" (at least {gripper.min_grip * 100:.1f} cm needed)")
    return out, None


def _blockers(box: Box3D, support: Support, parts: _Parts, points: np.ndarray | None,
              labels: np.ndarray | None, target_label: int | None) -> np.ndarray:
    """The scene points that can block a candidate: those within ``CLEARANCE_SCALE_M`` of the
    bounding box (in the target box's axes) of all the gripper boxes (the others cannot
    matter) that are neither the target's nor the support's (module doc), at most
    ``MAX_CHECKED_POINTS`` (evenly)."""
    if points is None or len(points) == 0:
        return np.zeros((0, 3))
    points = np.asarray(points).reshape(-1, 3)
    # Contiguous (a scene cloud's points are a strided view of its bytes): faster to index.
    points = np.ascontiguousarray(points if points.dtype in (np.float32, np.float64)
                                  else points.astype(np.float64))
    axes, centre = box.rotation, np.asarray(box.center)
    # Every point in the target box's axes, one row per axis (3, N): one product serves both
    # tests, and numpy compares rows several times faster than columns. The box's centre is
    # there at ``offset``, folded into the bounds.
    local = axes.T.astype(points.dtype) @ points.T
    offset = centre @ axes
    corners = (parts.centres[:, None, :] + np.einsum(
        "pij,cj->pci", parts.axes, _SIGNS) * parts.halves[:, None, :]) @ axes
    low = corners.reshape(-1, 3).min(axis=0) - CLEARANCE_SCALE_M
    high = corners.reshape(-1, 3).max(axis=0) + CLEARANCE_SCALE_M
    near = (local[0] >= low[0]) & (local[0] <= high[0]) & (local[1] >= low[1]) & (
        local[1] <= high[1]) & (local[2] >= low[2]) & (local[2] <= high[2])
    index = np.flatnonzero(near)
    points, local = np.take(points, index, axis=0), np.take(local, index, axis=1)
    keep = points @ np.asarray(support.normal, points.dtype) > max(support.band, 1e-3) \
        - support.distance
    if labels is not None and target_label is not None:
        keep &= np.take(np.asarray(labels).reshape(-1), index) != target_label
    reach = np.asarray(box.size) / 2.0 + OWN_MARGIN_M
    outside = np.zeros(len(index), bool)
    for along, middle, half in zip(local, offset, reach):
        outside |= (along > middle + half) | (along < middle - half)
    keep &= outside
    blockers = np.compress(keep, points, axis=0)
    spread = evenly(len(blockers), MAX_CHECKED_POINTS)
    return blockers if spread is None else blockers[spread]


_SIGNS = np.array(list(itertools.product((-1.0, 1.0), repeat=3)))


def _nearest(parts: _Parts, support: Support, obstacles: Sequence[Box3D],
             points: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per gripper box, the distance to the nearest thing checked and what it is: the support,
    an obstacle box or an obstacle point."""
    nearest = parts.lowest(support)
    what = [SUPPORT] * len(nearest)
    for index, gaps in enumerate(parts.gaps(obstacles)):
        for k in np.flatnonzero(gaps < nearest):
            what[k] = f"obstacle {index}"
        nearest = np.minimum(nearest, gaps)
    if len(points):
        gaps = parts.distances(points)
        for k in np.flatnonzero(gaps < nearest):
            what[k] = POINTS
        nearest = np.minimum(nearest, gaps)
    return nearest, what


def _named(values: Sequence[float], keys: str, places: int) -> dict[str, float]:
    return {key: round(float(value), places) + 0.0 for key, value in zip(keys, values)}
