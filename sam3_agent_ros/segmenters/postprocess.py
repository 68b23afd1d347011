"""Post-processing of SAM 3 detections: pure numpy, no torch.

``filter_detections`` drops low scores and small masks, removes overlaps greedily by score and
returns what is left sorted by descending score, with boxes clipped to the frame.
"""

from __future__ import annotations

import numpy as np

from sam3_agent_ros.core.ports import Detections
from sam3_agent_ros.masks import overlap_iou, pixel_box


def filter_detections(masks: np.ndarray, scores: np.ndarray, boxes: np.ndarray, *,
                      confidence_threshold: float, overlap_threshold: float,
                      min_mask_area: int) -> Detections:
    """Keep masks with ``score >= confidence_threshold`` and ``area >= min_mask_area``; then, in
    descending score, drop every mask whose IoU with an already kept mask exceeds
    ``overlap_threshold`` (1.0 keeps all). Raises ``ValueError`` on inconsistent shapes."""
    masks = np.asarray(masks)
    if masks.ndim == 4 and masks.shape[1] == 1:
        masks = masks[:, 0]
    if masks.ndim != 3:
        raise ValueError(f"masks must be (N, H, W), got shape {masks.shape}")
    masks = masks.astype(bool, copy=False)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    count, height, width = masks.shape
    if scores.shape[0] != count or boxes.shape[0] != count:
        raise ValueError(f"{count} masks but {scores.shape[0]} scores and {boxes.shape[0]} boxes")

    areas = masks.reshape(count, height * width).sum(axis=1)
    candidates = np.flatnonzero((scores >= confidence_threshold) & (areas >= max(min_mask_area, 1))
                                & np.isfinite(scores))
    candidates = candidates[np.argsort(-scores[candidates], kind="stable")]
    kept = greedy_overlap_removal(masks, areas, candidates, overlap_threshold)
    if not kept:
        return Detections.empty(height, width)
    index = np.asarray(kept)
    return Detections(masks[index], scores[index], clip_boxes(boxes[index], height, width))


def greedy_overlap_removal(masks: np.ndarray, areas: np.ndarray, order: np.ndarray,
                           overlap_threshold: float) -> list[int]:
    """Indices from ``order`` (best first) whose mask IoU with every earlier kept one is at most
    ``overlap_threshold``. IoU is computed on the overlap of the two masks' pixel boxes only."""
    if overlap_threshold >= 1.0:
        return [int(i) for i in order]
    boxes = {int(i): pixel_box(masks[i]) for i in order}
    kept: list[int] = []
    for candidate in (int(i) for i in order):
        overlaps = (overlap_iou(masks[candidate], boxes[candidate], int(areas[candidate]),
                                masks[other], boxes[other], int(areas[other])) for other in kept)
        if all(overlap <= overlap_threshold for overlap in overlaps):
            kept.append(candidate)
    return kept


def clip_boxes(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """Clip x0 y0 x1 y1 pixel boxes to the frame; non-finite coordinates become the frame edge."""
    boxes = np.nan_to_num(np.asarray(boxes, dtype=np.float64).reshape(-1, 4), nan=0.0,
                          posinf=float(max(width, height)), neginf=0.0)
    limits = np.array([width, height, width, height], dtype=np.float64)
    return np.clip(boxes, 0.0, limits)
