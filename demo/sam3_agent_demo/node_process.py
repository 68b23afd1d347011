"""The node under a demo or a test: ``sam3_agent_node`` in a subprocess, its command line and
environment. The one node-process harness: the demos use it as it is, the ROS tests through
``test/ros/helpers.py`` (a parameters file per namespace, the running-nodes check).

``NodeProcess.stop()`` always ends it (SIGINT, then ``hung_signal``: SIGTERM for the demos,
SIGABRT for the tests, whose nodes then write every thread's stack into the log; then SIGKILL),
and the child gets SIGTERM if the process that started it dies. It runs in a session of its own
(a terminal's Ctrl-C reaches only the demo or pytest, which then stops it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from sam3_agent_demo import sample

NODE_STOP_TIMEOUT_S = 10.0  # after SIGINT, and again after the hung signal
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

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str],
                 cwd: Path | None = None, stop_timeout_s: float = NODE_STOP_TIMEOUT_S,
                 hung_signal: int = signal.SIGTERM) -> None:
        self.log_path = log_path
        self.stop_timeout_s = stop_timeout_s  # how long SIGINT may take (stop's default)
        self.hung_signal = hung_signal  # sent when SIGINT did not end it
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in stop)
        # A session of its own: a terminal's Ctrl-C goes to the demo only, which stops the node
        # (stop()); else the node could exit first and the demo report "the node exited".
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env,
                                        cwd=None if cwd is None else str(cwd),
                                        preexec_fn=_die_with_parent, start_new_session=True)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGINT (the node shuts down cleanly; ``timeout``, default ``stop_timeout_s``), then
        ``hung_signal`` (NODE_STOP_TIMEOUT_S), then SIGKILL; returns the exit status."""
        waits = ((signal.SIGINT, self.stop_timeout_s if timeout is None else timeout),
                 (self.hung_signal, NODE_STOP_TIMEOUT_S), (signal.SIGKILL, None))
        for sig, wait_s in waits:
            if self.process.poll() is not None:
                break
            self.process.send_signal(sig)
            try:
                self.process.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        return self.process.returncode

    def log(self) -> str:
        """Everything the node wrote so far ('' if the log cannot be read)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def startup_failure(self) -> str | None:
        """The node's own line saying its autostart failed (it then exits with status 1)."""
        for line in self.log().splitlines():
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
        return "\n".join(self.log().splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM it when the demo (or pytest) dies, even by
    SIGKILL. Linux sends it when the THREAD that started the child ends: start nodes from a
    thread that outlives them (the main thread, as the demos and the tests do)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def node_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with this source tree first on PYTHONPATH, unbuffered
    output, and the ROS wheels' bootstrap left to the child's own Python."""
    env = dict(os.environ if base is None else base)
    source_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([source_root] + paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)  # the child's python bootstraps itself
    return env
