"""What the worker-thread tests of follow_runner and concepts_runner share: a fake camera
message (``Msg``) and its converter, a publisher that records what it is given, and a runner
started for the length of a ``with`` block."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from sam3_agent_ros.core.types import Frame, FrameUnusable
from test.waiting import TIMEOUT_S


@dataclass
class Msg:
    """A camera message: its stamp's seconds; ``bad`` ones cannot be converted."""

    sec: int
    bad: bool = False


def frame_converter(rgb: np.ndarray) -> Callable[[Msg], Frame]:
    """A runner's ``to_frame``: every good ``Msg`` becomes a frame of ``rgb``, stamped ``sec``;
    a bad one raises FrameUnusable, as an image of an unsupported encoding does."""
    def to_frame(msg: Msg) -> Frame:
        if msg.bad:
            raise FrameUnusable("bad encoding")
        return Frame(rgb, msg.sec, 0, "cam")

    return to_frame


class Collected:
    """A publisher's record: ``items`` in the order published, and a bounded wait on them."""

    def __init__(self):
        self.items: list = []
        self.changed = threading.Condition()

    def add(self, item) -> None:
        with self.changed:
            self.items.append(item)
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[list], object], what: str,
                 describe: Callable[[], object] | None = None) -> None:
        """Until ``predicate(items)`` holds: AssertionError after TIMEOUT_S, naming ``what`` and
        what was published (``describe()``, default the items)."""
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.items), TIMEOUT_S), (
                f"timed out waiting for {what}; got {(describe or (lambda: self.items))()}")


@contextmanager
def running(runner) -> Iterator:
    """``runner`` started; on leaving, shut down within TIMEOUT_S (asserted)."""
    runner.start()
    try:
        yield runner
    finally:
        assert runner.shutdown(TIMEOUT_S)
