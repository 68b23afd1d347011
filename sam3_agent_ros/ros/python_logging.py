"""The node's Python log lines (openai's, httpx's, any library's) in the format of its rclpy lines,
so its log reads as one: ``[INFO] [1733080000.123456789] [openai._base_client]: message``.

rclpy writes ``RCUTILS_CONSOLE_OUTPUT_FORMAT`` (default ``[{severity}] [{time}] [{name}]:
{message}``); ``RclpyStyleFormatter`` fills the same fields from a ``logging`` record (severity
names as rclpy's: WARN, FATAL). httpx's one INFO line per request (``QUIET_LOGGERS``) is quieted
to WARNING, in the node and in the ``sam3-agent`` CLI. Imports nothing ROS.
"""

from __future__ import annotations

import logging
import os
import sys

QUIET_LOGGERS = ("httpx", "httpx2")  # one INFO line per HTTP request otherwise
DEFAULT_FORMAT = "[{severity}] [{time}] [{name}]: {message}"  # rcutils' default
SEVERITY = {"WARNING": "WARN", "CRITICAL": "FATAL"}  # the other names are the same


class RclpyStyleFormatter(logging.Formatter):
    """A ``logging`` record as rcutils would print it (``RCUTILS_CONSOLE_OUTPUT_FORMAT``'s
    ``{severity}``, ``{name}``, ``{message}``, ``{time}``, ``{time_as_nanoseconds}``,
    ``{function_name}``, ``{file_name}``, ``{line_number}``); a traceback follows the line."""

    def __init__(self, output_format: str | None = None) -> None:
        super().__init__("%(message)s")
        self.output_format = output_format or DEFAULT_FORMAT

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)  # the message, and a traceback after it if any
        seconds = int(record.created)  # apart: a float of ~1.7e18 ns loses the last digits
        nanoseconds = seconds * 10**9 + min(round((record.created - seconds) * 1e9), 10**9 - 1)
        fields = {"severity": SEVERITY.get(record.levelname, record.levelname),
                  "name": record.name, "time": f"{seconds}.{nanoseconds % 10**9:09d}",
                  "time_as_nanoseconds": str(nanoseconds), "function_name": record.funcName,
                  "file_name": record.pathname, "line_number": str(record.lineno)}
        line = self.output_format
        for key, value in fields.items():
            line = line.replace("{" + key + "}", value)
        return line.replace("{message}", message)


def configure_node_logging(level: int = logging.INFO, stream=None) -> None:
    """Python logging of the node process: one handler on stderr (rclpy's console stream) in
    rclpy's format, httpx quieted to WARNING."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(RclpyStyleFormatter(os.environ.get("RCUTILS_CONSOLE_OUTPUT_FORMAT")))
    logging.basicConfig(level=level, handlers=[handler])
    quiet_request_lines()


def quiet_request_lines() -> None:
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
