"""Refinements through the agent loop (interface §8c): the frame of the refined answer, the
context invariants in chains of refinements, and ids that cannot be refined."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.core import context
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.answers import AnswerStore
from sam3_agent_ros.core.types import Frame, Phase, Query, QueryStatus
from sam3_agent_ros.llm.offline import OfflinePlanner
from test.fakes.scripted_llm import ScriptedLlm, examine, segment, select
from test.fakes.segmenters import BoxSegmenter

W, H = 320, 240
CUPS = [(200, 50, 240, 100, 0.7), (20, 60, 60, 110, 0.9), (120, 40, 150, 90, 0.8)]
BOXES = {"cup": CUPS, "blue object": CUPS}


class SeenImages(BoxSegmenter):
    """A box segmenter that records the image object of every call."""

    def __init__(self, boxes):
        super().__init__(boxes)
        self.images = []

    def segment(self, image, text_prompt):
        self.images.append(image)
        return super().segment(image, text_prompt)


class Recording:
    """Any LLM client, with the main-loop requests it was sent."""

    def __init__(self, llm):
        self.llm, self.main_requests = llm, []

    def complete(self, messages, cancel, tools=None):
        if "<verdict>" not in messages[0].text_content:
            self.main_requests.append(list(messages))
        return self.llm.complete(messages, cancel, tools=tools)


def frame(seed: int, stamp: int) -> Frame:
    image = np.random.default_rng(seed).integers(0, 255, (H, W, 3), dtype=np.uint8)
    return Frame(image, stamp_sec=stamp, stamp_nanosec=7, frame_id="camera")


def agent_with(llm, segmenter=None, keep: int = 8, **params) -> Agent:
    config = Config.from_params(params)
    return Agent(config, llm=llm, segmenter=segmenter or BoxSegmenter(BOXES),
                 answers=AnswerStore(keep))


def test_a_refinement_is_answered_on_the_frame_of_the_answer_it_refines():
    segmenter = SeenImages(BOXES)
    agent = agent_with(ScriptedLlm([segment("cup"), select(1), segment("cup"), select(2)]),
                       segmenter)
    first, later = frame(1, 12), frame(2, 99)
    agent.run(first, Query("q-1", "the best cup"))
    statuses = []
    result = agent.run(later, Query("q-2", "no, the other one", refines="q-1"),
                       on_status=statuses.append)
    assert result.status is QueryStatus.SUCCEEDED and result.refines == "q-1"
    assert segmenter.images == [first.image, first.image] and segmenter.images[1] is first.image
    assert result.frame is first
    data = result.to_json()
    assert data["stamp"] == {"sec": 12, "nanosec": 7} and data["refines"] == "q-1"
    assert {event.refines for event in statuses} == {"q-1"}
    assert statuses[-1].to_json()["refines"] == "q-1"
    assert result.masks[0].bbox == (120, 40, 150, 90)


def test_the_model_sees_the_earlier_answer_then_it_is_pruned_like_any_overlay():
    llm = ScriptedLlm([segment("cup"), select(1), segment("cup"), examine(), select(1)],
                      verifier=lambda m: "<verdict>Accept</verdict>")
    agent = agent_with(llm)
    agent.run(frame(1, 12), Query("q-1", "the best cup"))
    agent.run(frame(2, 99), Query("q-2", "not that one", refines="q-1"))
    first_request, after_segment = llm.main_requests[2], llm.main_requests[3]
    text = first_request[1].text_content
    assert 'Earlier answer 1: query "the best cup" (query_id "q-1") selected 1 mask(s):' in text
    assert "1 | 0.900 | 20,60,60,110" in text and "you may use them again" in text
    # the earlier overlay: a first turn before any call, never a third image
    assert [p.key.split("/")[1] for p in first_request[3].images] == ["earlier-overlay"]
    assert len(first_request) == 4 and context.count_images(first_request) == 2
    keys = [p.key.split("/")[1] for m in after_segment for p in m.images]
    assert keys == ["frame", "overlay-1"]
    assert 'query "the best cup"' in after_segment[1].text_content  # messages[1] still says it


def test_earlier_prompts_may_be_reused_and_the_duplicate_rule_holds_inside_the_query():
    segmenter = BoxSegmenter(BOXES)
    llm = ScriptedLlm([segment("cup"), select(1), segment("cup"), segment(" Cup"), select(3)])
    agent = agent_with(llm, segmenter)
    agent.run(frame(1, 12), Query("q-1", "the best cup"))
    result = agent.run(frame(1, 12), Query("q-2", "the other one", refines="q-1"))
    assert segmenter.calls == ["cup", "cup"]  # the repeat inside q-2 did not run
    assert "was NOT run" in llm.main_requests[-1][-1].text_content
    assert result.status is QueryStatus.SUCCEEDED and result.text_prompts == ["cup"]


@pytest.mark.parametrize("protocol, bound", [("text", 6), ("tools", 6), ("text", 10)])
def test_refinements_of_refinements_keep_the_context_invariants(protocol, bound):
    llm = Recording(OfflinePlanner())
    agent = agent_with(llm, **{"llm.protocol": protocol, "agent.max_context_messages": bound})
    asked = [Query("q-1", "the leftmost blue object"),
             Query("q-2", "no, the other one", refines="q-1"),  # the next leftmost
             Query("q-3", "the one to its left", refines="q-2"),  # back to q-1's
             Query("q-4", "not that one either", refines="q-3"),  # none of the three
             Query("q-5", "the smallest blue object", refines="q-4"),
             Query("q-6", "the one to its right", refines="q-4")]  # q-4's is the rightmost
    results = [agent.run(frame(index, 10 + index), query) for index, query in enumerate(asked)]
    assert [r.status for r in results] == [QueryStatus.SUCCEEDED] * 5 + [QueryStatus.NO_MASK]
    assert [r.masks[0].bbox for r in results if r.masks] == [
        (20, 60, 60, 110), (120, 40, 150, 90), (20, 60, 60, 110), (200, 50, 240, 100),
        (120, 40, 150, 90)]
    assert {r.to_json()["stamp"]["sec"] for r in results} == {10}  # all on q-1's frame
    for messages in llm.main_requests:
        assert context.check_messages(messages, bound) is None
        assert context.count_images(messages) <= 2 and len(messages) <= bound
    fifth = next(m for m in llm.main_requests if "User query: the smallest" in m[1].text_content)
    assert [f'query_id "q-{n}"' in fifth[1].text_content for n in range(1, 5)] == [True] * 4


def test_refining_a_no_mask_answer_shows_no_overlay():
    llm = ScriptedLlm([segment("mug"), "Nothing. <tool>{\"name\": \"report_no_mask\", "
                                       "\"parameters\": {}}</tool>", segment("cup"), select(1)])
    agent = agent_with(llm)
    agent.run(frame(1, 12), Query("q-1", "the mug"))
    result = agent.run(frame(1, 12), Query("q-2", "look again: the cup", refines="q-1"))
    request = llm.main_requests[2]
    assert len(request) == 2 and context.count_images(request) == 1
    assert 'query "the mug" (query_id "q-1") found no mask.' in request[1].text_content
    assert result.status is QueryStatus.SUCCEEDED


def test_unknown_expired_and_unanswered_ids_end_the_query_before_any_model_call():
    llm = ScriptedLlm([segment("cup"), select(1), segment("cup"), select(1)])
    agent = agent_with(llm, keep=1)
    agent.run(frame(1, 12), Query("q-1", "the best cup"))
    agent.run(frame(1, 13), Query("q-2", "the best cup"))
    statuses = []
    expired = agent.run(frame(1, 14), Query("q-3", "the other one", refines="q-1"),
                        on_status=statuses.append)
    unknown = agent.run(frame(1, 14), Query("q-4", "the other one", refines="zzz"))
    unanswered = agent.run(frame(1, 14), Query("q-5", "the other one", refines="q-4"))
    assert len(llm.main_requests) == 4  # none for the three refinements
    assert expired.status is QueryStatus.FAILED and "'q-1': its answer expired" in expired.error
    assert "'zzz': no answer with that query_id is known" in unknown.error
    assert "'q-4': it ended failed without an answer" in unanswered.error
    assert expired.to_json()["refines"] == "q-1" and expired.frame is None
    assert [(e.phase, e.refines) for e in statuses] == [(Phase.DONE, "q-1")]
    assert agent.answers.find("q-2")  # the failed refinements did not push it out


def test_an_agent_without_an_answer_store_refuses_refinements():
    agent = Agent(Config(), llm=ScriptedLlm([]), segmenter=BoxSegmenter(BOXES))
    result = agent.run(frame(1, 1), Query("q-2", "the other one", refines="q-1"))
    assert result.status is QueryStatus.FAILED and "keeps no answers" in result.error
