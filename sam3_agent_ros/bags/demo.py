"""``sam3-agent demo``: the node on the bundled sample bag, scored against its ground truth.

Steps: put DDS on loopback (on the exported ``ROS_DOMAIN_ID``, else a random one, printed);
start ``sam3_agent_node`` in a subprocess (offline backends and depth on, unless
``--params-file`` / ``-p`` say otherwise) with the camera topics remapped onto its inputs; record
its outputs into ``OUT/output_bag``; replay the bag; print each result as it arrives; write the
overlays as PNGs; print a summary (answered, correct, latency, IoU, 3D error) and write it as
``OUT/report.json``. The node subprocess is always stopped, whatever happens.

The parts: ``node_process.py`` (the node subprocess), ``demo_session.py`` (the rclpy listener,
recorder and replay), ``demo_scoring.py`` (pure scoring and printing); this file runs them.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sam3_agent_ros.bags import sample
from sam3_agent_ros.bags.demo_scoring import DemoReport, QueryOutcome, format_summary
from sam3_agent_ros.bags.demo_session import DemoSession
from sam3_agent_ros.bags.node_process import NodeProcess, node_arguments, node_command, node_env
from sam3_agent_ros.config import OFFLINE_BACKENDS, nest

DEMO_PARAMETERS = {
    **nest(OFFLINE_BACKENDS),  # the demo runs without a model, and says so
    "depth": {"enabled": True},
    "image_qos": "reliable",  # a bag player publishes reliably; keep every frame
    "query_policy": "queue",  # answer every query of the bag, even with a slow model
}


@dataclass
class DemoOptions:
    out_dir: Path = Path("out/demo")
    sample_dir: Path | None = None
    params_file: Path | None = None
    overrides: list[str] = field(default_factory=list)
    rate: float = 1.0
    startup_timeout_s: float = 60.0
    result_timeout_s: float = 30.0


def run_demo(options: DemoOptions, out=None) -> int:
    """Run the demo; prints as it goes; returns 0 when every query is answered correctly."""
    out = out or sys.stdout
    report = _run(options, out)
    for line in format_summary(report):
        print(line, file=out)
    out.flush()
    return 0 if report.ok else 1


def _run(options: DemoOptions, out) -> DemoReport:

    started = time.monotonic()
    try:
        sample_dir = options.sample_dir or sample.default_sample_dir()
        truth = sample.load_ground_truth(sample_dir)
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        report = DemoReport(outcomes=[], error=f"cannot load the sample: {exc}")
        return report
    outcomes = [QueryOutcome(q["query"], q["query_id"], q["expected"]) for q in truth.queries]
    report = DemoReport(outcomes=outcomes)
    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".demo.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            report.error = f"another demo is writing to {out_dir}; wait for it or use --out"
            return report
        return _run_locked(options, out, truth, report, sample_dir, started)


def _run_locked(options: DemoOptions, out, truth: sample.GroundTruth, report: DemoReport,
                sample_dir: Path, started: float) -> DemoReport:
    from sam3_agent_ros.ros.dds import apply_demo_env

    outcomes, out_dir = report.outcomes, options.out_dir
    for old in out_dir.glob("*_overlay.png"):
        old.unlink()
    bag_out = out_dir / "output_bag"
    if bag_out.exists():
        shutil.rmtree(bag_out)
    params_file = out_dir / "demo_params.yaml"
    params_file.write_text(_yaml({"/**": {"ros__parameters": DEMO_PARAMETERS}}))
    params_files = [params_file] + ([options.params_file] if options.params_file else [])

    try:  # before rclpy.init here; inherited by the node subprocess
        where = apply_demo_env()
    except ValueError as exc:
        report.error = str(exc)
        return report
    print(f"[demo] {where}; sample {sample_dir / sample.BAG_DIRNAME}", file=out)
    command = node_command() + node_arguments(params_files, options.overrides)
    node_log = out_dir / "node.log"
    report.node_log = str(node_log)
    process = NodeProcess(command, node_log, node_env())
    session = None
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        session = DemoSession(truth, outcomes, out_dir, bag_out, out)
        session.run(sample_dir / sample.BAG_DIRNAME, process, options.rate,
                    options.startup_timeout_s, options.result_timeout_s)
    except KeyboardInterrupt:
        report.error = "interrupted"
    except (RuntimeError, OSError, ValueError) as exc:
        report.error = str(exc)
    finally:
        try:
            if session is not None:
                session.close()
        finally:
            signal.signal(signal.SIGTERM, previous_sigterm)
            code = process.stop()
        if report.error and report.error != "interrupted":
            print(f"[demo] node log ({node_log}), last lines:\n{process.log_tail()}", file=out)
        elif code not in (0, None, -signal.SIGINT):
            print(f"[demo] the node exited with status {code} (see {node_log})", file=out)
    if bag_out.exists():
        from sam3_agent_ros.bags.record import read_bag_counts

        report.output_bag = str(bag_out)
        try:
            report.output_counts = read_bag_counts(bag_out)
        except Exception as exc:
            report.error = report.error or f"the output bag does not read back: {exc}"
    report.wall_s = time.monotonic() - started
    (out_dir / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report


def _raise_keyboard_interrupt(*_args) -> None:
    raise KeyboardInterrupt


def _yaml(tree: dict) -> str:
    import yaml

    return yaml.safe_dump(tree, sort_keys=False)
