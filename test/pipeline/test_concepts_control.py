"""ConceptsControl.detections_on: the standing concepts on an answer's frame for its grasp scene
(one pass through the segmenter's first lane), none without concepts, none (and a warning) when
the segmenter fails."""

from __future__ import annotations

import dataclasses
import logging

from sam3_agent_demo import sample
from sam3_agent_ros.concepts import SegmenterGate
from sam3_agent_ros.config import Config
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.log_limit import LogLimiter
from sam3_agent_ros.pipeline.concepts_control import ConceptsControl
from sam3_agent_ros.segmenters.color import ColorSegmenter


class Outputs:
    def live(self):
        return False

    def publish_concepts(self, result, located):
        return None


class Broken(ColorSegmenter):
    def segment_many(self, image, text_prompts):
        raise SegmenterError("the model is gone")

    def segment(self, image, text_prompt):
        raise SegmenterError("the model is gone")


def control(segmenter, prompts):
    base = Config()
    config = dataclasses.replace(base, concepts=dataclasses.replace(base.concepts,
                                                                    prompts=tuple(prompts)))
    return ConceptsControl(logging.getLogger("test"), LogLimiter(), config,
                           SegmenterGate(segmenter), to_frame=lambda m: m,
                           depth=lambda: None, outputs=Outputs())


def test_the_concepts_on_the_answer_s_frame_are_its_neighbours():
    rendered = sample.render_frame(0.0)
    concepts = control(ColorSegmenter(), ("blue object", "red object"))
    try:
        found = concepts.detections_on(Frame(rendered.rgb, 3, 0, "cam"))
        assert len(found) == 4  # the two blue and the two red objects of the sample
        for mask in found:
            best = max(((truth & mask.mask).sum() / (truth | mask.mask).sum())
                       for truth in rendered.masks.values())
            assert best >= 0.8
    finally:
        concepts.destroy(1.0)


def test_none_without_concepts_and_none_when_the_segmenter_fails(caplog):
    frame = Frame(sample.render_frame(0.0).rgb, 3, 0, "cam")
    idle = control(ColorSegmenter(), ())
    broken = control(Broken(), ("blue object",))
    try:
        assert idle.detections_on(frame) == []
        with caplog.at_level(logging.WARNING):
            assert broken.detections_on(frame) == []
        assert "no neighbours for the grasp scene" in caplog.text
    finally:
        idle.destroy(1.0)
        broken.destroy(1.0)
