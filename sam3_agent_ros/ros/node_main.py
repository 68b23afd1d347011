"""The executable ``sam3_agent_node``: early exits (--help, unreadable files), logging, rclpy
start-up, the spin until Ctrl-C / SIGTERM / a failed autostart, the end of every taken query and
goal with its result, and the exit status (0; 1 when the autostart failed; 2 when rclpy cannot
start).

Shutdown (CONTRACTS §11): rclpy's own signal handlers are not installed (they would shut the
context down at once, and nothing could be published any more); SIGINT and SIGTERM are noted
(``ros/spinning.stop_signals_noted``), the spin ends, and while the middleware still runs every
query the node has taken, running or waiting, ends ``failed`` "node shutting down" (each goal
``aborted``) without waiting for the model call in flight; the executor spins until every
goal's result has been sent (at most ``RESULTS_WAIT_S``), the result topics are acknowledged,
and only then do the node and the context go down."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from sam3_agent_ros.redact import install_log_redaction
from sam3_agent_ros.ros import node_cli, rclpy_compat
from sam3_agent_ros.ros.python_logging import configure_node_logging
from sam3_agent_ros.ros.spinning import spin_until_shutdown, stop_signals_noted

# At process exit (Ctrl-C, SIGTERM) nothing can be published any more (rclpy has shut the context
# down) and the worker, follow and concepts threads are daemons: each gets this long to see that it
# was cancelled, then the process exits without it; a SAM 3 or LLM call in flight would otherwise
# hold the exit for its whole length (bench/node_exit.py: exit within 2 s, even mid-query).
EXIT_WAIT_S = 0.5
RESULTS_WAIT_S = 1.0  # at exit: the most the goals' results and the result topic may take to go
LINGER_S = 0.1  # spun after the last goal ended: its result response leaves the process
# The most the result topics wait for acknowledgements at exit: a reader that got its result and
# left (an ask that exited) is still matched until discovery drops it, and never acknowledges.
FLUSH_S = 0.3


def end_queries_before_exit(node: Any, executor: Any, wait_s: float = RESULTS_WAIT_S) -> None:
    """Every taken query and goal ends with its result, sent before the node goes (see above)."""
    if not executor.context.ok():  # shut down from elsewhere: nothing can be sent any more
        return
    node.end_queries()
    deadline = time.monotonic() + wait_s
    linger_until = None
    while executor.context.ok():
        now = time.monotonic()
        if now >= deadline or (linger_until is not None and now >= linger_until):
            break
        if linger_until is None and not node.goals_in_flight():
            linger_until = now + LINGER_S
        try:
            executor.spin_once(timeout_sec=0.02)
        except Exception:  # noqa: BLE001 (a callback failing at exit must not keep the node)
            break
    node.flush_results(min(FLUSH_S, max(0.0, deadline - time.monotonic())))


def run(node_class: Callable[[], Any], args: list[str] | None = None) -> int:
    """Run the node of ``node_class`` (``Sam3AgentNode``) until shutdown; the exit status."""
    argv = list(sys.argv if args is None else args)
    early = node_cli.early_exit(argv[1:], sys.stdout, sys.stderr)  # --help, unreadable files
    if early is not None:
        return early
    configure_node_logging()  # Python's lines (httpx, openai, ours) in rclpy's format
    install_log_redaction()  # no URL credentials in any Python log line (httpx, openai, ours)
    start_up_failed = threading.Event()
    try:
        # Ctrl-C and SIGTERM are noted, never raised mid-callback (ros/spinning.py); rclpy's own
        # handlers are not installed: the context must outlive the spin (see above).
        from rclpy.signals import SignalHandlerOptions

        with stop_signals_noted() as interrupted, rclpy_compat.initialized(
                args=argv, signal_handler_options=SignalHandlerOptions.NO):
            node = node_class()
            start_up_failed = node.start_up_failed
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:  # not executor.spin(): see ros/spinning.py
                spin_until_shutdown(
                    executor, stop=lambda: interrupted.is_set() or start_up_failed.is_set())
            finally:
                end_queries_before_exit(node, executor)
                node.release(EXIT_WAIT_S)
                executor.shutdown(timeout_sec=1.0)
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except rclpy_compat.InitFailed as exc:  # e.g. a params file rcl cannot parse
        sys.stderr.write(f"{node_cli.PROGRAM}: cannot start: {exc}\n")
        return 2
    return 1 if start_up_failed.is_set() else 0
