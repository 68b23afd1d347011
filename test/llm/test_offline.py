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
