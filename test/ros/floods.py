"""Floods a peer can send a node (test/ros/test_log_floods.py, bench/log_floods.py): each for a
few seconds as fast as one client goes, then the node's log lines of that kind counted.

Each flood uses one client made once (a ``set_parameters`` client, a ``Trigger`` client, a
``query`` writer), so the node, not this process, sets the pace.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.srv import SetParameters
from std_msgs.msg import String

from test.ros.helpers import Harness, NodeProcess, parameter_messages

LOG_LINE = re.compile(r"^\[(DEBUG|INFO|WARN|ERROR|FATAL)\] \[(\d+\.\d+)\] \[[^\]]+\]: (.*)$")


@dataclass(frozen=True)
class Flood:
    name: str
    sent: int  # requests or messages sent
    seconds: float
    lines: int  # log lines of the kind written meanwhile (and up to ``settle_s`` after)
    suppressed_said: bool  # a line said how many were suppressed

    @property
    def sent_per_s(self) -> float:
        return self.sent / self.seconds

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds


def log_lines(proc: NodeProcess) -> list[str]:
    """The messages of the node's rclpy-format log lines."""
    out = []
    for line in proc.log().splitlines():
        match = LOG_LINE.match(line)
        if match:
            out.append(match.group(3))
    return out


def flood(name: str, proc: NodeProcess, send: Callable[[], None], kind: Callable[[str], bool],
          seconds: float, settle_s: float = 1.5) -> Flood:
    """``send()`` in a loop for ``seconds``; the log lines ``kind`` matches that the flood
    added (counted ``settle_s`` later: the node writes what it has)."""
    before = sum(1 for line in log_lines(proc) if kind(line))
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        send()
        sent += 1
    elapsed = time.monotonic() - started
    time.sleep(settle_s)
    mine = [line for line in log_lines(proc) if kind(line)][before:]
    return Flood(name, sent, elapsed, len(mine), any("suppressed in the last" in line
                                                     for line in mine))


class ParameterSetter:
    """``set_parameters`` requests over one client; ``send`` waits for each answer."""

    def __init__(self, harness: Harness, node_name: str, timeout_s: float = 5.0):
        self._client = harness.created(
            lambda: harness.node.create_client(SetParameters, f"{node_name}/set_parameters"))
        assert self._client.wait_for_service(timeout_sec=30)
        self._timeout_s = timeout_s
        self.replies: list[Any] = []

    def send(self, values: dict[str, Any]) -> Any:
        future = self._client.call_async(SetParameters.Request(
            parameters=parameter_messages(values)))
        deadline = time.monotonic() + self._timeout_s
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.0005)
        reply = future.result() if future.done() else None
        self.replies.append(reply)
        return reply


class Trigger:
    """A ``std_srvs/Trigger`` service over one client; ``send`` waits for each answer."""

    def __init__(self, harness: Harness, service: str):
        from std_srvs.srv import Trigger as TriggerSrv

        self._type = TriggerSrv
        self._client = harness.created(
            lambda: harness.node.create_client(TriggerSrv, service))
        assert self._client.wait_for_service(timeout_sec=30)

    def send(self) -> Any:
        future = self._client.call_async(self._type.Request())
        deadline = time.monotonic() + 5.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.0005)
        return future.result() if future.done() else None


def stop_follow_writer(harness: Harness, namespace: str) -> Callable[[], None]:
    writer = harness.publisher(f"{namespace}/query")
    message = String(data=json.dumps({"stop_follow": True}))
    return lambda: writer.publish(message)
