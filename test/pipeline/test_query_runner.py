"""The query worker without ROS: policies, frame snapshots and waits, exactly one result each."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.types import (
    Frame,
    FrameUnusable,
    Phase,
    Query,
    QueryStatus,
    Result,
    StatusEvent,
)
from sam3_agent_ros.pipeline.latest_frame import LatestFrame
from sam3_agent_ros.pipeline.query_runner import PREEMPT, QUEUE, QueryRunner

TIMEOUT = 10.0


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class GatedAgent:
    """Answers each query only when the test opens its gate (or the query is cancelled)."""

    def __init__(self):
        self.started: dict[str, threading.Event] = {}
        self.gates: dict[str, threading.Event] = {}
        self.frames: dict[str, Frame] = {}
        self.lock = threading.Lock()

    def _events(self, query_id: str) -> tuple[threading.Event, threading.Event]:
        with self.lock:
            return (self.started.setdefault(query_id, threading.Event()),
                    self.gates.setdefault(query_id, threading.Event()))

    def release(self, query_id: str) -> None:
        self._events(query_id)[1].set()

    def wait_started(self, query_id: str) -> None:
        assert self._events(query_id)[0].wait(TIMEOUT), f"{query_id} never started"

    def run(self, frame: Frame, query: Query, cancel: CancelToken, on_status) -> Result:
        started, gate = self._events(query.id)
        self.frames[query.id] = frame
        on_status(StatusEvent(query.id, Phase.THINKING))
        started.set()
        while not gate.wait(0.01):
            if cancel.cancelled:
                on_status(StatusEvent(query.id, Phase.DONE, status="cancelled"))
                return Result(query.id, query.text, QueryStatus.CANCELLED, cancel.reason,
                              frame=frame)
        on_status(StatusEvent(query.id, Phase.DONE, status="succeeded"))
        return Result(query.id, query.text, QueryStatus.SUCCEEDED, frame=frame)


class Outputs:
    def __init__(self):
        self.results: list[Result] = []
        self.statuses: list[StatusEvent] = []
        self.changed = threading.Condition()

    def publish(self, result: Result) -> None:
        with self.changed:
            self.results.append(result)
            self.changed.notify_all()

    def status(self, event: StatusEvent) -> None:
        with self.changed:
            self.statuses.append(event)

    def wait_results(self, count: int) -> list[Result]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.results) >= count, TIMEOUT), \
                f"only {len(self.results)} of {count} results"
            return list(self.results)

    def result(self, query_id: str) -> Result:
        (found,) = [r for r in self.results if r.query_id == query_id]
        return found

    def phases(self, query_id: str) -> list[str]:
        return [e.phase.value for e in self.statuses if e.query_id == query_id]


class Message:
    """A stand-in frame message: the runner never looks inside; ``to_frame`` does."""

    def __init__(self, label: str, usable: bool = True):
        self.label, self.usable = label, usable


def to_frame(msg: Message) -> Frame:
    if not msg.usable:
        raise FrameUnusable("unsupported image encoding 'yuv422'",
                            Frame(np.zeros((0, 0, 3), np.uint8), 7, 8, msg.label))
    return Frame(np.zeros((4, 4, 3), np.uint8), 1, 2, msg.label)


def make_runner(policy=PREEMPT, queue_size=8, max_frame_age_s=2.0, frame_wait_s=0.3,
                clock=None):
    agent, outputs = GatedAgent(), Outputs()
    frames = LatestFrame(clock) if clock else LatestFrame()
    runner = QueryRunner(answer=agent.run, to_frame=to_frame, publish=outputs.publish,
                         status=outputs.status, frames=frames, policy=policy,
                         queue_size=queue_size, max_frame_age_s=max_frame_age_s,
                         frame_wait_s=frame_wait_s)
    runner.start()
    return runner, agent, outputs, frames


@pytest.fixture
def stop_runners():
    runners = []
    yield runners.append
    for runner in runners:
        assert runner.stop("test over", TIMEOUT)


def test_query_runs_on_the_latest_frame(stop_runners):
    runner, agent, outputs, frames = make_runner()
    stop_runners(runner)
    frames.put(Message("old"))
    frames.put(Message("new"))
    runner.submit(Query("a", "x"))
    agent.release("a")
    (result,) = outputs.wait_results(1)
    assert result.status == QueryStatus.SUCCEEDED and result.frame.frame_id == "new"
    assert outputs.phases("a") == ["queued", "thinking", "done"]


def test_preempt_cancels_the_running_query(stop_runners):
    runner, agent, outputs, frames = make_runner(PREEMPT)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    runner.submit(Query("b", "y"))
    agent.release("b")
    outputs.wait_results(2)
    assert outputs.result("a").status == QueryStatus.CANCELLED
    assert outputs.result("a").error == "preempted by query b"
    assert outputs.result("b").status == QueryStatus.SUCCEEDED


def test_preempt_drops_a_waiting_query_with_one_cancelled_result(stop_runners):
    runner, agent, outputs, frames = make_runner(PREEMPT)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    agent.gates["a"] = threading.Event()  # a ignores its cancel until released below
    runner.submit(Query("b", "y"))  # waits behind a (a is still finishing)
    runner.submit(Query("c", "z"))  # supersedes b
    agent.release("c")
    results = outputs.wait_results(3)
    assert sorted(r.query_id for r in results) == ["a", "b", "c"]
    assert outputs.result("b").status == QueryStatus.CANCELLED
    assert outputs.result("b").error == "preempted by query c"
    assert outputs.result("c").status == QueryStatus.SUCCEEDED
    assert outputs.phases("b") == ["queued", "done"]


def test_queue_runs_fifo_and_rejects_overflow(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE, queue_size=2)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    for query_id in ("b", "c", "d"):
        runner.submit(Query(query_id, query_id))
    (overflow,) = outputs.wait_results(1)
    assert overflow.query_id == "d" and overflow.status == QueryStatus.FAILED
    assert overflow.error.startswith("queue full (queue_size=2): 2 queries are already waiting")
    assert runner.load() == (2, "a")  # what /diagnostics reports
    for query_id in ("a", "b", "c"):
        agent.release(query_id)
    results = outputs.wait_results(4)
    assert [r.query_id for r in results] == ["d", "a", "b", "c"]
    assert all(r.status == QueryStatus.SUCCEEDED for r in results[1:])
    assert runner.wait_idle(TIMEOUT) and runner.load() == (0, None)


def test_queued_query_keeps_the_frame_it_arrived_with(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE)
    stop_runners(runner)
    frames.put(Message("first"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    frames.put(Message("second"))
    runner.submit(Query("b", "y"))
    frames.put(Message("third"))
    agent.release("a")
    agent.release("b")
    outputs.wait_results(2)
    assert agent.frames["a"].frame_id == "first"
    assert agent.frames["b"].frame_id == "second"


def test_no_frame_fails_after_the_wait(stop_runners):
    runner, _, outputs, _ = make_runner(frame_wait_s=0.05)
    stop_runners(runner)
    runner.submit(Query("a", "x"))
    (result,) = outputs.wait_results(1)
    assert result.status == QueryStatus.FAILED
    assert result.error == "no frame received on the image topic (waited 0.05 s)"
    runner.image_topic = "/robot/camera/image"  # the node names its resolved topic
    runner.submit(Query("b", "x"))
    assert outputs.wait_results(2)[1].error == ("no frame received on /robot/camera/image "
                                                "(waited 0.05 s)")
    assert outputs.phases("a") == ["queued", "done"]


def test_a_frame_arriving_during_the_wait_is_used(stop_runners):
    runner, agent, outputs, frames = make_runner(frame_wait_s=TIMEOUT)
    stop_runners(runner)
    runner.submit(Query("a", "x"))
    frames.put(Message("late"))
    agent.release("a")
    (result,) = outputs.wait_results(1)
    assert result.status == QueryStatus.SUCCEEDED and result.frame.frame_id == "late"


def test_stale_frame_is_not_used():
    clock = FakeClock()
    frames = LatestFrame(clock)
    frames.put(Message("old"))
    clock.now += 2.5
    assert frames.fresh(2.0) is None
    assert frames.fresh(0.0).message.label == "old"  # 0 disables the age check
    clock.now -= 1.0
    assert frames.fresh(2.0).message.label == "old"


def test_stale_frame_fails_with_its_age(stop_runners):
    clock = FakeClock()
    runner, _, outputs, frames = make_runner(max_frame_age_s=1.0, frame_wait_s=0.05, clock=clock)
    stop_runners(runner)
    frames.put(Message("old"))
    clock.now += 5.0
    runner.submit(Query("a", "x"))
    (result,) = outputs.wait_results(1)
    assert result.status == QueryStatus.FAILED
    assert "no frame newer than max_frame_age_s=1 s (last one 5.0 s ago" in result.error


def test_unusable_frame_fails_with_the_reason_and_the_header(stop_runners):
    runner, _, outputs, frames = make_runner()
    stop_runners(runner)
    frames.put(Message("bad-camera", usable=False))
    runner.submit(Query("a", "x"))
    (result,) = outputs.wait_results(1)
    assert result.status == QueryStatus.FAILED
    assert result.error == "unusable frame: unsupported image encoding 'yuv422'"
    assert result.to_json()["frame_id"] == "bad-camera"
    assert result.to_json()["stamp"] == {"sec": 7, "nanosec": 8}


def test_cancel_during_the_frame_wait_ends_cancelled(stop_runners):
    runner, _, outputs, _ = make_runner(frame_wait_s=TIMEOUT)
    stop_runners(runner)
    runner.submit(Query("a", "x"))
    runner.submit(Query("b", "y"))  # preempts a while it waits for a frame
    runner.cancel_all("node deactivated")
    results = outputs.wait_results(2)
    assert {r.query_id: r.error for r in results} == {"a": "preempted by query b",
                                                      "b": "node deactivated"}


def test_reject_publishes_one_failed_result(stop_runners):
    runner, _, outputs, _ = make_runner()
    stop_runners(runner)
    runner.reject(Query("q-1", ""), "empty query")
    (result,) = outputs.wait_results(1)
    assert (result.status, result.error) == (QueryStatus.FAILED, "empty query")
    assert outputs.phases("q-1") == ["done"]


def test_cancel_all_and_wait_idle(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    runner.submit(Query("b", "y"))
    runner.cancel_all("node deactivated")
    assert runner.wait_idle(TIMEOUT)
    results = outputs.wait_results(2)
    assert {r.query_id: r.status for r in results} == {"a": QueryStatus.CANCELLED,
                                                       "b": QueryStatus.CANCELLED}
    assert not runner.busy


def test_worker_survives_a_crashing_agent(stop_runners):
    outputs, frames = Outputs(), LatestFrame()
    calls = []

    def crashing(frame, query, cancel, on_status):
        calls.append(query.id)
        if query.id == "boom":
            raise RuntimeError("bug")
        return Result(query.id, query.text, QueryStatus.NO_MASK, frame=frame)

    runner = QueryRunner(answer=crashing, to_frame=to_frame, publish=outputs.publish,
                         status=outputs.status, frames=frames, policy=QUEUE)
    runner.start()
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("boom", "x"))
    runner.submit(Query("fine", "y"))
    results = outputs.wait_results(2)
    assert [(r.query_id, r.status) for r in results] == [("boom", QueryStatus.FAILED),
                                                         ("fine", QueryStatus.NO_MASK)]


def test_submit_after_stop_fails_the_query():
    runner, _, outputs, _ = make_runner()
    assert runner.stop("bye", TIMEOUT)
    runner.submit(Query("late", "x"))
    (result,) = outputs.wait_results(1)
    assert result.status == QueryStatus.FAILED and "shutting down" in result.error


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown query policy"):
        QueryRunner(answer=None, to_frame=None, publish=None, status=None,
                    frames=LatestFrame(), policy="lifo")


def test_refusal_follows_the_queue_and_stop(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE, queue_size=1)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    assert runner.refusal() is None
    runner.submit(Query("b", "y"))  # waits: the queue is now full
    assert runner.refusal().startswith("queue full (queue_size=1): ")
    agent.release("a")
    agent.release("b")
    outputs.wait_results(2)
    assert runner.refusal() is None
    assert runner.stop("test over", TIMEOUT)
    assert runner.refusal() == "the node is shutting down"


def test_cancel_one_query_running_or_waiting(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    runner.submit(Query("b", "y"))
    runner.submit(Query("c", "z"))
    assert runner.cancel("b", "goal cancelled")  # waiting: ends at once
    assert runner.cancel("a", "goal cancelled")  # running: the agent sees its token
    agent.release("c")
    outputs.wait_results(3)
    assert outputs.result("b").status == QueryStatus.CANCELLED
    assert outputs.result("b").error == "goal cancelled"
    assert outputs.result("a").status == QueryStatus.CANCELLED
    assert outputs.result("c").status == QueryStatus.SUCCEEDED
    assert outputs.phases("b") == ["queued", "done"]
    assert not runner.cancel("a", "again")  # finished: unknown


# --- refinements: on the refined answer's frame (the agent's), never preempting that answer -----

def test_a_refinement_needs_no_camera_frame(stop_runners):
    runner, agent, outputs, frames = make_runner(frame_wait_s=30.0)
    stop_runners(runner)
    runner.submit(Query("r", "no, the other one", refines="a"))  # no frame ever arrived
    agent.release("r")
    (result,) = outputs.wait_results(1)  # at once: it did not wait frame_wait_s for a frame
    assert result.status == QueryStatus.SUCCEEDED and agent.frames["r"] is None
    assert [(e.phase.value, e.refines) for e in outputs.statuses if e.query_id == "r"] == [
        ("queued", "a"), ("thinking", None), ("done", None)]  # the agent's own events: its own


def test_a_refinement_does_not_preempt_the_query_it_refines(stop_runners):
    runner, agent, outputs, frames = make_runner(PREEMPT)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "the red cup"))
    agent.wait_started("a")
    runner.submit(Query("b", "the blue cup"))  # cancels a; waits until a has ended
    runner.submit(Query("c", "no, the other one", refines="b"))  # spares the waiting b
    agent.release("b")
    agent.release("c")
    outputs.wait_results(3)
    assert outputs.result("a").status == QueryStatus.CANCELLED
    assert [r.query_id for r in outputs.results[1:]] == ["b", "c"]
    assert outputs.result("b").status == QueryStatus.SUCCEEDED


def test_a_refinement_spares_the_running_query_it_refines(stop_runners):
    runner, agent, outputs, frames = make_runner(PREEMPT)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "the red cup"))
    agent.wait_started("a")
    runner.submit(Query("r", "no, the other one", refines="a"))
    agent.release("a")
    agent.release("r")
    results = outputs.wait_results(2)
    assert [(r.query_id, r.status) for r in results] == [("a", QueryStatus.SUCCEEDED),
                                                        ("r", QueryStatus.SUCCEEDED)]


def test_a_refinement_that_never_ran_still_names_what_it_refines(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    runner.submit(Query("r", "the other one", refines="a"))
    assert runner.cancel("r", "goal cancelled by the client")
    (cancelled,) = outputs.wait_results(1)
    assert cancelled.status == QueryStatus.CANCELLED and cancelled.refines == "a"
    assert cancelled.to_json()["refines"] == "a"
    agent.release("a")
    outputs.wait_results(2)


def test_a_full_queue_fails_the_query_at_once_saying_what_to_do(stop_runners):
    runner, agent, outputs, frames = make_runner(QUEUE, queue_size=1)
    stop_runners(runner)
    frames.put(Message("f"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    runner.submit(Query("b", "y"))  # waits
    runner.submit(Query("c", "z"))  # the queue is full: its result is out before submit returns
    (refused,) = outputs.results
    assert (refused.query_id, refused.status) == ("c", QueryStatus.FAILED)
    assert refused.error.startswith("queue full (queue_size=1)")
    assert "1 query is already waiting" in refused.error
    assert "send it again" in refused.error and "query_policy" in refused.error
    assert outputs.phases("c") == ["done"]
    agent.release("a")
    agent.release("b")
    assert [r.query_id for r in outputs.wait_results(3)] == ["c", "a", "b"]


def test_the_world_of_a_frame_is_bound_when_the_query_takes_it(stop_runners):
    """CONTRACTS §11: ``bind`` runs when the query takes its frame (at submit; for a query that
    waited for a frame, when it came), never when the queued query finally runs; the frame the
    agent gets carries what it bound. A failing bind leaves the query to run without one."""
    agent, outputs, frames = GatedAgent(), Outputs(), LatestFrame()
    bound: list[str] = []

    def bind(msg: Message) -> object:
        if msg.label == "explodes":
            raise RuntimeError("bind failed")
        bound.append(msg.label)
        return f"world of {msg.label}"

    runner = QueryRunner(answer=agent.run, to_frame=to_frame, publish=outputs.publish,
                         status=outputs.status, frames=frames, policy=QUEUE,
                         frame_wait_s=5.0, bind=bind)
    runner.start()
    stop_runners(runner)
    frames.put(Message("f1"))
    runner.submit(Query("a", "x"))
    agent.wait_started("a")
    frames.put(Message("f2"))
    runner.submit(Query("b", "x"))  # queued behind a: takes f2 now
    frames.put(Message("f3"))
    assert bound == ["f1", "f2"]
    agent.release("a")
    agent.release("b")
    outputs.wait_results(2)
    assert agent.frames["a"].world == "world of f1"
    assert (agent.frames["b"].frame_id, agent.frames["b"].world) == ("f2", "world of f2")
    frames.clear()
    runner.submit(Query("c", "x"))  # no frame yet: bound when one comes
    frames.put(Message("f4"))
    agent.release("c")
    outputs.wait_results(3)
    assert bound[-1] == "f4" and agent.frames["c"].world == "world of f4"
    frames.put(Message("explodes"))
    runner.submit(Query("d", "x"))
    agent.release("d")
    outputs.wait_results(4)
    assert agent.frames["d"].world is None and outputs.result("d").status == QueryStatus.SUCCEEDED
