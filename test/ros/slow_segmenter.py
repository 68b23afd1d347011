"""A segmenter plugin for the node tests: the colour segmenter, made slow.

Used as ``segmenter.backend: test.ros.slow_segmenter:factory`` so a query is still running when
the next one (preemption, queueing) or a deactivate arrives. The delay comes from the environment
variable ``SLOW_SEGMENTER_S`` (default 1.0 s); ``SLOW_SEGMENTER_LOAD_S`` (default 0) makes
``factory()`` slow too, like loading SAM 3.
"""

from __future__ import annotations

import os
import time

from sam3_agent_ros.segmenters.color import ColorSegmenter


class SlowSegmenter:
    def __init__(self, delay_s: float):
        self.delay_s = delay_s
        self.inner = ColorSegmenter()

    def segment(self, image, text_prompt):
        time.sleep(self.delay_s)
        return self.inner.segment(image, text_prompt)


def factory() -> SlowSegmenter:
    time.sleep(float(os.environ.get("SLOW_SEGMENTER_LOAD_S", "0")))
    return SlowSegmenter(float(os.environ.get("SLOW_SEGMENTER_S", "1.0")))
