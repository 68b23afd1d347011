"""The palette of the demo backends: each colour, painted on the table, is found by the colour
segmenter under its own name, and under no other name."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.palette import COLORS, TABLE_COLOR
from sam3_agent_ros.segmenters.color import ColorSegmenter


def _patch_on_table(rgb: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    image = np.empty((240, 320, 3), np.uint8)
    image[:] = TABLE_COLOR
    patch = np.zeros(image.shape[:2], bool)
    patch[90:150, 130:190] = True
    image[patch] = rgb
    return image, patch


@pytest.mark.parametrize("name", sorted(COLORS))
def test_each_colour_is_found_under_its_own_name_only(name):
    image, patch = _patch_on_table(COLORS[name])
    segmenter = ColorSegmenter()
    found = segmenter.segment(image, name).masks
    assert len(found) == 1, name
    assert (found[0] & patch).sum() / (found[0] | patch).sum() > 0.95, name
    for other in sorted(set(COLORS) - {name}):
        assert len(segmenter.segment(image, other).masks) == 0, (name, other)
