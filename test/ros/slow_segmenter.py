"""A segmenter plugin for the node tests: the colour segmenter, made slow.

Used as ``segmenter.backend: test.ros.slow_segmenter:factory`` so a query is still running when
the next one (preemption, queueing) or a deactivate arrives. The delay comes from the environment
variable ``SLOW_SEGMENTER_S`` (default 1.0 s); ``SLOW_SEGMENTER_LOAD_S`` (default 0) makes
``factory()`` slow too, like loading SAM 3.

``test.ros.slow_segmenter:slow_word_factory`` is slow only for text prompts holding the word
``slow`` (the offline planner keeps it: "the slow blue object" -> "slow blue object"), so that
a node can answer, follow and serve goals at full speed and still be caught inside a long
segmenter call (bench/node_exit.py).
"""

from __future__ import annotations

import os
import time

from sam3_agent_ros.segmenters.color import ColorSegmenter

SLOW_WORD = "slow"


class SlowSegmenter:
    def __init__(self, delay_s: float, only_word: str | None = None):
        self.delay_s = delay_s
        self.only_word = only_word
        self.inner = ColorSegmenter()

    def segment(self, image, text_prompt):
        if self.only_word is None or self.only_word in text_prompt.split():
            time.sleep(self.delay_s)
        return self.inner.segment(image, text_prompt)


def _delay_s() -> float:
    return float(os.environ.get("SLOW_SEGMENTER_S", "1.0"))


def factory() -> SlowSegmenter:
    time.sleep(float(os.environ.get("SLOW_SEGMENTER_LOAD_S", "0")))
    return SlowSegmenter(_delay_s())


def slow_word_factory() -> SlowSegmenter:
    return SlowSegmenter(_delay_s(), only_word=SLOW_WORD)
