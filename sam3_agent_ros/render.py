"""OpenCV drawing of masks for the LLM and for the ROS outputs (RGB uint8 in, RGB uint8 out).

Nothing here modifies its input. Work is restricted to each mask's bounding box, so a numbered
overlay of ten masks on a 1080p frame costs a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from sam3_agent_ros.masks import PixelBox, pixel_box, resize_mask_with_box

# Distinct, saturated tints (RGB), used in order: mask k gets PALETTE[(k - 1) % len(PALETTE)].
PALETTE: tuple[tuple[int, int, int], ...] = (
    (255, 56, 56), (56, 132, 255), (50, 205, 50), (255, 178, 29), (207, 0, 255),
    (0, 212, 187), (255, 112, 191), (141, 96, 255), (190, 230, 30), (255, 140, 60),
    (0, 160, 255), (230, 60, 140), (120, 200, 255), (170, 110, 40), (255, 230, 90),
    (60, 240, 120), (160, 160, 255), (255, 90, 90), (90, 130, 160), (200, 255, 160),
)
LABEL_LIMIT = 255  # label_image is uint8: masks after the 255th all get the value 255

_FONT = cv2.FONT_HERSHEY_SIMPLEX
_REFERENCE_SIDE = 1008.0  # the size images are shown to the model at (agent.max_image_side)
_ANCHOR_GRID = 48  # distance transforms for label anchors run at most at this resolution
WASH = 0.7  # of ``alpha``: how far a mask's pixels move towards white (their hue is kept)


def palette_color(index: int) -> tuple[int, int, int]:
    """The tint of the mask at 0-based position ``index``."""
    return PALETTE[index % len(PALETTE)]


def downscale(image: np.ndarray, max_side: int) -> np.ndarray:
    """Shrink so that the longest side is at most ``max_side``. Returns ``image`` itself (not a
    copy) when it is already small enough.

    Bilinear for mild factors (down to 1/2: OpenCV's INTER_AREA is ~7x slower there, e.g. 17 ms
    for 1920x1080 -> 1008, for no visible gain), INTER_AREA for stronger ones (no aliasing)."""
    if max_side <= 0:
        raise ValueError(f"max_side must be positive, got {max_side}")
    height, width = image.shape[:2]
    longest = max(height, width)
    if longest <= max_side:
        return image
    scale = max_side / longest
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    interpolation = cv2.INTER_LINEAR if scale >= 0.5 else cv2.INTER_AREA
    return cv2.resize(image, size, interpolation=interpolation)


def union_mask(masks: Sequence[np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    """uint8 (H, W): 255 on the union of ``masks``, 0 elsewhere (the ``~/mask`` image)."""
    out = np.zeros(shape[:2], np.uint8)
    for mask in masks:
        checked = _checked(mask, out.shape)
        box = pixel_box(checked)
        if box is not None:
            _paint(out, checked, box, 255)
    return out


def label_image(masks: Sequence[np.ndarray | None], shape: tuple[int, int],
                boxes: Sequence[PixelBox | None] | None = None) -> np.ndarray:
    """uint8 (H, W): k on the k-th mask (1-based), 0 elsewhere (the ``~/labels`` image).

    Where masks overlap, the earlier mask (smaller id) wins, so every pixel has exactly one label.
    Values are uint8: masks after the 255th (``LABEL_LIMIT``) are all labelled 255.
    ``boxes``: the masks' pixel boxes when already known (``Mask.pixel_box``), which saves a pass
    over every mask; a None box is an empty mask, whose entry in ``masks`` may be None.
    """
    out = np.zeros(shape[:2], np.uint8)
    boxes = _boxes(masks, boxes, out.shape)
    for index in range(len(masks), 0, -1):  # paint the last first so earlier masks win
        box = boxes[index - 1]
        if box is not None:
            _paint(out, _checked(masks[index - 1], out.shape), box, min(index, LABEL_LIMIT))
    return out


def union_from_labels(labels: np.ndarray) -> np.ndarray:
    """uint8 (H, W): 255 where ``labels`` is non-zero. The union image derived from the label
    image in one pass over the frame (~0.2 ms at 1080p) instead of painting every mask again."""
    return cv2.threshold(labels, 0, 255, cv2.THRESH_BINARY)[1]


def _paint(out: np.ndarray, mask: np.ndarray, box: PixelBox, value: int) -> None:
    x0, y0, x1, y1 = box
    np.copyto(out[y0:y1, x0:x1], value, where=mask[y0:y1, x0:x1])


def _boxes(masks: Sequence[np.ndarray | None], boxes: Sequence[PixelBox | None] | None,
           shape: tuple[int, int]) -> list[PixelBox | None]:
    """The given ``boxes`` (checked against ``masks``), else each mask's pixel box."""
    if boxes is None:
        return [pixel_box(_checked(mask, shape)) for mask in masks]
    if len(boxes) != len(masks):
        raise ValueError(f"{len(boxes)} boxes for {len(masks)} masks")
    return list(boxes)


def overlay_masks(image: np.ndarray, masks: Sequence[np.ndarray | None],
                  labels: Sequence[str] | None = None, alpha: float = 0.45,
                  boxes: Sequence[PixelBox | None] | None = None) -> np.ndarray:
    """A copy of ``image`` with every mask lightened (its hue kept: ``_tint``), outlined in its
    colour (``PALETTE`` in order) and labelled with ``labels[k]`` (default ``"1"``, ``"2"``...)
    in white on a dark box with a border of that colour: at a point inside the mask when the
    label fits there, else beside its box, never over a small object (``_draw_label``).

    The font scales with the image so labels stay legible once the image is downscaled to about
    1008 px; label boxes are kept inside the image. ``boxes`` as for ``label_image``.
    """
    _check_image(image)
    if labels is not None and len(labels) != len(masks):
        raise ValueError(f"{len(labels)} labels for {len(masks)} masks")
    out = image.copy()
    shape = image.shape[:2]
    boxes = _boxes(masks, boxes, shape)
    thickness = _line_thickness(shape)
    anchors: list[tuple[tuple[int, int], tuple[int, int, int]] | None] = []
    for index, (mask, box) in enumerate(zip(masks, boxes)):
        if box is None:
            anchors.append(None)
            continue
        color = palette_color(index)
        region = _crop(_checked(mask, shape), box)
        _tint(out, region, box, alpha)
        _outline(out, region, box, color, thickness)
        anchors.append((_label_anchor(region, box), color))
    font_scale, text_thickness = _font_metrics(shape)
    placed: list[tuple[int, int, int, int]] = []
    visible = [box for box in boxes if box is not None]
    for index, anchor in enumerate(anchors):
        if anchor is not None:
            text = str(index + 1) if labels is None else str(labels[index])
            _draw_label(out, text, anchor[0], anchor[1], font_scale, text_thickness, placed,
                        boxes[index], visible)
    return out


def overlay_image(image: np.ndarray, masks: Sequence[np.ndarray | None], max_side: int = 0,
                  boxes: Sequence[PixelBox | None] | None = None,
                  labels: Sequence[str] | None = None) -> np.ndarray:
    """``overlay_masks`` with the longest side at most ``max_side`` (0: the frame's own size).

    The frame is downscaled first (``downscale``) and each mask resized inside its box
    (``masks.resize_mask``), so drawing works on the small image: at 1920x1080 -> 960x540 this
    costs a fraction of drawing at full size and then shrinking the result."""
    _check_image(image)
    shape = image.shape[:2]
    small = downscale(image, max_side) if max_side > 0 else image
    if small is image:
        return overlay_masks(image, masks, labels, boxes=boxes)
    resized = [(None, None) if box is None
               else resize_mask_with_box(_checked(mask, shape), small.shape[:2], box)
               for mask, box in zip(masks, _boxes(masks, boxes, shape))]
    return overlay_masks(small, [mask for mask, _ in resized], labels,
                         boxes=[box for _, box in resized])


def single_mask_overlay(image: np.ndarray, mask: np.ndarray,
                        color: tuple[int, int, int] = (0, 255, 0),
                        alpha: float = 0.4) -> np.ndarray:
    """A copy of ``image`` with only ``mask`` highlighted (tint + thick outline), for the
    verifier; the rest of the frame is unchanged."""
    _check_image(image)
    out = image.copy()
    mask = _checked(mask, image.shape[:2])
    box = pixel_box(mask)
    if box is not None:
        region = _crop(mask, box)
        _tint(out, region, box, alpha)
        _outline(out, region, box, color, 2 * _line_thickness(image.shape[:2]) + 1)
    return out


def zoom_crop(image: np.ndarray, mask: np.ndarray, margin: float = 0.25, min_side: int = 64,
              min_output_side: int = 224, color: tuple[int, int, int] = (0, 255, 0),
              empty_max_side: int = 512) -> np.ndarray:
    """A crop around ``mask``'s bounding box, grown by ``margin`` of its size on each side and to
    at least ``min_side`` px, shifted/clipped to stay inside the image, with the mask's outline
    drawn. Small crops are enlarged (nearest neighbour) so their longest side is at least
    ``min_output_side`` (0 disables). An empty mask gives the whole image downscaled to
    ``empty_max_side``, without an outline."""
    _check_image(image)
    height, width = image.shape[:2]
    mask = _checked(mask, (height, width))
    box = pixel_box(mask)
    if box is None:
        return downscale(image, empty_max_side).copy()
    x0, y0, x1, y1 = box
    crop_x0, crop_x1 = _grow_span(x0, x1, margin, min_side, width)
    crop_y0, crop_y1 = _grow_span(y0, y1, margin, min_side, height)
    crop: np.ndarray = image[crop_y0:crop_y1, crop_x0:crop_x1]
    region: np.ndarray = np.ascontiguousarray(
        mask[crop_y0:crop_y1, crop_x0:crop_x1]).view(np.uint8)
    longest = max(crop.shape[:2])
    if min_output_side and longest < min_output_side:
        factor = min_output_side / longest
        size = (max(1, round(crop.shape[1] * factor)), max(1, round(crop.shape[0] * factor)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_LINEAR)
        region = cv2.resize(region, size, interpolation=cv2.INTER_NEAREST)
    else:
        crop = crop.copy()
    contours, _ = cv2.findContours(region, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(crop, contours, -1, color, max(1, round(max(crop.shape[:2]) / 160)),
                     cv2.LINE_8)
    return crop


# ----------------------------------------------------------------------------------- helpers


def _check_image(image: np.ndarray) -> None:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 \
            or image.shape[2] != 3:
        got = getattr(image, "shape", type(image).__name__)
        raise ValueError(f"expected an RGB uint8 image (H, W, 3), got {got}")


def _checked(mask: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    """``mask`` as a C-contiguous bool (H, W) array of the frame's shape (no copy when it
    already is one); a missing mask (None) is refused like any of another shape."""
    array = np.asarray(mask)
    if array.shape != tuple(shape):
        raise ValueError(f"mask shape {array.shape} does not match the image {tuple(shape)}")
    return np.ascontiguousarray(array if array.dtype == bool else array != 0)


def _crop(mask: np.ndarray, box: PixelBox) -> np.ndarray:
    x0, y0, x1, y1 = box
    return np.ascontiguousarray(mask[y0:y1, x0:x1]).view(np.uint8)


def _tint(out: np.ndarray, region: np.ndarray, box: tuple[int, int, int, int],
          alpha: float) -> None:
    """Lighten the mask's pixels towards white by ``alpha`` * ``WASH``: every pixel keeps its
    hue (a blend with white moves saturation and value only), so a blue object stays blue under
    any mask's colour (a blend with the palette colour turned it purple under a red one, for
    the model and the operator alike). The palette colour marks the mask by its outline and
    its label's border."""
    x0, y0, x1, y1 = box
    roi = out[y0:y1, x0:x1]
    strength = alpha * WASH
    keep = 1.0 - strength
    scaled = cv2.addWeighted(roi, keep, roi, 0.0, 0.0)
    tint = (255.0 * strength, 255.0 * strength, 255.0 * strength, 0.0)
    # Writes through the view into ``out``. OpenCV takes a 4-tuple as a Scalar; its stubs type
    # src2 as an array only.
    cv2.add(scaled, tint, dst=roi, mask=region)  # type: ignore[call-overload]


def _outline(out: np.ndarray, region: np.ndarray, box: tuple[int, int, int, int],
             color: tuple[int, int, int], thickness: int) -> None:
    contours, _ = cv2.findContours(region, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE,
                                   offset=(box[0], box[1]))
    cv2.drawContours(out, contours, -1, color, thickness, cv2.LINE_8)  # AA costs 4x at 1080p


def _label_anchor(region: np.ndarray, box: tuple[int, int, int, int]) -> tuple[int, int]:
    """A pixel inside the mask far from its edges: the maximum of the distance transform of a
    downscaled copy of the mask's bounding-box crop (in full-image coordinates)."""
    height, width = region.shape
    scale = min(1.0, _ANCHOR_GRID / max(height, width))
    small = region
    if scale < 1.0:
        small = cv2.resize(region, (max(1, round(width * scale)), max(1, round(height * scale))),
                           interpolation=cv2.INTER_AREA)
    small = np.pad((small > 0).view(np.uint8), 1)  # zero border: the crop edge counts as outside
    distance = cv2.distanceTransform(small, cv2.DIST_L2, 3)
    _, peak, _, (px, py) = cv2.minMaxLoc(distance)
    if peak > 0:
        x = min(width - 1, int((px - 1 + 0.5) / scale))
        y = min(height - 1, int((py - 1 + 0.5) / scale))
        if region[y, x]:
            return box[0] + x, box[1] + y
    # Thin or tiny mask: the mask pixel nearest to the middle of its bounding box.
    ys, xs = np.nonzero(region)
    nearest = int(np.argmin((xs - width / 2.0) ** 2 + (ys - height / 2.0) ** 2))
    return box[0] + int(xs[nearest]), box[1] + int(ys[nearest])


def _line_thickness(shape: tuple[int, int]) -> int:
    return max(1, round(max(shape) / 500))


def _font_metrics(shape: tuple[int, int]) -> tuple[float, int]:
    """A font scale giving ~16 px tall digits once the image is shown at ~1008 px (never below
    0.6, i.e. ~13 px, for small images) and a stroke thickness to match."""
    scale = max(0.6, 0.75 * max(shape) / _REFERENCE_SIDE)
    return scale, max(1, round(scale * 2.0))


def _draw_label(out: np.ndarray, text: str, anchor: tuple[int, int],
                color: tuple[int, int, int], font_scale: float, thickness: int,
                placed: list[tuple[int, int, int, int]],
                own: PixelBox | None = None, masks: Sequence[PixelBox] = ()) -> None:
    """Draw ``text`` on a dark box inside the image (appended to ``placed``), where it hides
    neither another label nor an object: centred near ``anchor`` inside its own mask's box
    ``own`` when it fits there with room to spare, else just outside that box (above, below,
    beside), so a label wider than a small object never covers it; no position covers more than
    half of any mask's box of ``masks`` (its own included) when one can avoid it."""
    height, width = out.shape[:2]
    (text_w, text_h), baseline = cv2.getTextSize(text, _FONT, font_scale, thickness)
    pad = max(2, round(text_h * 0.35))
    box_w = min(width, text_w + 2 * pad)
    box_h = min(height, text_h + baseline + 2 * pad)
    x0, y0 = _label_position(anchor, (box_w, box_h), (width, height), placed, own, masks)
    placed.append((x0, y0, x0 + box_w, y0 + box_h))
    x1, y1 = x0 + box_w - 1, y0 + box_h - 1
    cv2.rectangle(out, (x0, y0), (x1, y1), (20, 20, 20), cv2.FILLED)
    cv2.rectangle(out, (x0, y0), (x1, y1), color, max(1, thickness // 2))
    cv2.putText(out, text, (x0 + pad, y0 + pad + text_h), _FONT, font_scale, (255, 255, 255),
                thickness, cv2.LINE_AA)


_AROUND_ANCHOR = ((0, 0), (0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1),
                  (0, 2), (0, -2), (2, 0), (-2, 0))
LABEL_FITS = 0.9  # a label goes inside its mask's box when it takes at most this of each side
MAX_COVER = 0.5  # the most of a mask's box a label may cover when another place avoids it


def _label_position(anchor: tuple[int, int], size: tuple[int, int], image: tuple[int, int],
                    placed: Sequence[tuple[int, int, int, int]], own: PixelBox | None,
                    masks: Sequence[PixelBox]) -> tuple[int, int]:
    """The top-left corner of a label box of ``size`` (see ``_draw_label``): the first candidate
    that overlaps no placed label and covers at most ``MAX_COVER`` of every mask's box, else the
    candidate that does least harm (fewest labels overlapped, then the least covered)."""
    (box_w, box_h), (width, height) = size, image

    def clipped(x: float, y: float) -> tuple[int, int]:
        return int(np.clip(x, 0, width - box_w)), int(np.clip(y, 0, height - box_h))

    fits = own is None or (box_w <= LABEL_FITS * (own[2] - own[0])
                           and box_h <= LABEL_FITS * (own[3] - own[1]))
    candidates = []
    if fits:
        candidates += [clipped(anchor[0] - box_w // 2 + dx * (box_w + 1),
                               anchor[1] - box_h // 2 + dy * (box_h + 1))
                       for dx, dy in _AROUND_ANCHOR]
    if own is not None:  # just outside the mask's box: above, below, right, left, corners
        ox0, oy0, ox1, oy1 = own
        middle_x, middle_y = (ox0 + ox1 - box_w) / 2, (oy0 + oy1 - box_h) / 2
        gap = 2
        candidates += [clipped(x, y) for x, y in (
            (middle_x, oy0 - box_h - gap), (middle_x, oy1 + gap), (ox1 + gap, middle_y),
            (ox0 - box_w - gap, middle_y), (ox1 + gap, oy0 - box_h - gap),
            (ox0 - box_w - gap, oy0 - box_h - gap), (ox1 + gap, oy1 + gap),
            (ox0 - box_w - gap, oy1 + gap))]

    def harm(corner: tuple[int, int]) -> tuple[int, float]:
        x, y = corner
        labels = sum(x < px1 and px0 < x + box_w and y < py1 and py0 < y + box_h
                     for px0, py0, px1, py1 in placed)
        covered = max((_covered((x, y, x + box_w, y + box_h), box) for box in masks),
                      default=0.0)
        return labels, covered

    harms = [harm(corner) for corner in candidates]
    for corner, (labels, covered) in zip(candidates, harms):
        if labels == 0 and covered <= MAX_COVER:
            return corner
    return candidates[min(range(len(candidates)), key=lambda i: harms[i])]


def _covered(label: PixelBox, box: PixelBox) -> float:
    """The fraction of ``box`` that ``label`` covers."""
    w = min(label[2], box[2]) - max(label[0], box[0])
    h = min(label[3], box[3]) - max(label[1], box[1])
    area = max(1, (box[2] - box[0]) * (box[3] - box[1]))
    return max(0, w) * max(0, h) / area


def _grow_span(start: int, stop: int, margin: float, min_side: int,
               limit: int) -> tuple[int, int]:
    """[start, stop) grown by ``margin`` of its length on each side and to at least
    ``min_side``, then shifted (or clipped when the image is smaller) to fit in [0, limit)."""
    length = stop - start
    target = max(length + 2 * int(round(length * margin)), min_side, length)
    new_start = start - (target - length) // 2
    new_stop = new_start + target
    if new_start < 0:
        new_stop, new_start = new_stop - new_start, 0
    if new_stop > limit:
        new_start, new_stop = max(0, new_start - (new_stop - limit)), limit
    return new_start, new_stop
