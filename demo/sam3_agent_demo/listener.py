"""The demos' own rclpy node: it listens to the node under test and plays the bag into it.

The CLI verbs' short-lived rclpy start-up (``graph/verb_node.py``: a context of its own, no
signal handlers, so Ctrl-C stays a ``KeyboardInterrupt`` in the demo), spun by a background
thread from ``start()`` until ``close()``; ``stop`` tells the spinner and the replay to end.
rclpy is imported when a ``Listener`` is made (the demo modules import without ROS).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from sam3_agent_demo.node_process import NodeProcess
from sam3_agent_ros.core.types import stamp_ns

SETTLE_S = 0.5  # after the node is up: let our subscriptions match its publishers


class Listener:
    def __init__(self, name: str) -> None:
        from sam3_agent_ros.graph.verb_node import verb_node

        self._stack = contextlib.ExitStack()
        self._ros = self._stack.enter_context(verb_node(name))
        self.context = self._ros.context
        self.node = self._ros.node
        self.stop = self._ros.stop

    def start(self, threads: int = 1) -> None:
        """Spin the node (after its subscriptions are made) on ``threads`` executor threads."""
        self._stack.enter_context(self._ros.spinning(threads))

    def wait_for_node(self, process: NodeProcess, timeout_s: float, subscribed: tuple[str, ...],
                      published: tuple[str, ...], ready=None,
                      optional_subscribed: tuple[str, ...] = (),
                      optional_wait_s: float = 2.0) -> None:
        """Until the node subscribes to ``subscribed`` and publishes ``published`` (it is
        active) and ``ready()`` holds; ``RuntimeError`` when it exits, says its start failed,
        or ``timeout_s`` passes. Then up to ``optional_wait_s`` for ``optional_subscribed``
        (inputs the node may have turned off, e.g. depth)."""
        deadline = time.monotonic() + timeout_s
        while True:
            process.check_starting()
            if all(self.node.count_subscribers(t) > 0 for t in subscribed) and all(
                    self.node.count_publishers(t) > 0 for t in published) and (
                    ready is None or ready()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the node did not become active within {timeout_s:.0f} s")
            time.sleep(0.1)
        optional_deadline = time.monotonic() + optional_wait_s
        while time.monotonic() < optional_deadline and not all(
                self.node.count_subscribers(t) > 0 for t in optional_subscribed):
            time.sleep(0.05)
        time.sleep(SETTLE_S)

    def close(self) -> None:
        """Stop spinning, destroy the node, shut the context down (idempotent)."""
        self.stop.set()
        self._stack.close()


def header_stamp_ns(header) -> int:
    """A message header's stamp in nanoseconds."""
    return stamp_ns(header.stamp.sec, header.stamp.nanosec)


def mono8_to_mask(height: int, width: int, step: int, data: bytes) -> np.ndarray:
    """A mono8 image's bytes -> bool (H, W) mask of the non-zero pixels."""
    rows = np.frombuffer(data, np.uint8)[:height * step].reshape(height, step)
    return rows[:, :width] > 0
