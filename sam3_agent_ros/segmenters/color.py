"""DEMO/TEST segmenter backend (``segmenter.backend: color``): no model, no GPU.

It understands just enough of a phrase to drive the agent loop offline on simple tabletop
images (``sam3_agent_demo.scene``), and it is NOT a general segmenter:

- colour words ("red", "blue", "grey", ...) select pixels by HSV range (hue is insensitive to
  brightness, so a mild lighting gradient does not matter; red wraps around hue 0/180);
  white/black/gray/brown are judged against the estimated table background;
- generic nouns ("object", "thing", "item", "everything", ...) or a shape word without a colour
  select every salient blob: pixels far from a smooth background model (a robust quadratic fit
  of the image's colour over (u, v), so a lighting gradient is absorbed);
- shape words ("ball", "box", "triangle", "oval", ...) keep only blobs of that shape; when none
  matches, the answer is no masks;
- a phrase with neither a colour, a generic noun nor a shape word ("unicorn") gives no masks.

One mask per connected component (after a small morphological open/close) above a minimum area.
Scores are deterministic, in [0.5, 1), from the blob's solidity and colour strength; the output is
sorted by descending score. 640x480 takes a few milliseconds.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass

import cv2
import numpy as np

from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import Detections

# Hue ranges on OpenCV's 0..179 scale, and the minimum saturation / value of a chromatic pixel.
_HUE_RANGES: dict[str, tuple[tuple[int, int], ...]] = {
    "red": ((0, 7), (170, 179)),
    "orange": ((8, 20),),
    "yellow": ((21, 35),),
    "green": ((36, 80),),
    "cyan": ((81, 96),),
    "blue": ((97, 127),),
    "purple": ((128, 147),),
    "pink": ((148, 169),),
}
_MIN_SATURATION = 70
_MIN_VALUE = 40
_ORANGE_MIN_VALUE = 150  # darker orange hues are "brown"
_ACHROMATIC_MAX_SATURATION = 60
_FOREGROUND_DISTANCE = 32  # max per-channel |pixel - background| of a salient pixel

_COLOR_WORDS: dict[str, str] = {
    "red": "red", "crimson": "red", "scarlet": "red",
    "orange": "orange",
    "yellow": "yellow", "gold": "yellow", "golden": "yellow",
    "green": "green", "lime": "green",
    "cyan": "cyan", "turquoise": "cyan", "teal": "cyan", "aqua": "cyan",
    "blue": "blue", "navy": "blue",
    "purple": "purple", "violet": "purple", "lilac": "purple", "lavender": "purple",
    "pink": "pink", "magenta": "pink", "fuchsia": "pink",
    "white": "white",
    "black": "black",
    "gray": "gray", "grey": "gray", "silver": "gray",
    "brown": "brown",
}
_GENERIC_WORDS = frozenset({
    "object", "thing", "item", "everything", "anything", "something", "stuff", "all", "piece",
    "shape", "blob", "toy",
})
_SHAPE_WORDS: dict[str, frozenset[str]] = {
    **{w: frozenset({"circle"}) for w in (
        "ball", "circle", "circular", "sphere", "disc", "disk", "cylinder", "can", "coin", "dot")},
    **{w: frozenset({"circle", "ellipse"}) for w in ("round", "rounded")},
    **{w: frozenset({"ellipse"}) for w in ("oval", "ellipse", "elliptical", "egg")},
    **{w: frozenset({"rectangle"}) for w in (
        "box", "cube", "square", "block", "rectangle", "rectangular", "brick", "cuboid")},
    **{w: frozenset({"triangle"}) for w in (
        "triangle", "triangular", "prism", "pyramid", "wedge")},
}
_VOCABULARY = set(_COLOR_WORDS) | _GENERIC_WORDS | set(_SHAPE_WORDS)


@dataclass(frozen=True)
class PhraseQuery:
    """What the colour segmenter understood of a text prompt."""

    colors: frozenset[str] = frozenset()
    shapes: frozenset[str] | None = None  # None: any shape
    generic: bool = False

    @property
    def selects_anything(self) -> bool:
        return bool(self.colors) or self.generic or self.shapes is not None


def _normalise_word(word: str) -> str:
    if word in _VOCABULARY:
        return word
    for suffix in ("es", "s"):
        if word.endswith(suffix) and word[: -len(suffix)] in _VOCABULARY:
            return word[: -len(suffix)]
    return word


def parse_phrase(text_prompt: str) -> PhraseQuery:
    """Pure: the colour, shape and generic words of a phrase (plurals accepted)."""
    words = [_normalise_word(w) for w in re.findall(r"[a-z]+", text_prompt.lower())]
    colors = frozenset(_COLOR_WORDS[w] for w in words if w in _COLOR_WORDS)
    shape_sets = [_SHAPE_WORDS[w] for w in words if w in _SHAPE_WORDS]
    shapes = frozenset().union(*shape_sets) if shape_sets else None
    generic = any(w in _GENERIC_WORDS for w in words)
    return PhraseQuery(colors=colors, shapes=shapes, generic=generic)


class _ImageAnalysis:
    """Per-image work shared by the prompts of one query; the background model is computed only
    when a phrase needs it (generic nouns, white/black/gray)."""

    def __init__(self, image: np.ndarray):
        self.image = image  # the analysed object: identity is the cache key
        self.hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
        self._background: tuple[np.ndarray, np.ndarray] | None = None

    def _background_terms(self) -> tuple[np.ndarray, np.ndarray]:
        if self._background is None:
            background = _background_model(self.image)
            distance = _max_channel(cv2.absdiff(self.image, background))
            brighter = self.hsv[..., 2] > _max_channel(background)
            self._background = (distance, brighter)
        return self._background

    @property
    def background_distance(self) -> np.ndarray:
        """uint8 (H, W): max per-channel |pixel - background|."""
        return self._background_terms()[0]

    @property
    def brighter_than_background(self) -> np.ndarray:
        return self._background_terms()[1]


def _background_model(rgb: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3): a smooth (quadratic in u, v) model of the background colour, fitted
    robustly on a downscaled copy so that objects (outliers) do not pull it."""
    height, width = rgb.shape[:2]
    factor = max(1, math.ceil(max(height, width) / 80))  # an integer factor keeps INTER_AREA fast
    small_w, small_h = max(2, width // factor), max(2, height // factor)
    small = cv2.resize(rgb, (small_w, small_h), interpolation=cv2.INTER_AREA)
    colours = small.reshape(-1, 3).astype(np.float64)
    v, u = np.mgrid[0:small_h, 0:small_w]
    u = u.reshape(-1) / small_w - 0.5
    v = v.reshape(-1) / small_h - 0.5
    design = np.stack([np.ones_like(u), u, v, u * u, u * v, v * v], axis=1)
    inliers = np.ones(len(colours), bool)
    coeffs = np.zeros((6, 3))
    for _ in range(4):
        count = int(inliers.sum())
        if count < 12:
            break
        _, coeffs = cv2.solve(design[inliers], colours[inliers], flags=cv2.DECOMP_NORMAL)
        residual = np.abs(colours - design @ coeffs).max(axis=1)
        spread = 1.4826 * float(np.partition(residual[inliers], count // 2)[count // 2]) + 1e-6
        inliers = residual <= max(3.0 * spread, 6.0)
    fitted = np.clip(design @ coeffs, 0, 255).reshape(small_h, small_w, 3).astype(np.float32)
    model = cv2.resize(fitted, (width, height), interpolation=cv2.INTER_LINEAR)
    return cv2.convertScaleAbs(model)  # rounds and saturates to uint8


def _max_channel(image: np.ndarray) -> np.ndarray:
    return cv2.max(cv2.max(image[..., 0], image[..., 1]), image[..., 2])


def _color_pixels(analysis: _ImageAnalysis, color: str) -> np.ndarray:
    hsv = analysis.hsv
    hue, sat, val = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    if color in _HUE_RANGES:
        pixels: np.ndarray = np.zeros(hue.shape, np.uint8)
        for low, high in _HUE_RANGES[color]:
            pixels |= cv2.inRange(hsv, (low, _MIN_SATURATION, _MIN_VALUE), (high, 255, 255))
        pixels = pixels.astype(bool)
        if color == "orange":
            pixels &= val >= _ORANGE_MIN_VALUE
        return pixels
    if color == "brown":
        return ((hue >= 5) & (hue <= 25) & (sat >= 90) & (val >= _MIN_VALUE)
                & (val < _ORANGE_MIN_VALUE))
    salient = analysis.background_distance > _FOREGROUND_DISTANCE
    achromatic = sat < _ACHROMATIC_MAX_SATURATION
    if color == "white":
        return salient & achromatic & analysis.brighter_than_background & (val >= 160)
    if color == "black":
        return salient & (val < 70)
    if color == "gray":
        return salient & achromatic & (val >= 70) & ~((val >= 160)
                                                      & analysis.brighter_than_background)
    raise ValueError(f"unknown colour {color!r}")


def _classify_shape(component: np.ndarray) -> tuple[str, float]:
    """(shape name, solidity) of one blob given as a padded uint8 crop."""
    contours, _ = cv2.findContours(component, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    contour = max(contours, key=cv2.contourArea)
    area = cv2.contourArea(contour)
    perimeter = cv2.arcLength(contour, True)
    if area <= 0 or perimeter <= 0:
        return "other", 0.0
    hull_area = cv2.contourArea(cv2.convexHull(contour))
    solidity = min(1.0, area / hull_area) if hull_area > 0 else 0.0
    (_, _), (rect_w, rect_h), _ = cv2.minAreaRect(contour)
    extent = area / max(rect_w * rect_h, 1e-6)
    aspect = max(rect_w, rect_h) / max(min(rect_w, rect_h), 1e-6)
    circularity = 4.0 * math.pi * area / (perimeter * perimeter)
    vertices = len(cv2.approxPolyDP(contour, 0.04 * perimeter, True))
    if solidity < 0.85:
        return "other", solidity
    if vertices == 3 or extent < 0.62:
        return "triangle", solidity
    if extent >= 0.88 and vertices == 4:
        return "rectangle", solidity
    if circularity >= 0.70 and 0.70 <= extent < 0.88:
        return ("circle" if aspect < 1.2 else "ellipse"), solidity
    return "other", solidity


class ColorSegmenter:
    """DEMO/TEST backend: colour words -> HSV thresholds -> connected components.

    ``min_area_fraction``: blobs smaller than this fraction of the image are dropped (and never
    fewer than ``min_area_px`` pixels).
    """

    def __init__(self, min_area_fraction: float = 0.0005, min_area_px: int = 16):
        self.min_area_fraction = float(min_area_fraction)
        self.min_area_px = int(min_area_px)
        self._lock = threading.Lock()
        self._cache: _ImageAnalysis | None = None

    def segment(self, image: np.ndarray, text_prompt: str) -> Detections:
        image = _as_rgb(image)
        if not isinstance(text_prompt, str):
            raise SegmenterError(f"text_prompt must be a string, got {type(text_prompt).__name__}",
                                 kind=SegmenterError.BAD_INPUT)
        height, width = image.shape[:2]
        query = parse_phrase(text_prompt)
        if not query.selects_anything:
            return Detections.empty(height, width)
        analysis = self._analysis(image)
        if query.colors:
            pixels = np.zeros((height, width), bool)
            for color in sorted(query.colors):
                pixels |= _color_pixels(analysis, color)
            strength = analysis.hsv[..., 1]  # saturation
        else:
            pixels = analysis.background_distance > _FOREGROUND_DISTANCE
            strength = np.minimum(analysis.background_distance.astype(np.uint16) * 2, 255)
        return self._components(pixels, strength, query)

    def segment_many(self, image: np.ndarray, text_prompts: list[str]) -> list[Detections]:
        """Every phrase on one frame; the per-image analysis (HSV, background model) is shared,
        as it is between the calls of one query."""
        image = _as_rgb(image)
        return [self.segment(image, prompt) for prompt in text_prompts]

    def _analysis(self, image: np.ndarray) -> _ImageAnalysis:
        with self._lock:
            if self._cache is None or self._cache.image is not image:
                self._cache = _ImageAnalysis(image)
            return self._cache

    def _components(self, pixels: np.ndarray, strength: np.ndarray,
                    query: PhraseQuery) -> Detections:
        height, width = pixels.shape
        size = max(3, (round(min(height, width) / 160) // 2) * 2 + 1)
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
        binary = cv2.morphologyEx(pixels.view(np.uint8), cv2.MORPH_OPEN, kernel)
        binary = cv2.morphologyEx(binary, cv2.MORPH_CLOSE, kernel, iterations=2)
        count, labels, stats, _ = cv2.connectedComponentsWithStats(binary, connectivity=8)
        min_area = max(self.min_area_px, self.min_area_fraction * height * width)
        found: list[tuple[float, int, np.ndarray, tuple[float, ...]]] = []
        for index in range(1, count):
            x, y, w, h, area = (int(v) for v in stats[index])
            if area < min_area:
                continue
            crop = labels[y:y + h, x:x + w] == index
            padded = np.pad(crop, 1).view(np.uint8)
            shape, solidity = _classify_shape(padded)
            if query.shapes is not None and shape not in query.shapes:
                continue
            color_strength = float(strength[y:y + h, x:x + w][crop].mean()) / 255.0
            quality = 0.5 * solidity + 0.5 * min(1.0, color_strength)
            score = 0.5 + 0.49 * min(1.0, max(0.0, quality))
            mask = np.zeros((height, width), bool)
            mask[y:y + h, x:x + w] = crop
            found.append((round(score, 6), area, mask, (x, y, x + w, y + h)))
        if not found:
            return Detections.empty(height, width)
        found.sort(key=lambda item: (-item[0], -item[1]))
        return Detections(masks=np.stack([item[2] for item in found]),
                          scores=np.array([item[0] for item in found], np.float64),
                          boxes=np.array([item[3] for item in found], np.float64))


def _as_rgb(image: np.ndarray) -> np.ndarray:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
        raise SegmenterError("the colour segmenter needs an RGB uint8 numpy image",
                             kind=SegmenterError.BAD_INPUT)
    if image.ndim == 2:
        return np.ascontiguousarray(np.repeat(image[..., None], 3, axis=2))
    if image.ndim != 3 or image.shape[2] not in (3, 4) or min(image.shape[:2]) < 2:
        raise SegmenterError(f"the colour segmenter needs an (H, W, 3) image, got {image.shape}",
                             kind=SegmenterError.BAD_INPUT)
    if image.shape[2] == 4:
        return np.ascontiguousarray(image[..., :3])
    return image if image.flags.c_contiguous else np.ascontiguousarray(image)


def make_color_segmenter() -> ColorSegmenter:
    """Factory in the plugin form ``sam3_agent_ros.segmenters.color:make_color_segmenter``."""
    return ColorSegmenter()
