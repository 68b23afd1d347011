"""The images of a concept pass: the mono16 label image (pixel = instance id) and the overlay
(every instance tinted and labelled ``concept id``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sam3_agent_ros import render
from sam3_agent_ros.concepts.types import ConceptDetection
from sam3_agent_ros.masks import pixel_box


def label_image(detections: Sequence[ConceptDetection], shape: tuple[int, int]) -> np.ndarray:
    """uint16 (H, W): each instance's id on its pixels, 0 elsewhere. Where instances overlap,
    the higher score wins (painted last)."""
    out = np.zeros(shape[:2], np.uint16)
    for detection in sorted(detections, key=lambda d: d.score):
        mask = np.asarray(detection.mask, dtype=bool)
        if mask.shape != out.shape:
            raise ValueError(f"mask shape {mask.shape} does not match the frame {out.shape}")
        box = pixel_box(mask)
        if box is not None:
            x0, y0, x1, y1 = box
            out[y0:y1, x0:x1][mask[y0:y1, x0:x1]] = detection.id
    return out


def overlay(image: np.ndarray, detections: Sequence[ConceptDetection]) -> np.ndarray:
    """A copy of the RGB frame with every instance drawn, in id order (so an instance keeps its
    tint while the instances before it stay), labelled ``concept id``."""
    ordered = sorted(detections, key=lambda d: d.id)
    return render.overlay_masks(image, [d.mask for d in ordered],
                                [f"{d.concept} {d.id}" for d in ordered])
