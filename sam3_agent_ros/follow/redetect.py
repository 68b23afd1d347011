"""``redetect`` tracker: run the segmenter on the new frame with the query's final text prompt and
associate its masks to the followed objects.

Association is an optimal one-to-one assignment (Hungarian method, ``assign``) on the cost
``(1 - IoU) + shift / diagonal`` between each followed object's predicted
mask and each detection, where ``shift`` is the distance between their centroids. A pair is
allowed only when its IoU reaches ``follow.match_min_iou`` or its shift is within
``follow.match_max_shift`` of the image diagonal; an object with no allowed detection is not seen
on this frame. IoU is computed over the two masks' boxes only, so it stays cheap at 1080p.

Look-alikes: the other detections of the prompt (a second blue box beside the followed one) take
part in the assignment as rows of their own, predicted where they were last detected. A
look-alike's detection overlaps its own prediction far better than the prediction of a followed
object that vanished beside it, so the assignment gives it back to the look-alike and the
vanished object stays unmatched: the gates alone cannot tell a look-alike within
``match_max_shift`` from the object having moved there.

Confidence of a matched object: the detection's score times ``0.5 + 0.5 * IoU`` with the
prediction (a detection that jumped away from where the object was expected is less certain).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sam3_agent_ros.core.ports import Detections, Segmenter
from sam3_agent_ros.core.types import Mask
from sam3_agent_ros.follow.tracker import MISSING, Estimate, centroid, mask_area
from sam3_agent_ros.masks import overlap_iou, pixel_box

SOURCE = "redetect"
_FORBIDDEN = 1e9  # cost of a pair the gates rule out


def assign(cost: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-cost one-to-one assignment of rows to columns of a (R, C) cost matrix (Hungarian
    method with potentials, O(n^3)); returns (row, column) pairs, min(R, C) of them."""
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2:
        raise ValueError("assign needs a 2-D cost matrix")
    rows, cols = cost.shape
    if rows == 0 or cols == 0:
        return []
    transposed = rows > cols
    if transposed:
        cost = cost.T
        rows, cols = cols, rows
    # Rows <= columns. u, v: potentials; match[j]: row assigned to column j (1-based, 0 = none).
    u = np.zeros(rows + 1)
    v = np.zeros(cols + 1)
    match = np.zeros(cols + 1, dtype=int)
    way = np.zeros(cols + 1, dtype=int)
    for i in range(1, rows + 1):
        match[0] = i
        j0 = 0
        min_to = np.full(cols + 1, np.inf)
        used = np.zeros(cols + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = match[j0]
            delta, j1 = np.inf, 0
            for j in range(1, cols + 1):
                if used[j]:
                    continue
                reduced = cost[i0 - 1, j - 1] - u[i0] - v[j]
                if reduced < min_to[j]:
                    min_to[j] = reduced
                    way[j] = j0
                if min_to[j] < delta:
                    delta, j1 = min_to[j], j
            for j in range(cols + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    min_to[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    pairs = [(int(match[j]) - 1, j - 1) for j in range(1, cols + 1) if match[j]]
    if transposed:
        pairs = [(c, r) for r, c in pairs]
    return sorted(pairs)


@dataclass(frozen=True)
class Gates:
    """When a detection may match a followed object (``follow.match_min_iou``,
    ``follow.match_max_shift`` as a fraction of the image diagonal)."""

    min_iou: float = 0.1
    max_shift: float = 0.1


def associate(predicted: Sequence[np.ndarray | None], detections: Sequence[Mask],
              shape: tuple[int, int], gates: Gates) -> dict[int, tuple[int, float]]:
    """``{object index: (detection index, IoU)}`` for the objects that match a detection.

    ``predicted[i]`` is where object ``i`` is expected (None: nowhere known; it cannot match).
    """
    diagonal = math.hypot(*shape)
    max_shift_px = gates.max_shift * diagonal
    cost = np.full((len(predicted), len(detections)), _FORBIDDEN)
    ious = np.zeros_like(cost)
    for i, mask in enumerate(predicted):
        if mask is None:
            continue
        box = pixel_box(mask)
        center = centroid(mask)
        if center is None:
            continue
        area = mask_area(mask)
        for j, det in enumerate(detections):
            iou = overlap_iou(mask, box, area, det.mask, det.pixel_box, det.area)
            shift = math.hypot(det.centroid[0] - center[0], det.centroid[1] - center[1])
            if iou >= gates.min_iou and iou > 0.0 or shift <= max_shift_px:
                cost[i, j] = (1.0 - iou) + shift / diagonal
                ious[i, j] = iou
    matches = {}
    for i, j in assign(cost):
        if cost[i, j] < _FORBIDDEN:
            matches[i] = (j, float(ious[i, j]))
    return matches


def detect(segmenter: Segmenter, frame_rgb: np.ndarray, text_prompt: str) -> list[Mask]:
    """The segmenter's masks for ``text_prompt`` on the frame, validated (``SegmenterError`` on
    malformed output), highest score first, empty ones dropped."""
    height, width = frame_rgb.shape[:2]
    raw = segmenter.segment(frame_rgb, text_prompt)
    return [m for m in Detections.coerce(raw, height, width).to_masks() if m.area > 0]


@dataclass(frozen=True)
class Redetection:
    """One re-detection: per followed object its estimate (``MISSING`` when no detection matched
    it), per known look-alike the detection it matched (``MISSING``: none), and the detections
    that matched nothing (new look-alikes, highest score first)."""

    objects: list[Estimate]
    lookalikes: list[Estimate]
    unmatched: list[Estimate]


class RedetectTracker:
    """Segmenter + association. ``previous`` estimates are the predictions; objects without a
    match come back as not seen (``MISSING``)."""

    source = SOURCE

    def __init__(self, segmenter: Segmenter, text_prompt: str, gates: Gates):
        self._segmenter = segmenter
        self._prompt = text_prompt
        self._gates = gates

    def track(self, frame_rgb: np.ndarray, previous: Sequence[Estimate]) -> list[Estimate]:
        return self.redetect(frame_rgb, previous, ()).objects

    def redetect(self, frame_rgb: np.ndarray, previous: Sequence[Estimate],
                 lookalikes: Sequence[np.ndarray]) -> Redetection:
        """Detect, then assign the detections to the followed objects (``previous``: where each
        is expected) and to the ``lookalikes`` (where each was last detected) together."""
        detections = detect(self._segmenter, frame_rgb, self._prompt)
        rows = [e.mask for e in previous] + list(lookalikes)
        matches = associate(rows, detections, frame_rgb.shape[:2], self._gates)
        objects = []
        for i in range(len(previous)):
            if i not in matches:
                objects.append(MISSING)
                continue
            j, iou = matches[i]
            det = detections[j]
            confidence = min(1.0, max(0.0, det.score)) * (0.5 + 0.5 * iou)
            objects.append(Estimate(mask=det.mask, confidence=confidence, box=det.pixel_box))
        offset = len(previous)
        found = [_as_estimate(detections[matches[offset + k][0]]) if offset + k in matches
                 else MISSING for k in range(len(lookalikes))]
        taken = {j for j, _ in matches.values()}
        unmatched = [_as_estimate(det) for j, det in enumerate(detections) if j not in taken]
        return Redetection(objects=objects, lookalikes=found, unmatched=unmatched)


def _as_estimate(detection: Mask) -> Estimate:
    return Estimate(mask=detection.mask, confidence=detection.score, box=detection.pixel_box)
