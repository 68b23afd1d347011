"""What both demos share around their session with the node: the options, the lock on the output
folder, the node's parameters file, DDS on loopback, the node subprocess, and the signals.

``run_node(...)`` writes ``OUT/demo_params.yaml``, puts DDS on loopback (on the exported
``ROS_DOMAIN_ID``, else a random one, printed), starts ``sam3_agent_node`` (``node_process.py``)
with the sample's camera and query topics remapped onto its inputs, runs the demo's session
with SIGTERM raising ``KeyboardInterrupt`` (Ctrl-C already does), and always stops the node.
The node has a session of its own: a terminal's Ctrl-C reaches the demo only, which stops the
node itself (an interrupted demo ends in one line and status 130, ``interrupted_exit``).
Whatever goes wrong ends up in the ``DemoReport`` as its error, with the node log's tail printed.
"""

from __future__ import annotations

import fcntl
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sam3_agent_demo import sample
from sam3_agent_demo.node_process import NodeProcess, node_arguments, node_command, node_env
from sam3_agent_demo.report import DemoReport

INTERRUPTED = "interrupted"  # report.error of a demo stopped by Ctrl-C / SIGTERM
EXIT_INTERRUPTED = 128 + 2  # as a shell reports a process ended by SIGINT
LOCK_FILE = ".demo.lock"
PARAMS_FILE = "demo_params.yaml"
NODE_LOG = "node.log"


@dataclass
class DemoOptions:
    out_dir: Path
    sample_dir: Path | None = None  # None: the demo's bundled sample
    params_file: Path | None = None  # the user's, applied after the demo's parameters
    overrides: list[str] = field(default_factory=list)  # -p NAME:=VALUE, applied last
    rate: float = 1.0
    startup_timeout_s: float = 60.0  # how long to wait for the node to become active
    # after the bag: how long to wait for the last answers (None: the demo's own default)
    result_timeout_s: float | None = 30.0
    think_s: float = 0.0  # llm.offline_think_s: the offline planner's seconds per model call


class OutputBusy(RuntimeError):
    """Another demo holds the output folder."""


@contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    """Hold ``OUT/.demo.lock`` (created with ``OUT``) for the block; ``OutputBusy`` at once when
    another demo holds it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / LOCK_FILE, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise OutputBusy(f"another demo is writing to {out_dir}; wait for it or use "
                             "--out") from None
        yield


def run_node(tag: str, options: DemoOptions, parameters: dict, sample_dir: Path,
             report: DemoReport, out, session: Callable[[NodeProcess], None]) -> None:
    """The node under ``parameters`` (then ``options.params_file``, then ``-p``) for the length
    of ``session(process)``; errors (``RuntimeError``, ``OSError``, ``ValueError``, an
    interruption) go into ``report.error``. Call it holding ``output_lock(options.out_dir)``."""
    from sam3_agent_demo.domains import apply_demo_env

    out_dir = options.out_dir
    params_file = out_dir / PARAMS_FILE
    params_file.write_text(_yaml({"/**": {"ros__parameters": parameters}}))
    params_files = [params_file] + ([options.params_file] if options.params_file else [])
    try:  # before rclpy.init here; inherited by the node subprocess
        where = apply_demo_env()
    except ValueError as exc:
        report.error = str(exc)
        return
    print(f"[{tag}] {where}; sample {sample_dir / sample.BAG_DIRNAME}", file=out)
    process = NodeProcess(node_command() + node_arguments(params_files, options.overrides),
                          out_dir / NODE_LOG, node_env())
    report.node_log = str(process.log_path)
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        session(process)
    except KeyboardInterrupt:
        report.error = INTERRUPTED
    except (RuntimeError, OSError, ValueError) as exc:
        report.error = str(exc)
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        code = process.stop()
    if report.error and report.error != INTERRUPTED:
        print(f"[{tag}] node log ({process.log_path}), last lines:\n{process.log_tail()}",
              file=out)
    elif code not in (0, None, -signal.SIGINT):
        print(f"[{tag}] the node exited with status {code} (see {process.log_path})", file=out)


def interrupted_exit(report: DemoReport, tag: str, out_dir: Path, out) -> int | None:
    """``EXIT_INTERRUPTED`` after one short line when Ctrl-C / SIGTERM stopped the demo (its node
    is stopped by then); None otherwise."""
    if report.error != INTERRUPTED:
        return None
    print(f"[{tag}] interrupted; the node is stopped (what was done so far is in {out_dir})",
          file=out)
    out.flush()
    return EXIT_INTERRUPTED


def _raise_keyboard_interrupt(*_args) -> None:
    raise KeyboardInterrupt


def _yaml(tree: dict) -> str:
    import yaml

    return yaml.safe_dump(tree, sort_keys=False)
