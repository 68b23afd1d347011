"""The segmenter port: Detections, and the check every segmenter output passes (plugins too)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import Detections, segment_prompts

H, W = 20, 30


def boxes_masks(*boxes) -> np.ndarray:
    masks = np.zeros((len(boxes), H, W), bool)
    for k, (x0, y0, x1, y1) in enumerate(boxes):
        masks[k, y0:y1, x0:x1] = True
    return masks


def test_a_plugins_own_type_is_converted_to_detections():
    masks = boxes_masks((0, 0, 5, 5), (10, 10, 20, 15)).astype(np.uint8)[:, None]  # (N, 1, H, W)
    raw = SimpleNamespace(masks=masks, scores=[0.4, 0.9], boxes=[[0, 0, 5, 5], [10, 10, 20, 15]])
    found = Detections.coerce(raw, H, W)
    assert found.masks.shape == (2, H, W) and found.masks.dtype == bool
    assert found.scores.dtype == np.float64 and found.boxes.dtype == np.float64
    assert found.untrained_weights is False  # a plugin cannot say otherwise
    masks = found.to_masks()
    assert [m.score for m in masks] == [0.9, 0.4]  # by descending score
    assert masks[0].pixel_box == (10, 10, 20, 15) and masks[0].area == 50
    assert masks[0].bbox == (10.0, 10.0, 20.0, 15.0)


def test_detections_pass_unchanged_with_their_flag():
    found = Detections(boxes_masks((1, 1, 4, 4)), np.array([0.5]), np.array([[1.0, 1, 4, 4]]),
                       untrained_weights=True)
    checked = Detections.coerce(found, H, W)
    assert checked.untrained_weights is True and checked.masks is found.masks
    assert Detections.coerce(Detections.empty(H, W, untrained_weights=True), H, W) \
        .untrained_weights is True


def test_equal_scores_keep_their_order():
    found = Detections(boxes_masks((0, 0, 2, 2), (5, 5, 7, 7), (9, 9, 11, 11)),
                       np.array([0.5, 0.7, 0.5]), np.zeros((3, 4)))
    assert [m.pixel_box[0] for m in found.to_masks()] == [5, 0, 9]


@pytest.mark.parametrize("empty", [
    Detections.empty(H, W),
    SimpleNamespace(masks=[], scores=[], boxes=[]),
    SimpleNamespace(masks=np.zeros((0, 5, 5), bool), scores=np.zeros(0), boxes=np.zeros((0, 4))),
], ids=["detections", "lists", "any-shape"])
def test_nothing_found_is_empty_detections_of_the_frame(empty):
    found = Detections.coerce(empty, H, W)
    assert found.masks.shape == (0, H, W) and found.to_masks() == []


@pytest.mark.parametrize("raw, fragment", [
    (SimpleNamespace(masks=boxes_masks((0, 0, 1, 1)), scores=[0.5]), "lacks masks/scores/boxes"),
    (SimpleNamespace(masks=boxes_masks((0, 0, 1, 1)), scores=["high"], boxes=[[0, 0, 1, 1]]),
     "not numeric"),
    (SimpleNamespace(masks=np.zeros((1, 5, 5), bool), scores=[0.5], boxes=[[0, 0, 1, 1]]),
     "masks have shape (1, 5, 5), expected (1, 20, 30)"),
    (SimpleNamespace(masks=boxes_masks((0, 0, 1, 1)), scores=[0.5, 0.4], boxes=[[0, 0, 1, 1]]),
     "masks have shape"),
    (SimpleNamespace(masks=boxes_masks((0, 0, 1, 1)), scores=[0.5], boxes=[[0, 0, 1]]),
     "boxes have shape (1, 3)"),
    (SimpleNamespace(masks=boxes_masks((0, 0, 1, 1)), scores=[float("nan")], boxes=[[0, 0, 1, 1]]),
     "NaN or inf"),
    (None, "lacks masks/scores/boxes"),
], ids=["no-boxes", "text-score", "wrong-size", "count-mismatch", "box-columns", "nan", "none"])
def test_malformed_output_is_a_segmenter_error(raw, fragment):
    with pytest.raises(SegmenterError) as info:
        Detections.coerce(raw, H, W)
    assert fragment in str(info.value)
    assert info.value.kind == SegmenterError.MALFORMED  # a field, for whoever reads the error


class ManySegmenter:
    """Has ``segment_many``; ``segment`` must not be called through ``segment_prompts``."""

    def __init__(self, count_back: int | None = None):
        self.count_back = count_back
        self.calls: list[list[str]] = []

    def segment(self, image, text_prompt):
        raise AssertionError("segment called although segment_many exists")

    def segment_many(self, image, text_prompts):
        self.calls.append(list(text_prompts))
        count = len(text_prompts) if self.count_back is None else self.count_back
        return [SimpleNamespace(masks=boxes_masks((0, 0, 5, 5)), scores=[0.5],
                                boxes=[[0, 0, 5, 5]]) for _ in range(count)]


def test_segment_prompts_uses_segment_many_once_and_checks_each_output():
    segmenter = ManySegmenter()
    found = segment_prompts(segmenter, np.zeros((H, W, 3), np.uint8), ("cup", "bottle"))
    assert segmenter.calls == [["cup", "bottle"]]
    assert [type(d) for d in found] == [Detections, Detections]
    with pytest.raises(SegmenterError, match="1 results for 2 prompts"):
        segment_prompts(ManySegmenter(count_back=1), np.zeros((H, W, 3), np.uint8), ["a", "b"])


def test_segment_prompts_without_segment_many_calls_segment_on_the_same_image_object():
    seen = []

    class Single:
        def segment(self, image, text_prompt):
            seen.append((id(image), text_prompt))
            return Detections.empty(H, W)

    image = np.zeros((H, W, 3), np.uint8)
    assert len(segment_prompts(Single(), image, ["a", "b", "c"])) == 3
    assert seen == [(id(image), "a"), (id(image), "b"), (id(image), "c")]
    assert segment_prompts(Single(), image, []) == []


def test_segmenter_errors_say_their_kind_as_a_field():
    from sam3_agent_ros.segmenters.color import ColorSegmenter
    from sam3_agent_ros.segmenters.sam3_files import Sam3LoadError

    with pytest.raises(SegmenterError) as info:
        ColorSegmenter().segment(np.zeros((4, 4), np.float32), "blue object")
    assert info.value.kind == SegmenterError.BAD_INPUT
    assert Sam3LoadError("no checkpoint").kind == SegmenterError.LOAD
    assert SegmenterError("a plugin's own").kind is None
