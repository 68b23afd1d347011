"""Spinning an executor until rclpy shuts down, without missing the shutdown.

On SIGINT/SIGTERM, rclpy's signal thread first triggers the executors' SIGINT guard conditions,
then shuts the contexts down, in C++: no Python ``on_shutdown`` callback runs, so nothing wakes an
executor a second time. An executor that went back to waiting between the two steps (the signal
thread was preempted, as on a loaded machine) stays in its wait: ``executor.spin()`` has no
timeout, and an idle node has nothing else that would wake it. In a terminal, Python's
KeyboardInterrupt ends the process anyway; a process started with SIGINT ignored has no such
handler (a background job of a script, ``cmd &``, CI) and hung after Ctrl-C (the suite saw a node
still running 15 s after SIGINT, in this very wait).

Ctrl-C must not raise either. rclpy's C handler passes the signal on to Python's, whose
``KeyboardInterrupt`` then comes out of whatever Python code runs next in the main thread: under
load, the constructor of an image being taken off the wire, inside rclpy's C++ ``take_message``,
which turns it into ``RuntimeError: Unable to convert call argument '0' to Python object``. The
node then died with a traceback and a non-zero status instead of exiting cleanly (seen in
test_action.py beside another suite). ``sigint_noted`` replaces Python's handler for the node's
life by one that only notes the signal; rclpy still shuts the context down, and the spin loop
ends on either. Without a ``KeyboardInterrupt`` the race with rclpy's signal thread shows
elsewhere: the context may go down between the loop's check and the wait set, and the wait then
raises ``RCLError``; the loop takes that as the shutdown it is (seen in test_node.py).

The node's main now leaves rclpy's handlers out altogether (``stop_signals_noted``: SIGINT and
SIGTERM only set an event, ``SignalHandlerOptions.NO``): the context then stays up after the
signal, so that every taken query and goal still gets its result before the node goes
(CONTRACTS §11, ros/node_main.py); the spin ends on ``stop``, within ``CHECK_S``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

CHECK_S = 0.2  # the longest the executor waits before it looks at the context and stop again


def spin_until_shutdown(executor: Any, check_s: float = CHECK_S,
                        stop: Callable[[], bool] = lambda: False) -> None:
    """``executor.spin()``, but the wait times out every ``check_s`` to see whether the context
    is still running and ``stop()`` is still false: returns at most ``check_s`` after either
    changed, however it changed. What ``spin_once`` raises once either has changed ends the spin
    too: rclpy's signal thread may shut the context down between our check and the wait, and
    building a wait set on a shut-down context raises ``RCLError`` ("the given context is not
    valid"), as ``ExternalShutdownException`` is raised elsewhere. Raised while both still hold,
    it propagates (a failed callback)."""
    while executor.context.ok() and not stop():
        try:
            executor.spin_once(timeout_sec=check_s)
        except Exception:
            if executor.context.ok() and not stop():
                raise
            return


@contextmanager
def sigint_noted() -> Iterator[threading.Event]:
    """Within the block, SIGINT sets the yielded event instead of raising ``KeyboardInterrupt``
    (main thread only, like every signal handler). Entered before ``rclpy.init`` with rclpy's
    handlers, theirs shuts the contexts down and then calls this one."""
    with stop_signals_noted((signal.SIGINT,)) as noted:
        yield noted


@contextmanager
def stop_signals_noted(signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
                       ) -> Iterator[threading.Event]:
    """Within the block, each of ``signals`` sets the yielded event, nothing else (no
    ``KeyboardInterrupt``, no exit): the node's main, with rclpy's handlers left out
    (``SignalHandlerOptions.NO``), ends its spin on it and still has a running context in which
    to end its queries (ros/node_main.py). The previous handlers are back when the block ends."""
    noted = threading.Event()
    previous = {sig: signal.signal(sig, lambda signum, frame: noted.set()) for sig in signals}
    try:
        yield noted
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
