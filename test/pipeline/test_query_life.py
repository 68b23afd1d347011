"""A query's life without a ROS graph: the order of its outputs, and exactly one result per
query, also when the node is unconfigured or the query is refused."""

from __future__ import annotations

import re

import numpy as np

from sam3_agent_ros.core.types import Frame, Mask, Query, QueryStatus, Result
from sam3_agent_ros.pipeline.query_life import QueryLife, QueryParts

POSITION = {"position": {"x": 0.1, "y": 0.2, "z": 0.9}, "position_error": None,
            "box": None, "box_error": "flat"}


class Journal:
    """Every call of every fake, in order."""

    def __init__(self):
        self.calls: list[tuple] = []

    def note(self, *call):
        self.calls.append(call)

    def names(self):
        return [call[0] for call in self.calls]


class FakeOutputs:
    def __init__(self, journal):
        self.journal = journal

    def publish_status(self, event):
        self.journal.note("status", event.query_id, event.backends)

    def publish_answer(self, answer):
        result = answer.result
        self.journal.note("images", result.query_id)
        self.journal.note("result_json", result.query_id, result.to_json())
        if answer.measurements is not None:
            self.journal.note("targets", result.query_id, answer.measurements)
        return ("published", result.query_id)


class FakeAction:
    def __init__(self, journal, held=()):
        self.journal, self.held = journal, set(held)

    def refuse_duplicate(self, query):
        if query.id in self.held:
            return Result(query.id, query.text, QueryStatus.FAILED, error="in use")
        return None

    def on_status(self, event):
        self.journal.note("feedback", event.query_id)

    def on_result(self, result, published=None):
        self.journal.note("action_result", result.query_id, result.status, published)


class FakeFollow:
    def __init__(self, journal):
        self.journal = journal

    def before_query(self, query_id, text, follow):
        self.journal.note("follow_stop", query_id, follow)

    def before_answer(self, query_id):
        self.journal.note("follow_idle", query_id)

    def after_result(self, result):
        self.journal.note("follow_start", result.query_id)


class InlineRunner:
    """Runs a submitted query at once, as the worker does: answer, then finish."""

    def __init__(self, life, journal, frame):
        self.life, self.journal, self.frame = life, journal, frame

    def submit(self, query):
        self.journal.note("queued", query.id)
        self.life.finish(self.life.answer(self.frame, query, None, self.life.status))

    def reject(self, query, reason):
        self.journal.note("rejected", query.id, reason)
        self.life.finish(Result(query.id, query.text, QueryStatus.FAILED, error=reason))


class FakeAgent:
    def __init__(self, journal):
        self.journal = journal

    def run(self, frame, query, cancel, on_status):
        self.journal.note("agent", query.id)
        mask = Mask.from_array(np.ones((4, 6), bool), 0.9, (0, 0, 6, 4))
        return Result(query.id, query.text, QueryStatus.SUCCEEDED, masks=[mask], frame=frame)


class FakeDepth:
    def __init__(self, journal):
        self.journal = journal

    def measure(self, frame, masks, pixels_to=None):
        self.journal.note("measure")
        return [dict(POSITION) for _ in masks]


class Logger:
    def __init__(self):
        self.lines: list[str] = []

    def info(self, line):
        self.lines.append(line)

    warning = info


def make_life(journal, *, configured=True, depth=True, held=(), live=True):
    logger = Logger()
    life = QueryLife(backends=lambda: {"llm": "fake"}, live=lambda: live, logger=logger)
    life.action = FakeAction(journal, held)
    frame = Frame(image=np.zeros((4, 6, 3), np.uint8), frame_id="cam")
    life.configure(QueryParts(agent=FakeAgent(journal), outputs=FakeOutputs(journal),
                              runner=InlineRunner(life, journal, frame),
                              follow=FakeFollow(journal)))
    if configured:
        life.depth = FakeDepth(journal) if depth else None
    else:  # released meanwhile: the outputs still there, the worker and follow mode gone
        life.stop_taking()
        life.stop_following()
    return life, logger


def test_an_answer_is_measured_then_published_then_the_goal_ends_then_following_starts():
    journal = Journal()
    life, logger = make_life(journal)
    life.take(Query("q-1", "the cup"), True)
    assert journal.names() == ["follow_stop", "queued", "follow_idle", "agent", "measure",
                               "images", "result_json", "targets", "action_result",
                               "follow_start"]
    result_json = journal.calls[6][2]
    assert result_json["masks"][0]["position"] == POSITION["position"]  # measured before JSON
    assert result_json["backends"] == {"llm": "fake"}
    assert journal.calls[8][3] == ("published", "q-1")  # the action reuses what went out
    assert any("q-1: succeeded, 1 mask(s)" in line for line in logger.lines)


def test_without_depth_no_targets_go_out():
    journal = Journal()
    life, _ = make_life(journal, depth=False)
    life.submit(Query("q-2", "the cup"), None)
    assert "measure" not in journal.names() and "targets" not in journal.names()
    assert journal.names()[-2:] == ["action_result", "follow_start"]


def test_an_unconfigured_node_still_gives_one_failed_result():
    journal = Journal()
    life, _ = make_life(journal, configured=False)
    life.submit(Query("q-3", "the cup", "q-1"), True)
    assert journal.names() == ["images", "result_json", "action_result"]
    result_json = journal.calls[1][2]
    assert result_json["status"] == "failed" and "not configured" in result_json["error"]
    assert journal.calls[2][2] == QueryStatus.FAILED


def test_a_query_whose_id_a_goal_holds_is_refused_on_the_topics_alone():
    journal = Journal()
    life, logger = make_life(journal, held={"q-4"})
    life.take(Query("q-4", "the cup"), None)
    assert journal.names() == ["images", "result_json"]  # no action result: the goal runs on
    assert journal.calls[1][2]["status"] == "failed"
    assert any("query rejected: in use" in line for line in logger.lines)


def test_a_refused_topic_query_gets_its_one_failed_result_through_the_runner():
    journal = Journal()
    life, _ = make_life(journal)
    life.refuse(Query("q-5", "the cup"), "queue full (intake: ...)")
    assert journal.names()[:4] == ["rejected", "images", "result_json", "action_result"]
    assert journal.calls[2][2]["error"] == "queue full (intake: ...)"


def test_a_refused_query_whose_id_a_goal_holds_leaves_the_goal_running():
    journal = Journal()
    life, _ = make_life(journal, held={"q-6"})
    life.refuse(Query("q-6", "the cup"), "queue full")
    assert journal.names() == ["images", "result_json"]


def test_a_refused_query_without_a_runner_still_gets_its_result():
    journal = Journal()
    life, _ = make_life(journal, configured=False)
    life.refuse(Query("q-7", "the cup"), "node shutting down")
    assert journal.names() == ["images", "result_json", "action_result"]
    assert journal.calls[1][2]["error"] == "node shutting down"


def test_a_status_event_names_the_backends_and_goes_to_the_topics_then_the_goal():
    journal = Journal()
    life, _ = make_life(journal)
    from sam3_agent_ros.core.types import Phase, StatusEvent

    life.status(StatusEvent("q-5", Phase.THINKING))
    assert journal.calls == [("status", "q-5", {"llm": "fake"}), ("feedback", "q-5")]


def test_nothing_is_published_once_the_middleware_is_shut_down():
    journal = Journal()
    life, _ = make_life(journal, live=False)
    life.finish(Result("q-6", "x", QueryStatus.CANCELLED))
    assert journal.calls == []


def test_a_publisher_that_raises_still_ends_the_goal():
    journal = Journal()
    life, _ = make_life(journal)

    def broken(answer, depth=None):
        raise RuntimeError("publisher gone")

    life.outputs.publish_answer = broken
    try:
        life.finish(Result("q-7", "x", QueryStatus.FAILED, error="e"))
    except RuntimeError:
        pass
    assert journal.names() == ["action_result"]


def test_the_ids_the_node_makes_are_unique_across_node_starts():
    """A bag recorded over several runs of the node never holds one id twice (issue 33): each
    start has its run prefix, and the count goes on for the node's life."""
    first, _ = make_life(Journal())
    second, _ = make_life(Journal())
    ids = [first.new_query_id(), first.new_query_id(), second.new_query_id()]
    assert ids[:2] == [f"q-{first.run}-1", f"q-{first.run}-2"]
    assert re.fullmatch(r"q-[0-9a-f]{6}-1", ids[2]) and first.run != second.run
    assert len(set(ids)) == 3


def test_a_lost_followed_query_is_grounded_again_under_a_new_id_and_followed():
    journal = Journal()
    life, _ = make_life(journal)
    assert life.new_query_id() == f"q-{life.run}-1"
    life.reground("q-1", "the cup")
    assert journal.calls[0] == ("follow_stop", "q-1-reground-2", True)
    assert journal.names()[-1] == "follow_start"
    idle = Journal()
    unconfigured, _ = make_life(idle, configured=False)
    unconfigured.reground("q-1", "the cup")  # released meanwhile: nothing to run it
    assert idle.calls == []
