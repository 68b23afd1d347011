"""The demos' listener: the pure helpers for what it receives (the node itself: test_harness.py
and the demo runs)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sam3_agent_demo.listener import header_stamp_ns, mono8_to_mask


def test_mono8_masks_drop_the_row_padding():
    padded = np.array([[0, 255, 0, 9], [255, 0, 0, 9]], np.uint8)  # step 4, width 3
    assert mono8_to_mask(2, 3, 4, padded.tobytes()).tolist() == [[False, True, False],
                                                                 [True, False, False]]


def test_header_stamps_in_nanoseconds():
    header = SimpleNamespace(stamp=SimpleNamespace(sec=1_700_000_002, nanosec=50_000_000))
    assert header_stamp_ns(header) == 1_700_000_002_050_000_000
