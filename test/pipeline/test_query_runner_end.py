"""The query worker's end of every query at once (``QueryRunner.end_all``: the node shutting
down or deactivated, CONTRACTS §11): no wait for the call in flight, one result each."""

from __future__ import annotations

import threading

import pytest

from sam3_agent_ros.core.types import Phase, Query, QueryStatus, Result, StatusEvent
from sam3_agent_ros.pipeline.latest_frame import LatestFrame
from sam3_agent_ros.pipeline.query_runner import QUEUE, QueryRunner
from test.pipeline.test_query_runner import TIMEOUT, Message, Outputs, make_runner, to_frame


@pytest.fixture
def stop_runners():
    runners = []
    yield runners.append
    for runner in runners:
        assert runner.stop("test over", TIMEOUT)


class DeafAgent:
    """An agent inside a long model call that does not look at its cancel token (a SAM 3 call,
    say): it answers only when the test lets it, whatever happened meanwhile."""

    def __init__(self):
        self.started, self.gate = threading.Event(), threading.Event()

    def run(self, frame, query, cancel, on_status) -> Result:
        on_status(StatusEvent(query.id, Phase.THINKING))
        self.started.set()
        assert self.gate.wait(TIMEOUT)
        on_status(StatusEvent(query.id, Phase.DONE, status="succeeded"))
        return Result(query.id, query.text, QueryStatus.SUCCEEDED, frame=frame)


def test_end_all_ends_the_running_and_waiting_queries_at_once(stop_runners):
    """Shutdown (CONTRACTS §11): every taken query gets its failed result now, without waiting
    for the call in flight; what that call returns later is dropped, its statuses too."""
    agent, outputs, frames = DeafAgent(), Outputs(), LatestFrame()
    runner = QueryRunner(answer=agent.run, to_frame=to_frame, publish=outputs.publish,
                         status=outputs.status, frames=frames, policy=QUEUE)
    runner.start()
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    assert agent.started.wait(TIMEOUT)
    runner.submit(Query("b", "y"))
    assert runner.end_all("node shutting down", refuse_more=True) == ["a", "b"]
    results = outputs.wait_results(2)  # before the agent returns
    assert [(r.query_id, r.status, r.error) for r in results] == [
        ("a", QueryStatus.FAILED, "node shutting down"),
        ("b", QueryStatus.FAILED, "node shutting down")]
    assert runner.refusal() == "the node is shutting down"
    agent.gate.set()
    assert runner.wait_idle(TIMEOUT)
    assert len(outputs.results) == 2  # the late answer of "a" was dropped
    assert outputs.phases("a") == ["queued", "thinking", "done"]  # one done: the failed one
    assert outputs.phases("b") == ["queued", "done"]


def test_end_all_without_refuse_more_lets_the_next_query_run(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    assert runner.end_all("node shutting down (deactivated)") == ["a"]
    assert runner.end_all("again") == []  # nothing is ended twice
    runner.submit(Query("b", "y"))
    agent.release("b")
    results = outputs.wait_results(2)
    assert [(r.query_id, r.status) for r in results] == [("a", QueryStatus.FAILED),
                                                         ("b", QueryStatus.SUCCEEDED)]
