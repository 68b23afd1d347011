"""Test segmenters: rectangles per phrase, with call counting; and broken ones."""

from __future__ import annotations

import numpy as np

from sam3_agent_ros.core.ports import Detections


class BoxSegmenter:
    """``{"phrase": [(x0, y0, x1, y1, score), ...]}``; unknown phrases find nothing.
    ``untrained_weights``: answer as a model with random weights (SAM 3's flag)."""

    def __init__(self, boxes_by_phrase: dict[str, list[tuple]], untrained_weights: bool = False):
        self.boxes_by_phrase = boxes_by_phrase
        self.untrained_weights = untrained_weights
        self.calls: list[str] = []

    def segment(self, image: np.ndarray, text_prompt: str) -> Detections:
        self.calls.append(text_prompt)
        height, width = image.shape[:2]
        entries = self.boxes_by_phrase.get(text_prompt, [])
        masks = np.zeros((len(entries), height, width), bool)
        for k, (x0, y0, x1, y1, _) in enumerate(entries):
            masks[k, y0:y1, x0:x1] = True
        scores = np.array([e[4] for e in entries], float)
        boxes = np.array([e[:4] for e in entries], float).reshape(-1, 4)
        return Detections(masks, scores, boxes, self.untrained_weights)


class PluginOutput:
    """What a plugin (interface §3) may return: any object with masks, scores and boxes."""

    def __init__(self, masks, scores, boxes):
        self.masks, self.scores, self.boxes = masks, scores, boxes


class PluginBoxSegmenter(BoxSegmenter):
    """``BoxSegmenter`` answering in a plugin's own type, with plain lists for scores and boxes."""

    def segment(self, image: np.ndarray, text_prompt: str) -> PluginOutput:
        found = super().segment(image, text_prompt)
        return PluginOutput(found.masks, found.scores.tolist(), found.boxes.tolist())


class RaisingSegmenter:
    def segment(self, image, text_prompt):
        raise RuntimeError("CUDA out of memory (simulated)")


class WrongShapeSegmenter:
    def segment(self, image, text_prompt):
        return Detections(np.zeros((1, 5, 5), bool), np.ones(1), np.zeros((1, 4)))


def factory() -> BoxSegmenter:
    """Plugin form ``test.fakes.segmenters:factory`` (interface §3)."""
    return BoxSegmenter({"thing": [(10, 10, 30, 30, 0.9)]})


def broken_factory():
    raise RuntimeError("model file corrupt (simulated)")


BREAK_OUT_VARIABLE = "SAM3_TEST_BREAK_OUT_DIR"


class OutBreakingSegmenter:
    """The colour segmenter that, on each call, puts a file where the folder named by
    ``$SAM3_TEST_BREAK_OUT_DIR`` was (a folder removed, a disk gone mid-run): writing ``--out``
    then fails after the query has run."""

    def __init__(self):
        from sam3_agent_ros.segmenters.color import ColorSegmenter

        self.inner = ColorSegmenter()

    def segment(self, image, text_prompt):
        import os
        import shutil
        from pathlib import Path

        folder = Path(os.environ[BREAK_OUT_VARIABLE])
        if folder.is_dir():
            shutil.rmtree(folder)
            folder.write_text("not a folder any more\n")
        return self.inner.segment(image, text_prompt)


def out_breaking_factory() -> OutBreakingSegmenter:
    """Plugin form ``test.fakes.segmenters:out_breaking_factory``."""
    return OutBreakingSegmenter()
