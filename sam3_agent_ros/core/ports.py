"""The core's ports: what the agent loop needs from an LLM and from a segmenter.

Backends (``llm/``, ``segmenters/``, plugins) implement these protocols; the core depends on
nothing else of theirs. ``to_masks`` is the one gate every segmenter output passes through.
"""

from __future__ import annotations

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
                 tools: list[dict] | None = None) -> LlmReply: ...


class Segmenter(Protocol):
    """``segment(image, text_prompt)``: ``image`` is RGB (H, W, 3) uint8 and stays the same object
    for a whole query (backends may cache per-image work keyed on it). Returns any object with
    ``masks`` (N, H, W) bool, ``scores`` (N,) float, ``boxes`` (N, 4) float x0, y0, x1, y1 pixels.
    Optional: ``close()`` frees resources."""

    def segment(self, image: np.ndarray, text_prompt: str) -> Any: ...


def to_masks(raw: Any, height: int, width: int) -> list[Mask]:
    """Validate a segmenter's duck-typed output and return masks sorted by descending score.

    Anything malformed raises ``SegmenterError`` with what was wrong (a system error: the query
    ends ``failed``; the model cannot fix it).
    """
    try:
        masks = np.asarray(raw.masks)
        scores = np.asarray(raw.scores, dtype=np.float64).reshape(-1)
        boxes = np.asarray(raw.boxes, dtype=np.float64)
    except AttributeError as exc:
        raise SegmenterError(f"segmenter output lacks masks/scores/boxes: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise SegmenterError(f"segmenter output is not numeric: {exc}") from None
    count = scores.shape[0]
    if masks.size == 0 and count == 0:
        return []
    if masks.ndim == 4 and masks.shape[1] == 1:  # (N, 1, H, W) as SAM 3 returns
        masks = masks[:, 0]
    if masks.ndim != 3 or masks.shape[0] != count or masks.shape[1:] != (height, width):
        raise SegmenterError(
            f"segmenter masks have shape {masks.shape}, expected ({count}, {height}, {width})")
    if boxes.shape != (count, 4):
        raise SegmenterError(f"segmenter boxes have shape {boxes.shape}, expected ({count}, 4)")
    if not np.all(np.isfinite(scores)):
        raise SegmenterError("segmenter scores contain NaN or inf")
    masks = masks.astype(bool, copy=False)
    order = np.argsort(-scores, kind="stable")
    return [Mask.from_array(masks[i], scores[i], tuple(boxes[i])) for i in order]
