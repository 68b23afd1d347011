"""Bounded waits for the tests: poll a condition until it holds or a deadline passes.

The deadline is generous (a loaded machine is slow, never wrong): a test that waits this long has
failed, and says what it waited for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

TIMEOUT_S = 20.0
POLL_S = 0.01


def wait_until(predicate: Callable[[], object], what: str, timeout: float = TIMEOUT_S) -> None:
    """Return as soon as ``predicate()`` is true; AssertionError naming ``what`` after
    ``timeout`` seconds."""
    pause = threading.Event()  # never set: an interruptible sleep
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        pause.wait(POLL_S)
