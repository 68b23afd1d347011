"""The newest-only frame slot and its worker loop (follow and concepts run on it), ROS-free."""

from __future__ import annotations

import threading

from sam3_agent_ros.pipeline.newest_frame import NewestFrameWorker, Wait, Work
from test.waiting import TIMEOUT_S as DEADLINE_S
from test.waiting import wait_until


class Owner:
    """A worker's owner: takes every newest frame, one at a time, while ``gate`` is open."""

    def __init__(self, wanted: bool = True, wake_every_s: float | None = None):
        self.gate = threading.Event()
        self.gate.set()
        self.seen: list[str] = []
        self.plans = 0
        self.stopped_on: list[str] = []
        self.want = wanted
        self.wake_every_s = wake_every_s
        self.worker: NewestFrameWorker[str] = NewestFrameWorker(
            plan=self.plan, label="test", thread_name="test_worker",
            wanted=lambda: self.want, on_stop=self.on_stop)

    def plan(self) -> Work | Wait:
        self.plans += 1
        offered = self.worker.take()
        if offered is None:
            return Wait(self.wake_every_s)
        return lambda: self.work(offered.message)

    def work(self, message: str) -> None:
        self.gate.wait(DEADLINE_S)
        if message == "boom":
            raise RuntimeError("work failed")
        self.seen.append(message)

    def on_stop(self) -> None:
        self.stopped_on.append(threading.current_thread().name)


def test_a_busy_worker_gets_only_the_newest_frame_and_the_others_count_as_dropped():
    owner = Owner()
    owner.worker.start()
    owner.gate.clear()
    assert owner.worker.offer("a") is False
    wait_until(lambda: owner.worker.newest is None, "the worker to take a")
    dropped = [owner.worker.offer(m) for m in ("b", "c", "d")]
    assert dropped == [False, True, True]
    owner.gate.set()
    assert owner.worker.wait_idle(DEADLINE_S, settled=lambda: owner.worker.newest is None)
    assert owner.seen == ["a", "d"]
    assert owner.worker.stop(DEADLINE_S)
    assert owner.stopped_on == ["test_worker"]


def test_an_unwanted_frame_is_not_kept():
    owner = Owner(wanted=False)
    assert owner.worker.offer("a") is False
    assert owner.worker.newest is None
    owner.want = True
    owner.worker.offer("b")
    assert owner.worker.newest is not None and owner.worker.newest.message == "b"
    owner.worker.clear()
    assert owner.worker.newest is None


def test_a_timed_wait_plans_again_without_a_frame():
    owner = Owner(wake_every_s=0.01)  # e.g. follow's lost watchdog
    owner.worker.start()
    wait_until(lambda: owner.plans >= 3, "three plans without a frame")
    assert owner.worker.stop(DEADLINE_S)


def test_failing_work_does_not_end_the_worker():
    owner = Owner()
    owner.worker.start()
    owner.worker.offer("boom")
    wait_until(lambda: owner.worker.newest is None, "the worker to take boom")
    assert owner.worker.wait_idle(DEADLINE_S)
    owner.worker.offer("after")
    wait_until(lambda: owner.seen == ["after"], "the frame after the failure")
    assert owner.worker.stop(DEADLINE_S)


def test_stop_drops_the_waiting_frame_and_runs_the_last_words_once():
    owner = Owner()
    owner.gate.clear()
    owner.worker.start()
    owner.worker.offer("a")
    wait_until(lambda: owner.worker.newest is None, "the worker to take a")
    owner.worker.offer("never")
    stopper = threading.Thread(target=owner.worker.stop, args=(DEADLINE_S,))
    stopper.start()
    wait_until(lambda: owner.worker.stopping, "stop to begin")
    owner.gate.set()
    stopper.join(DEADLINE_S)
    assert owner.seen == ["a"]
    assert owner.stopped_on == ["test_worker"]
    assert owner.worker.stopping


def test_a_worker_never_started_says_its_last_words_in_stop():
    owner = Owner()
    assert owner.worker.stop(DEADLINE_S)
    assert owner.stopped_on == [threading.current_thread().name]
