"""The executable ``sam3_agent_node``: early exits (--help, unreadable files), logging, rclpy
start-up, the spin until Ctrl-C / SIGTERM / a failed autostart, and the exit status (0; 1 when the
autostart failed; 2 when rclpy cannot start)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from sam3_agent_ros.redact import install_log_redaction
from sam3_agent_ros.ros import node_cli, rclpy_compat
from sam3_agent_ros.ros.python_logging import configure_node_logging
from sam3_agent_ros.ros.spinning import sigint_noted, spin_until_shutdown

# At process exit (Ctrl-C, SIGTERM) nothing can be published any more (rclpy has shut the context
# down) and the worker, follow and concepts threads are daemons: each gets this long to see that it
# was cancelled, then the process exits without it; a SAM 3 or LLM call in flight would otherwise
# hold the exit for its whole length (bench/node_exit.py: exit within 2 s, even mid-query).
EXIT_WAIT_S = 0.5


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
        # Ctrl-C is noted, never raised mid-callback (ros/spinning.py); rclpy's handler, installed
        # by init, shuts the context down and passes the signal on to this one.
        with sigint_noted() as interrupted, rclpy_compat.initialized(args=argv):
            node = node_class()
            start_up_failed = node.start_up_failed
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:  # not executor.spin(): see ros/spinning.py
                spin_until_shutdown(
                    executor, stop=lambda: interrupted.is_set() or start_up_failed.is_set())
            finally:
                node.release(EXIT_WAIT_S)
                executor.shutdown(timeout_sec=1.0)
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except rclpy_compat.InitFailed as exc:  # e.g. a params file rcl cannot parse
        sys.stderr.write(f"{node_cli.PROGRAM}: cannot start: {exc}\n")
        return 2
    return 1 if start_up_failed.is_set() else 0
