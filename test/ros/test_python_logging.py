"""ros/python_logging.py: Python log records in rclpy's console format (pure, no ROS)."""

from __future__ import annotations

import io
import logging

from sam3_agent_ros.ros.python_logging import RclpyStyleFormatter


def _record(level: int, message: str, exc_info=None) -> logging.LogRecord:
    record = logging.LogRecord("httpx", level, "/x/y.py", 12, message, (), exc_info, "send")
    record.created = 1733080000.25
    return record


def test_the_default_format_is_rclpys_with_its_severity_names():
    formatter = RclpyStyleFormatter()
    assert formatter.format(_record(logging.WARNING, "slow")) == \
        "[WARN] [1733080000.250000000] [httpx]: slow"
    assert formatter.format(_record(logging.CRITICAL, "gone")).startswith("[FATAL] ")
    assert formatter.format(_record(logging.INFO, "ok")).startswith("[INFO] ")


def test_rcutils_console_output_format_is_followed():
    formatter = RclpyStyleFormatter("{severity} {name} {function_name}:{line_number} {message}")
    assert formatter.format(_record(logging.ERROR, "boom")) == "ERROR httpx send:12 boom"


def test_a_traceback_follows_the_line():
    try:
        raise ValueError("bad")
    except ValueError:
        import sys

        record = _record(logging.ERROR, "failed", sys.exc_info())
    text = RclpyStyleFormatter().format(record)
    assert text.startswith("[ERROR] [1733080000.250000000] [httpx]: failed\nTraceback")
    assert "ValueError: bad" in text


def test_configure_node_logging_quiets_httpx_info(monkeypatch):
    from sam3_agent_ros.ros import python_logging

    stream = io.StringIO()
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", logging.WARNING)
    monkeypatch.delenv("RCUTILS_CONSOLE_OUTPUT_FORMAT", raising=False)
    python_logging.configure_node_logging(stream=stream)
    logging.getLogger("httpx").info("HTTP Request: POST ...")
    logging.getLogger("httpx").warning("connection reset")
    logging.getLogger("openai._base_client").info("Retrying request")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[WARN] [") and "[httpx]: connection" in lines[0]
    assert "[openai._base_client]: Retrying request" in lines[1]
