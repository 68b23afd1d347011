"""The core's ports: what the agent loop needs from an LLM and from a segmenter.

Backends (``llm/``, ``segmenters/``, plugins) implement these protocols; the core depends on
nothing else of theirs. Every backend's ``segment`` returns a ``Detections``; a plugin
(interface §3) may return any object with ``masks``/``scores``/``boxes``, so the core passes every
output through ``Detections.coerce`` before using it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.types import LlmReply, Mask, Message


class LlmClient(Protocol):
    """``complete`` sends one Chat Completions request and returns the reply as the server sent
    it (content, reasoning, tool calls, finish reason, usage): interpreting it is the core's job.

    ``tools`` (native function calling, ``llm.protocol: tools``) is a list of OpenAI tool
    definitions to send with the request, or None. It raises ``LlmError`` for every failure of
    the endpoint (after its own retries) and returns early with ``LlmError`` when ``cancel`` is
    set or its deadline passes. Images in ``messages`` are numpy arrays (``ImagePart``);
    converting them to data URLs is the client's job."""

    def complete(self, messages: list[Message], cancel: CancelToken,
                 tools: list[dict[str, Any]] | None = None) -> LlmReply: ...


_FIELDS = ("masks", "scores", "boxes")  # what a segmenter's output must have


@dataclass(frozen=True)
class Detections:
    """What a segmenter found for one phrase on one frame.

    ``masks`` (N, H, W) bool, ``scores`` (N,) float64, ``boxes`` (N, 4) float64 x0, y0, x1, y1 in
    pixels. ``untrained_weights``: the model that produced them had random weights (SAM 3's
    ``segmenter.random_weights``): the masks mean nothing, and the result says so."""

    masks: np.ndarray
    scores: np.ndarray
    boxes: np.ndarray
    untrained_weights: bool = False

    @classmethod
    def empty(cls, height: int, width: int, *, untrained_weights: bool = False) -> Detections:
        return cls(np.zeros((0, height, width), bool), np.zeros(0), np.zeros((0, 4)),
                   untrained_weights)

    @classmethod
    def coerce(cls, raw: object, height: int, width: int) -> Detections:
        """Any segmenter output (a ``Detections``, or a plugin's object with ``masks``,
        ``scores``, ``boxes``) checked against an (height, width) frame: bool masks, float64
        scores and boxes, ``(N, 1, H, W)`` masks squeezed.

        Anything malformed raises ``SegmenterError`` with what was wrong (a system error: the
        query ends ``failed``; the model cannot fix it)."""
        try:
            # A plugin's output is any object with these attributes: looked up by name.
            raw_masks, raw_scores, raw_boxes = (getattr(raw, name) for name in _FIELDS)
            masks = np.asarray(raw_masks)
            scores = np.asarray(raw_scores, dtype=np.float64).reshape(-1)
            boxes = np.asarray(raw_boxes, dtype=np.float64)
        except AttributeError as exc:
            raise SegmenterError(f"segmenter output lacks masks/scores/boxes: {exc}",
                                 kind=SegmenterError.MALFORMED) from None
        except (TypeError, ValueError) as exc:
            raise SegmenterError(f"segmenter output is not numeric: {exc}",
                                 kind=SegmenterError.MALFORMED) from None
        untrained = isinstance(raw, Detections) and raw.untrained_weights
        count = scores.shape[0]
        if masks.size == 0 and count == 0:
            return cls.empty(height, width, untrained_weights=untrained)
        if masks.ndim == 4 and masks.shape[1] == 1:  # (N, 1, H, W) as SAM 3 returns
            masks = masks[:, 0]
        if masks.ndim != 3 or masks.shape[0] != count or masks.shape[1:] != (height, width):
            raise SegmenterError(
                f"segmenter masks have shape {masks.shape}, expected ({count}, {height}, {width})",
                kind=SegmenterError.MALFORMED)
        if boxes.shape != (count, 4):
            raise SegmenterError(f"segmenter boxes have shape {boxes.shape}, expected ({count}, 4)",
                                 kind=SegmenterError.MALFORMED)
        if not np.all(np.isfinite(scores)):
            raise SegmenterError("segmenter scores contain NaN or inf",
                                 kind=SegmenterError.MALFORMED)
        return cls(masks.astype(bool, copy=False), scores, boxes, untrained)

    def to_masks(self) -> list[Mask]:
        """One ``Mask`` per detection, by descending score (ties keep their order)."""
        order = np.argsort(-self.scores, kind="stable")
        return [Mask.from_array(self.masks[i], self.scores[i], tuple(self.boxes[i]))
                for i in order]


class Logger(Protocol):
    """Where the core and the pipeline write their lines: rclpy's node logger or a
    ``logging.Logger`` (positional message only, so both fit)."""

    def info(self, message: str, /) -> object: ...

    def warning(self, message: str, /) -> object: ...


class HasMask(Protocol):
    """Anything that carries one (H, W) bool mask array (``core.types.Mask``, a view)."""

    @property
    def mask(self) -> np.ndarray: ...


class Segmenter(Protocol):
    """``segment(image, text_prompt)``: ``image`` is RGB (H, W, 3) uint8 and stays the same object
    for a whole query (backends may cache per-image work keyed on it); returns the
    ``Detections`` for the phrase. Failures raise ``SegmenterError``.
    Optional: ``close()`` frees resources; ``segment_many(image, text_prompts)`` segments one
    frame with several phrases at once (one ``Detections`` per phrase, in order) sharing the
    per-frame work (SAM 3: one image-backbone pass); ``segment_prompts`` uses it when present."""

    def segment(self, image: np.ndarray, text_prompt: str) -> Detections: ...


def segment_prompts(segmenter: Segmenter, image: np.ndarray,
                    text_prompts: Sequence[str]) -> list[Detections]:
    """Every phrase of ``text_prompts`` on one frame: the backend's ``segment_many`` when it has
    one, else ``segment`` once per phrase on the same ``image`` object (so per-frame caches
    still hold). Each output is checked (``Detections.coerce``); a wrong count or a malformed
    output raises ``SegmenterError``."""
    height, width = image.shape[:2]
    many = getattr(segmenter, "segment_many", None)
    if callable(many) and text_prompts:
        raw = list(many(image, list(text_prompts)))
        if len(raw) != len(text_prompts):
            raise SegmenterError(f"segment_many returned {len(raw)} results for "
                                 f"{len(text_prompts)} prompts", kind=SegmenterError.MALFORMED)
    else:
        raw = [segmenter.segment(image, prompt) for prompt in text_prompts]
    return [Detections.coerce(item, height, width) for item in raw]
