"""ros/generated_types.py: the generated interfaces, their absence said once per output."""

from __future__ import annotations

from sam3_agent_ros.ros import generated_types as interfaces


class Logger:
    def __init__(self):
        self.lines: list[str] = []

    def warning(self, line):
        self.lines.append(line)


class Node:
    def __init__(self):
        self.logger = Logger()

    def get_logger(self):
        return self.logger


def test_a_missing_interface_is_said_once_per_output(monkeypatch):
    monkeypatch.setattr(interfaces, "_said", set())
    node = Node()
    assert interfaces.say_missing(node, "~/x", "pkg.msg", "The rest works.")
    assert not interfaces.say_missing(node, "~/x", "pkg.msg", "The rest works.")
    assert interfaces.say_missing(node, "~/y", "pkg.action", "Topics work.")
    assert node.logger.lines == [
        "~/x is off: the generated interfaces (pkg.msg) cannot be imported; run "
        "scripts/build_interfaces.sh .venv or build with colcon. The rest works.",
        "~/y is off: the generated interfaces (pkg.action) cannot be imported; run "
        "scripts/build_interfaces.sh .venv or build with colcon. Topics work."]


def test_the_generated_types_import_in_this_venv():
    assert interfaces.segment_types() is not None and interfaces.concept_types() is not None
