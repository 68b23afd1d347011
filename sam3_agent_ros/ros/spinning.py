"""Spinning an executor until rclpy shuts down, without missing the shutdown.

On SIGINT/SIGTERM, rclpy's signal thread first triggers the executors' SIGINT guard conditions,
then shuts the contexts down, in C++: no Python ``on_shutdown`` callback runs, so nothing wakes an
executor a second time. An executor that went back to waiting between the two steps (the signal
thread was preempted, as on a loaded machine) stays in its wait: ``executor.spin()`` has no
timeout, and an idle node has nothing else that would wake it. In a terminal, Python's
KeyboardInterrupt ends the process anyway; a process started with SIGINT ignored has no such
handler (a background job of a script, ``cmd &``, CI) and hung after Ctrl-C (the suite saw a node
still running 15 s after SIGINT, in this very wait).
"""

from __future__ import annotations

from typing import Any

CHECK_S = 0.5  # the longest the executor waits before it looks at the context again


def spin_until_shutdown(executor: Any, check_s: float = CHECK_S) -> None:
    """``executor.spin()``, but the wait times out every ``check_s`` to see whether the context
    is still running: returns at most ``check_s`` after it stopped, however it stopped (raises
    what ``spin_once`` raises, e.g. ``ExternalShutdownException`` or ``KeyboardInterrupt``)."""
    while executor.context.ok():
        executor.spin_once(timeout_sec=check_s)
