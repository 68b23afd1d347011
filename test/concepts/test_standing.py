"""StandingConcepts on the tabletop sample's frames with the colour segmenter: one segmenter call
per pass for all concepts, ids stable across frames against the ground truth, ids restart when
the list changes, and a pass of an old list is dropped."""

from __future__ import annotations

import numpy as np

from sam3_agent_demo import sample
from sam3_agent_ros.concepts import StandingConcepts
from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.segmenters.color import ColorSegmenter

CONCEPTS = ("blue object", "red object")
TRUTH = {"blue object": ("blue_box", "blue_cylinder"), "red object": ("red_box", "red_cylinder")}


class CountingSegmenter(ColorSegmenter):
    def __init__(self):
        super().__init__()
        self.many_calls: list[list[str]] = []

    def segment_many(self, image, text_prompts):
        self.many_calls.append(list(text_prompts))
        return super().segment_many(image, text_prompts)


def truth_of(rendered, detection) -> str | None:
    """The scene object the detection covers (IoU >= 0.8), or None."""
    for name in TRUTH[detection.concept]:
        truth = rendered.masks[name]
        iou = (truth & detection.mask).sum() / (truth | detection.mask).sum()
        if iou >= 0.8:
            return name
    return None


def test_ids_stay_with_the_same_objects_over_the_sample_s_frames():
    segmenter = CountingSegmenter()
    concepts = StandingConcepts(CONCEPTS)
    id_of: dict[str, int] = {}
    for index, t_s in enumerate(np.arange(0.0, 3.0, 0.3)):
        rendered = sample.render_frame(float(t_s))
        result = concepts.process(segmenter, Frame(rendered.rgb, index, 0, "cam"))
        assert len(result.detections) == 4
        assert [d.concept for d in result.detections] == ["blue object"] * 2 + ["red object"] * 2
        for detection in result.detections:
            name = truth_of(rendered, detection)
            assert name is not None, f"frame {index}: {detection.concept} {detection.id}"
            assert id_of.setdefault(name, detection.id) == detection.id, name
    assert sorted(id_of.values()) == [1, 2, 3, 4]
    assert segmenter.many_calls == [list(CONCEPTS)] * 10  # one call per pass, every concept


def test_a_new_list_restarts_the_ids_and_drops_a_pass_of_the_old_list():
    segmenter = ColorSegmenter()
    concepts = StandingConcepts(CONCEPTS)
    frame = Frame(sample.render_frame(0.0).rgb)
    first = concepts.process(segmenter, frame)
    assert [d.id for d in first.detections] == [1, 2, 3, 4] and first.generation == 1
    assert not concepts.set_prompts([" blue object", "red object "])  # the same list
    in_flight = concepts.detect(segmenter, frame.image)
    assert concepts.set_prompts(["red object"])
    assert concepts.finish(in_flight, frame) is None  # its ids belong to the old list
    again = concepts.process(segmenter, frame)
    assert again.generation == 2 and again.prompts == ("red object",)
    assert [(d.concept, d.id) for d in again.detections] == [("red object", 1),
                                                              ("red object", 2)]


def test_no_concepts_no_segmenter_call():
    class Refusing:
        def segment(self, image, text_prompt):
            raise AssertionError("called without concepts")

    result = StandingConcepts().process(Refusing(), Frame(np.zeros((8, 8, 3), np.uint8)))
    assert result.detections == [] and result.prompts == ()
