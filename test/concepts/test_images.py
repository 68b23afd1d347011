"""The label image (mono16, pixel = id) and the overlay of a concept pass."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.concepts.images import label_image, overlay
from sam3_agent_ros.concepts.types import ConceptDetection


def detection(id_: int, box: tuple[int, int, int, int], score: float,
              concept: str = "cup") -> ConceptDetection:
    mask = np.zeros((40, 60), bool)
    x0, y0, x1, y1 = box
    mask[y0:y1, x0:x1] = True
    return ConceptDetection(concept, id_, mask, score, tuple(map(float, box)),
                            ((x0 + x1) / 2, (y0 + y1) / 2), int(mask.sum()))


def test_labels_hold_the_ids_and_the_higher_score_wins_an_overlap():
    low = detection(300, (0, 0, 20, 20), 0.6)
    high = detection(40000, (10, 10, 30, 30), 0.9, "bottle")
    labels = label_image([high, low], (40, 60))
    assert labels.dtype == np.uint16
    assert labels[5, 5] == 300 and labels[25, 25] == 40000
    assert labels[15, 15] == 40000  # overlap: the higher score
    assert labels[35, 55] == 0
    with pytest.raises(ValueError):
        label_image([low], (20, 20))


def test_the_overlay_draws_every_instance_on_a_copy():
    image = np.full((40, 60, 3), 200, np.uint8)
    drawn = overlay(image, [detection(2, (0, 0, 20, 20), 0.9), detection(1, (30, 5, 50, 25), 0.8)])
    assert drawn.shape == image.shape and (image == 200).all()
    assert (drawn[2:18, 2:18] != 200).any() and (drawn[7:23, 32:48] != 200).any()
    assert (overlay(image, []) == image).all()


def test_the_json_form_has_the_message_s_fields():
    item = detection(7, (0, 0, 20, 10), 0.87654).to_json()
    assert item == {"concept": "cup", "id": 7, "score": 0.8765, "bbox": [0.0, 0.0, 20.0, 10.0],
                    "centroid": [10.0, 5.0], "area": 200, "position_valid": False,
                    "position": None}
