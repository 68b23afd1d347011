"""A newest-only frame slot and the one worker thread that takes from it (follow, concepts).

ROS-free (the message is whatever the image callback received), so the threading is unit-tested
without a ROS graph.

- the image callback calls ``offer(message)``: O(1); when the owner wants no frame it returns at
  once, else the message replaces the slot's (never a queue: a frame the worker had no time for
  is dropped, so latency never builds up);
- the worker thread asks the owner's ``plan`` (under ``changed``, the lock the owner's own state
  shares) what to do: run some work now (outside the lock; it may ``take`` the slot's frame while
  planning), or wait (for a while: a watchdog, a rate limit; or until something changes);
- ``stop`` clears the slot and ends the thread after the work it runs; ``on_stop`` (the owner's
  last words, e.g. final statuses) runs on the worker thread as it ends.

An owner changes the state its ``plan`` reads under ``changed`` and then calls ``notify_all`` on
it, so the worker plans again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

M = TypeVar("M")
Work = Callable[[], None]


@dataclass(frozen=True)
class Offered(Generic[M]):
    message: M
    received: float  # clock() at offer


@dataclass(frozen=True)
class Wait:
    """No work now: plan again after ``seconds`` (None: when something changes)."""

    seconds: float | None


def _nothing() -> None:
    return None


def _settled() -> bool:
    return True


class NewestFrameWorker(Generic[M]):
    """One newest-only slot and the thread that works from it.

    - ``plan() -> Work | Wait`` runs under ``changed`` on the worker thread;
    - ``wanted()`` says whether a frame is worth keeping now (checked before and under the lock);
    - ``on_stop()`` runs once on the worker thread when it ends (or in ``stop`` if never started);
    - ``label`` names the worker in its log lines, ``thread_name`` its thread.
    """

    def __init__(self, *, plan: Callable[[], Work | Wait], label: str, thread_name: str,
                 wanted: Callable[[], bool] = _settled, on_stop: Work = _nothing,
                 clock: Callable[[], float] = time.monotonic):
        self._plan = plan
        self._wanted = wanted
        self._on_stop = on_stop
        self._label = label
        self._thread_name = thread_name
        self._clock = clock
        self.changed = threading.Condition()  # reentrant: the owner's state shares it
        self._slot: Offered[M] | None = None
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    # --- any thread ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    @property
    def stopping(self) -> bool:
        return self._stopping

    def offer(self, message: M) -> bool:
        """Keep ``message`` as the newest frame (when wanted); True when it replaced a frame the
        worker had not taken (a dropped frame)."""
        if not self._wanted():
            return False
        offered = Offered(message, self._clock())
        with self.changed:
            if not self._wanted():
                return False
            dropped = self._slot is not None
            self._slot = offered
            self.changed.notify_all()
        return dropped

    @property
    def newest(self) -> Offered[M] | None:
        """The frame waiting in the slot (still there), or None."""
        return self._slot

    def take(self) -> Offered[M] | None:
        """The frame waiting in the slot, removed from it (the worker's ``plan`` calls it)."""
        with self.changed:
            offered, self._slot = self._slot, None
            return offered

    def clear(self) -> None:
        """Drop the waiting frame."""
        with self.changed:
            self._slot = None

    def wait_idle(self, timeout_s: float, settled: Callable[[], bool] = _settled) -> bool:
        """Until no work runs and ``settled()`` (read under the lock) holds; False on timeout."""
        with self.changed:  # the worker notifies whenever a piece of work has finished
            return self.changed.wait_for(lambda: not self._busy and settled(), timeout_s)

    def stop(self, timeout_s: float) -> bool:
        """Clear the slot and end the thread; False when it did not finish in time."""
        with self.changed:
            self._stopping = True
            self._slot = None
            self.changed.notify_all()
        thread = self._thread
        if thread is None:
            self._on_stop()
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    # --- the worker thread -----------------------------------------------------------------------
    def _next(self) -> Work | None:
        """The next work, or None once stopping. Under ``changed``."""
        while not self._stopping:
            step = self._plan()
            if not isinstance(step, Wait):
                return step
            if step.seconds is None or step.seconds > 0:
                self.changed.wait(step.seconds)
        return None

    def _run(self) -> None:
        while True:
            with self.changed:
                work = self._next()
                self._busy = True
            try:
                (work or self._on_stop)()
            except Exception:  # noqa: BLE001 (the thread must survive anything)
                log.exception("%s: unexpected failure", self._label)
            finally:
                with self.changed:
                    self._busy = False
                    self.changed.notify_all()
            if work is None:
                return
