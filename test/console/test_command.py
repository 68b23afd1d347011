"""console/command.py: bad usage and a port in use end with one line and exit status 2, before
anything starts; neither `sam3-agent run` nor the node loads aiohttp."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from sam3_agent_ros import cli
from sam3_agent_ros.console.command import EXIT_USAGE


@pytest.fixture
def busy_port():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    yield holder.getsockname()[1]
    holder.close()


def test_a_port_in_use_is_one_line_and_status_2(busy_port, capsys):
    assert cli.main(["console", "--port", str(busy_port)]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and f"cannot serve on 127.0.0.1:{busy_port}" in lines[0], lines


@pytest.mark.parametrize("args, says", [
    (["--port", "70000"], "--port: 70000 is not a port"),
    (["--token", "short"], "--token: 8 to 256 characters"),
    (["--node", "/bad name"], "--node: not a ROS node name"),
])
def test_bad_usage_is_one_line_and_status_2(args, says, capsys):
    assert cli.main(["console", *args]) == EXIT_USAGE
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines


def loaded(code: str) -> list[str]:
    check = code + "\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith('aiohttp')))"
    completed = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    return eval(completed.stdout.strip().splitlines()[-1])  # a list of names we printed


def test_neither_run_nor_the_node_loads_aiohttp():
    assert loaded("from sam3_agent_ros import cli; cli.build_parser()") == []
    pytest.importorskip("rclpy")
    assert loaded("import sam3_agent_ros.ros.node") == []
