"""The images of an answer or a follow update, sharing their work: each mask's pixel box is
found once; the label image is painted once and the union mask derived from it; the overlay is
drawn once, at ``overlay.max_side``, for both the raw and the JPEG topic."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from std_msgs.msg import Header

from sam3_agent_ros import render
from sam3_agent_ros.config import OverlayConfig
from sam3_agent_ros.core.types import Mask
from sam3_agent_ros.masks import PixelBox, pixel_box
from sam3_agent_ros.ros.conversions import jpeg_image, mono8_image, rgb8_image

IMAGE_KINDS = ("mask", "labels", "overlay", "overlay/compressed")  # = the topics ~/<kind>
FOLLOW_IMAGE_KINDS = ("mask", "labels", "overlay/compressed")  # ~/follow/<kind>
DEFAULT_OVERLAY = OverlayConfig()  # overlay.max_side, overlay.jpeg_quality at their defaults


def image_messages(image: np.ndarray, masks: Sequence[np.ndarray | None], header: Header,
                   kinds: Iterable[str] = IMAGE_KINDS, overlay: OverlayConfig = DEFAULT_OVERLAY,
                   boxes: Sequence[PixelBox | None] | None = None) -> dict[str, Any]:
    """The requested images among ``mask`` (mono8 union, 255), ``labels`` (mono8, k on the k-th
    mask), ``overlay`` (rgb8 frame with the masks drawn, numbered 1..N) and
    ``overlay/compressed`` (the same overlay as JPEG), in the order of ``kinds``.

    Overlays are at most ``overlay.max_side`` px on their longest side; the masks and labels are
    full size. ``boxes``: the masks' pixel boxes when known; a None mask (an object not visible
    on this frame) keeps its number and is drawn nowhere."""
    wanted = list(dict.fromkeys(kinds))
    unknown = [kind for kind in wanted if kind not in IMAGE_KINDS]
    if unknown:
        raise ValueError(f"unknown image kind {unknown[0]!r} (known: {', '.join(IMAGE_KINDS)})")
    shape = image.shape[:2]
    if boxes is None:
        boxes = [None if mask is None else pixel_box(mask) for mask in masks]
    built: dict[str, Any] = {}
    if "mask" in wanted or "labels" in wanted:
        labels = render.label_image(masks, shape, boxes)
        if "labels" in wanted:
            built["labels"] = mono8_image(labels, header)
        if "mask" in wanted:
            built["mask"] = mono8_image(render.union_from_labels(labels), header)
    if "overlay" in wanted or "overlay/compressed" in wanted:
        drawn = render.overlay_image(image, masks, overlay.max_side, boxes)
        if "overlay" in wanted:
            built["overlay"] = rgb8_image(drawn, header)
        if "overlay/compressed" in wanted:
            built["overlay/compressed"] = jpeg_image(drawn, overlay.jpeg_quality, header)
    return {kind: built[kind] for kind in wanted}


def mask_boxes(masks: Sequence[Mask]) -> list[PixelBox | None]:
    """The pixel box of each of an answer's masks (kept by the agent; found when missing)."""
    return [mask.pixel_box if mask.pixel_box is not None else pixel_box(mask.mask)
            for mask in masks]
