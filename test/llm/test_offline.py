import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.mask_table import TableRow
from sam3_agent_ros.core.types import Frame, Query, QueryStatus
from sam3_agent_ros.llm.offline import OfflinePlanner, plan_phrases, select_ids
from test.fakes.segmenters import BoxSegmenter


@pytest.mark.parametrize("query, phrases", [
    ("pick the leftmost blue object", ["blue object"]),
    ("the largest red box", ["red box", "red object"]),
    ("all green objects", ["green object"]),
    ("the unicorn", ["unicorn"]),
    ("the leftmost one", ["object"]),
])
def test_phrases(query, phrases):
    assert plan_phrases(query) == phrases


ROWS = [TableRow(1, 0.9, (0, 0, 1, 1), 5.0, (300.0, 100.0)),
        TableRow(2, 0.8, (0, 0, 1, 1), 9.0, (100.0, 300.0)),
        TableRow(3, 0.7, (0, 0, 1, 1), 1.0, (200.0, 50.0))]


@pytest.mark.parametrize("query, ids", [
    ("the leftmost cup", [2]), ("the rightmost cup", [1]), ("the top cup", [3]),
    ("the bottom cup", [2]), ("the largest cup", [2]), ("the smallest cup", [3]),
    ("all cups", [1, 2, 3]), ("the cup", [1]),
])
def test_selection(query, ids):
    assert select_ids(query, ROWS) == ids


def run(query, boxes):
    agent = Agent(Config.from_params({"llm.backend": "offline"}), llm=OfflinePlanner(),
                  segmenter=BoxSegmenter(boxes))
    frame = Frame(np.zeros((240, 320, 3), np.uint8))
    return agent.run(frame, Query("q", query))


def test_offline_planner_runs_the_full_loop():
    boxes = {"blue object": [(200, 10, 240, 50, 0.9), (20, 10, 60, 50, 0.8)]}
    result = run("the leftmost blue object", boxes)
    assert result.status is QueryStatus.SUCCEEDED
    assert result.masks[0].bbox == (20, 10, 60, 50)
    assert result.rounds == 3  # segment, examine, select


def test_offline_planner_falls_back_once_then_reports_no_mask():
    result = run("the purple ball", {})
    assert result.status is QueryStatus.NO_MASK
    assert result.text_prompts == ["purple ball", "purple object"]


# --- corrections of an earlier answer (refinements) -----------------------------------------------

def _earlier_text(*answers):
    """messages[1] of a refinement, as core/context.py writes it."""
    from sam3_agent_ros.core import context
    from sam3_agent_ros.core.answers import AnswerRecord, SelectedMask
    from sam3_agent_ros.core.types import ImagePart

    records = [AnswerRecord(f"q-{k}", query, "succeeded",
                            tuple(SelectedMask(0.9, box, 10, ((box[0] + box[2]) / 2,
                                                               (box[1] + box[3]) / 2))
                                  for box in boxes))
               for k, (query, boxes) in enumerate(answers, start=1)]
    image = ImagePart(np.zeros((4, 4, 3), np.uint8), "frame")
    return context.first_user_message(image, "x", 320, 240, ["a"], earlier=records).text_content


ROW_BOXES = {1: (280, 90, 320, 110), 2: (80, 290, 120, 310), 3: (180, 40, 220, 60)}
CORRECTABLE = [TableRow(r.id, r.score, ROW_BOXES[r.id], r.area_percent, r.centroid) for r in ROWS]


def test_the_earlier_answers_are_read_back_from_messages_1():
    from sam3_agent_ros.llm.offline import parse_earlier

    earlier = parse_earlier(_earlier_text(('the "big"\ncup', [ROW_BOXES[2]]),
                                          ("no, the other one", [])))
    assert [e.query for e in earlier] == ['the "big"\ncup', "no, the other one"]
    assert [r.bbox for r in earlier[0].rows] == [ROW_BOXES[2]] and earlier[1].rows == []
    assert parse_earlier("User query: the cup") == []


@pytest.mark.parametrize("query, ids", [
    ("no, the other one", [3]),  # the next leftmost after the earlier leftmost (2)
    ("not that one", [3]),
    ("another one, the largest", [1]),  # the query's own selector among the others
    ("the one to its right", [3]),  # nearest to the right of the earlier answer (x 100)
    ("the one to its left", []),  # nothing left of it
    ("the leftmost cup", [2]),  # no correction words: an ordinary selection
])
def test_corrections_select_relative_to_the_earlier_answer(query, ids):
    from sam3_agent_ros.llm.offline import parse_earlier, select_correction

    earlier = parse_earlier(_earlier_text(("the leftmost cup", [ROW_BOXES[2]])))
    assert select_correction(query, CORRECTABLE, earlier) == ids


def test_a_correction_excludes_every_earlier_answer_and_is_relative_to_the_latest():
    from sam3_agent_ros.llm.offline import parse_earlier, select_correction

    earlier = parse_earlier(_earlier_text(("the leftmost cup", [ROW_BOXES[2]]),
                                          ("no, the other one", [ROW_BOXES[3]])))
    assert select_correction("not that one either", CORRECTABLE, earlier) == [1]
    assert select_correction("the one to its left", CORRECTABLE, earlier) == [2]


@pytest.mark.parametrize("query, phrases", [
    ("no, the other one", ["blue object"]),
    ("not that one", ["blue object"]),
    ("the one to its left", ["blue object"]),
    ("no, the red one", ["red", "red object"]),  # a correction that names an object
])
def test_a_correction_without_an_object_segments_what_the_first_query_named(query, phrases):
    from sam3_agent_ros.llm.offline import parse_earlier, refinement_phrases

    earlier = parse_earlier(_earlier_text(("the leftmost blue object", [ROW_BOXES[2]]),
                                          ("no, the other one", [ROW_BOXES[3]])))
    assert refinement_phrases(query, earlier) == phrases


def test_think_s_rehearses_a_models_time_per_call_and_stops_on_cancel():
    """llm.offline_think_s (sam3-agent demo --think-s): each call takes that long, as a real
    model's; a cancel ends the wait at once, the query's deadline as a request's timeout."""
    import threading
    import time

    from sam3_agent_ros.core.cancel import CancelToken
    from sam3_agent_ros.core.errors import LlmError
    from sam3_agent_ros.core.types import Message

    messages = [Message.text("system", "x"), Message.text("user", 'Query: "the red cup"')]
    planner = OfflinePlanner(think_s=0.3)
    started = time.monotonic()
    reply = planner.complete(messages, CancelToken())
    assert time.monotonic() - started >= 0.3
    assert reply.text == OfflinePlanner().complete(messages, CancelToken()).text  # same answer

    slow, cancel = OfflinePlanner(think_s=30.0), CancelToken()
    threading.Timer(0.1, cancel.cancel, args=("preempted",)).start()
    started = time.monotonic()
    with pytest.raises(LlmError) as cancelled:
        slow.complete(messages, cancel)
    assert cancelled.value.kind == LlmError.CANCELLED and time.monotonic() - started < 5

    with pytest.raises(LlmError, match="time ran out during the offline planner's 30 s") as late:
        slow.complete(messages, CancelToken(deadline=time.monotonic() + 0.1))
    assert late.value.kind == LlmError.TIMEOUT


def test_think_s_comes_from_the_config():
    from sam3_agent_ros.backends import make_llm
    from sam3_agent_ros.inputs import load_config

    config = load_config(None, ["llm.backend:=offline", "llm.offline_think_s:=2.5"])
    assert make_llm(config).think_s == 2.5
