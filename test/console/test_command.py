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


def test_served_on_every_address_the_url_names_one_that_can_be_opened(ros_env):
    """Issue 33: ``--host 0.0.0.0`` printed ``http://0.0.0.0:8090/?token=...``, which no other
    machine can open; the one stdout line (interface §10) now names the reachable address."""
    import os
    import urllib.request

    from test.ros.helpers import REPO_ROOT

    pytest.importorskip("aiohttp")  # the console serves with it; .venv-jazzy has none

    console = subprocess.Popen(
        [sys.executable, "-m", "sam3_agent_ros.cli", "console", "--host", "0.0.0.0", "--port",
         "0", "--node", "/command_test/sam3_agent", "--loopback"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, cwd=REPO_ROOT,
        env=dict(os.environ, **ros_env, PYTHONPATH=str(REPO_ROOT)))
    try:
        line = console.stdout.readline().strip()
        assert line.startswith("console: http://") and "?token=" in line, line
        url = line.split(" ", 1)[1]
        assert "//0.0.0.0:" not in url
        with urllib.request.urlopen(url, timeout=10) as page:  # this machine's own address
            assert page.status == 200
    finally:
        console.terminate()
        console.wait(15)
