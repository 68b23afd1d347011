"""Test segmenters: rectangles per phrase, with call counting; and broken ones."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Segmentation:
    masks: np.ndarray
    scores: np.ndarray
    boxes: np.ndarray


class BoxSegmenter:
    """``{"phrase": [(x0, y0, x1, y1, score), ...]}``; unknown phrases find nothing."""

    def __init__(self, boxes_by_phrase: dict[str, list[tuple]]):
        self.boxes_by_phrase = boxes_by_phrase
        self.calls: list[str] = []

    def segment(self, image: np.ndarray, text_prompt: str) -> Segmentation:
        self.calls.append(text_prompt)
        height, width = image.shape[:2]
        entries = self.boxes_by_phrase.get(text_prompt, [])
        masks = np.zeros((len(entries), height, width), bool)
        for k, (x0, y0, x1, y1, _) in enumerate(entries):
            masks[k, y0:y1, x0:x1] = True
        scores = np.array([e[4] for e in entries], float)
        boxes = np.array([e[:4] for e in entries], float).reshape(-1, 4)
        return Segmentation(masks, scores, boxes)


class RaisingSegmenter:
    def segment(self, image, text_prompt):
        raise RuntimeError("CUDA out of memory (simulated)")


class WrongShapeSegmenter:
    def segment(self, image, text_prompt):
        return Segmentation(np.zeros((1, 5, 5), bool), np.ones(1), np.zeros((1, 4)))


def factory() -> BoxSegmenter:
    """Plugin form ``test.fakes.segmenters:factory`` (CONTRACTS §3)."""
    return BoxSegmenter({"thing": [(10, 10, 30, 30, 0.9)]})


def broken_factory():
    raise RuntimeError("model file corrupt (simulated)")
