"""The node under a demo: ``sam3_agent_node`` in a subprocess, its command line and environment.

``NodeProcess.stop()`` always ends it (SIGINT, then SIGTERM, then SIGKILL), and the child gets
SIGTERM if the demo itself dies. It runs in a session of its own (a terminal's Ctrl-C reaches
only the demo, which then stops it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from sam3_agent_ros.demo import sample

NODE_STOP_TIMEOUT_S = 10.0
SAMPLE_REMAPS = {"image": sample.COLOR_TOPIC, "depth": sample.DEPTH_TOPIC,
                 "camera_info": sample.CAMERA_INFO_TOPIC, "query": sample.QUERY_TOPIC}


def node_command() -> list[str]:
    """The installed ``sam3_agent_node`` (venv bin, ament lib dir, PATH), else the module."""
    prefix = Path(sys.executable).parent
    for candidate in (prefix / "sam3_agent_node",
                      prefix.parent / "lib" / "sam3_agent_ros" / "sam3_agent_node"):
        if candidate.exists():
            return [str(candidate)]
    found = shutil.which("sam3_agent_node")
    return [found] if found else [sys.executable, "-m", "sam3_agent_ros.ros.node"]


def node_arguments(params_files: list[Path], overrides: list[str],
                   remaps: dict[str, str] | None = None) -> list[str]:
    """``--ros-args``: parameters files in order (later win), ``-p`` overrides, topic remaps
    (default: the node's inputs onto the sample bag's topics)."""
    args = ["--ros-args"]
    for path in params_files:
        args += ["--params-file", str(path)]
    for override in overrides:
        args += ["-p", override]
    for name, topic in (SAMPLE_REMAPS if remaps is None else remaps).items():
        args += ["-r", f"{name}:={topic}"]
    return args


class NodeProcess:
    """The node in a subprocess, logging to a file; ``stop()`` always ends it."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in stop)
        # A session of its own: a terminal's Ctrl-C goes to the demo only, which stops the node
        # (stop()); else the node could exit first and the demo report "the node exited".
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env,
                                        preexec_fn=_die_with_parent, start_new_session=True)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int | None:
        """SIGINT (the node shuts down cleanly), then SIGTERM, then SIGKILL."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.process.poll() is not None:
                break
            self.process.send_signal(sig)
            try:
                self.process.wait(NODE_STOP_TIMEOUT_S if sig != signal.SIGKILL else None)
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        return self.process.returncode

    def startup_failure(self) -> str | None:
        """The node's own line saying its autostart failed (it then exits with status 1)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if "configure failed" in line or "activate failed" in line:
                return line.strip()
        return None

    def check_starting(self) -> None:
        """``RuntimeError`` when the node exited or said its autostart failed."""
        failure = self.startup_failure()
        if not self.running():
            raise RuntimeError(f"the node exited during start-up "
                               f"(status {self.process.returncode})"
                               + (f": {failure}" if failure else ""))
        if failure:
            raise RuntimeError(f"the node did not start: {failure}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM it when the demo dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def node_env() -> dict[str, str]:
    env = dict(os.environ)
    source_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([source_root] + paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)  # the child's python bootstraps itself
    return env
