"""``sam3-agent demo`` interrupted as a terminal does it: Ctrl-C sends SIGINT to the whole
foreground process group (the demo and, unless it has a session of its own, its node). The demo
ends cleanly: one short "interrupted" line, exit status 130, the node stopped by the demo, never
"error: the node exited"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sam3_agent_demo.domains import reserved_loopback_env

pytestmark = pytest.mark.ros
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_in_the_demo_ends_it_cleanly_with_130(tmp_path):
    env = dict(os.environ, **reserved_loopback_env(),
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    out = tmp_path / "demo"
    demo = subprocess.Popen([sys.executable, "-m", "sam3_agent_ros.cli", "demo", "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own group, like a terminal's job
    lines = []
    try:
        deadline = time.monotonic() + 120
        for line in demo.stdout:
            lines.append(line)
            if "node active" in line or time.monotonic() > deadline:
                break
        assert any("node active" in line for line in lines), "".join(lines)
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C: the demo's whole process group
        rest, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.communicate()
    output = "".join(lines) + rest
    assert demo.returncode == 130, output
    assert "interrupted" in rest and "the node exited" not in output, output
    assert "=== sam3-agent demo summary ===" not in rest  # a short line, not the whole summary
    log = (out / "node.log").read_text(errors="replace")
    assert "Traceback" not in log, log
