"""What the slow_sam3 tests share: the frame they segment and the configuration of the model
(random weights, CPU, every detection kept). The fixtures are in conftest.py."""

from __future__ import annotations

import dataclasses

import numpy as np

H, W = 96, 128


def synthetic_frame() -> np.ndarray:
    image = np.full((H, W, 3), 200, np.uint8)
    image[10:50, 10:50] = (220, 30, 30)
    image[40:90, 70:120] = (30, 40, 210)
    return image


FRAME = synthetic_frame()  # one array for the session: its features stay cached between tests


def sam3_cpu_config():
    from sam3_agent_ros.config import SegmenterConfig

    return dataclasses.replace(SegmenterConfig(), backend="sam3", random_weights=True,
                               device="cpu", confidence_threshold=0.0, min_mask_area=1,
                               overlap_threshold=1.0)
