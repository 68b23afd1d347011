"""A cancel handle shared by the caller and a running query."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class CancelToken:
    """Set once by the caller (preemption, deactivate, Ctrl-C); polled by the loop between steps
    and waited on by blocking calls (LLM requests) so they can return early.

    ``deadline`` is a ``time.monotonic()`` value after which blocking calls should give up. A child
    token (``child(deadline)``) is cancelled whenever its parent is; ``parent`` is the token it
    came from (None for a root)."""

    def __init__(self, deadline: float | None = None, parent: CancelToken | None = None):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._children: list[CancelToken] = []
        self._callbacks: list[Callable[[], None]] = []
        self.reason = ""
        self.deadline = deadline
        self.parent = parent

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            children = list(self._children)
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:  # e.g. cut an HTTP call in flight (llm/in_flight.py)
            callback()
        for child in children:
            child.cancel(reason)

    def child(self, deadline: float | None = None) -> CancelToken:
        token = CancelToken(deadline, parent=self)
        with self._lock:
            self._children.append(token)
            cancelled = self._event.is_set()
        if cancelled:
            token.cancel(self.reason)
        return token

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (quick, never raising) on the cancelling thread when this token is
        cancelled, at once if it already is; returns the function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def release(self, child: CancelToken) -> None:
        """Forget a finished child (keeps long-lived parents from accumulating children)."""
        with self._lock:
            if child in self._children:
                self._children.remove(child)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def remaining(self) -> float | None:
        """Seconds until the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def wait(self, timeout: float | None) -> bool:
        """Sleep up to ``timeout`` seconds; True as soon as cancelled."""
        return self._event.wait(timeout)
