"""pipeline/inbox.py: the query topic's messages read in order by one intake thread; a full
inbox answers at once; each message is handled or refused exactly once."""

from __future__ import annotations

import threading

from sam3_agent_ros.pipeline.inbox import QueryInbox, inbox_full_reason
from test.waiting import wait_until


class Recorder:
    def __init__(self, gate: threading.Event | None = None):
        self.handled: list[str] = []
        self.refused: list[tuple[str, str]] = []
        self.gate = gate  # the intake thread waits on it inside handle (a slow intake)

    def handle(self, raw: str) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        self.handled.append(raw)

    def refuse(self, raw: str, reason: str) -> None:
        self.refused.append((raw, reason))


def test_messages_are_handled_in_arrival_order_off_the_callers_thread():
    record = Recorder()
    threads: set[str] = set()
    inbox = QueryInbox(lambda raw: (threads.add(threading.current_thread().name),
                                    record.handle(raw)), record.refuse)
    inbox.start()
    try:
        for k in range(1000):
            assert inbox.put(f"m{k}")
        assert inbox.wait_empty(10)
        assert record.handled == [f"m{k}" for k in range(1000)] and not record.refused
        assert threads == {"sam3_agent_intake"}
    finally:
        inbox.stop("stopped", 5)


def test_a_full_inbox_refuses_at_once_each_message_once():
    gate = threading.Event()
    record = Recorder(gate)
    inbox = QueryInbox(record.handle, record.refuse, max_messages=3)
    inbox.start()
    try:
        assert inbox.put("first")  # taken by the intake thread, which then waits on the gate
        wait_until(lambda: inbox.backlog == 0, "the intake thread to take the first")
        queued = [inbox.put(f"q{k}") for k in range(10)]
        assert queued == [True] * 3 + [False] * 7
        assert record.refused == [(f"q{k}", inbox_full_reason(3)) for k in range(3, 10)]
        assert inbox.refused_full == 7
        gate.set()
        assert inbox.wait_empty(10)
        assert record.handled == ["first", "q0", "q1", "q2"]
    finally:
        gate.set()
        inbox.stop("stopped", 5)
    assert inbox_full_reason(3).startswith("queue full")


def test_the_inbox_is_bounded_in_bytes_too():
    gate = threading.Event()
    record = Recorder(gate)
    inbox = QueryInbox(record.handle, record.refuse, max_messages=100, max_bytes=1000)
    inbox.start()
    try:
        inbox.put("x")
        wait_until(lambda: inbox.backlog == 0, "the intake thread to take the first")
        assert inbox.put("a" * 600) and not inbox.put("b" * 600)
        assert [raw[0] for raw, _ in record.refused] == ["b"]
    finally:
        gate.set()
        inbox.stop("stopped", 5)


def test_drain_and_stop_refuse_what_waits_and_stop_refuses_later_messages():
    gate = threading.Event()
    record = Recorder(gate)
    inbox = QueryInbox(record.handle, record.refuse)
    inbox.start()
    inbox.put("running")
    wait_until(lambda: inbox.backlog == 0, "the intake thread to take the first")
    inbox.put("a")
    inbox.put("b")
    assert inbox.drain("node deactivated") == 2
    inbox.put("c")
    gate.set()
    assert inbox.wait_empty(10)
    gate.clear()
    inbox.put("d")  # the intake thread waits on the gate inside handle("d")
    wait_until(lambda: inbox.backlog == 0, "the intake thread to take d")
    inbox.put("e")
    gate.set()
    assert inbox.stop("node shutting down", 5)
    assert not inbox.put("f")
    handled, refused = record.handled, dict(record.refused)
    assert handled == ["running", "c", "d"]
    assert refused == {"a": "node deactivated", "b": "node deactivated",
                       "e": "node shutting down", "f": "node shutting down"}


def test_the_intake_survives_a_handler_that_raises():
    seen: list[str] = []

    def handle(raw: str) -> None:
        if raw == "bad":
            raise RuntimeError("boom")
        seen.append(raw)

    inbox = QueryInbox(handle, lambda raw, reason: None)
    inbox.start()
    try:
        for raw in ("a", "bad", "b"):
            inbox.put(raw)
        assert inbox.wait_empty(10)
        assert seen == ["a", "b"]
    finally:
        inbox.stop("stopped", 5)
