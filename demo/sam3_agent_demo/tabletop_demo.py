"""``sam3-agent demo``: the node on the bundled sample bag, scored against its ground truth.

Steps (the shared ones in ``harness.py``): lock the output folder; put DDS on loopback; start
``sam3_agent_node`` in a subprocess (offline backends and depth on, unless ``--params-file`` /
``-p`` say otherwise) with the camera topics remapped onto its inputs; record its outputs into
``OUT/output_bag``; replay the bag; print each result as it arrives; write the overlays as PNGs;
print a summary (answered, correct, latency, IoU, 3D error) and write it as ``OUT/report.json``.
Beside the queries the node segments standing concepts (``concepts_scoring.DEMO_CONCEPTS``) on the
frames; each pass is scored against the ground truth too.
The node subprocess is always stopped, whatever happens.

The parts: ``tabletop_session.py`` (the rclpy listener, recorder and replay),
``tabletop_scoring.py`` (pure scoring and printing); this file runs them.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from pathlib import Path

from sam3_agent_demo import concepts_scoring, harness, sample
from sam3_agent_demo.harness import DemoOptions
from sam3_agent_demo.report import DemoReport
from sam3_agent_demo.tabletop_scoring import QueryOutcome, format_summary
from sam3_agent_ros.config import OFFLINE_BACKENDS, nest

TAG = "demo"
DEMO_PARAMETERS = {
    **nest(OFFLINE_BACKENDS),  # the demo runs without a model, and says so
    "depth": {"enabled": True},
    "image_qos": "reliable",  # a bag player publishes reliably; keep every frame
    "query_policy": "queue",  # answer every query of the bag, even with a slow model
    "concepts": {"prompts": list(concepts_scoring.DEMO_CONCEPTS),  # beside the queries
                 "rate_hz": concepts_scoring.CONCEPTS_RATE_HZ},
}
OUTPUT_BAG = "output_bag"
RESULT_TIMEOUT_S = 30.0  # after the bag, at --think-s 0: how long the last answers may take
# --think-s: the model calls of one query one after the other (segment, examine + the
# verifiers, which run side by side, select; a second phrase when the first finds nothing), with
# room to spare: the queries of the bag queue behind each other (query_policy: queue).
CALLS_PER_QUERY = 6


def result_timeout_s(given: float | None, think_s: float, queries: int) -> float:
    """``--result-timeout`` when given, else ``RESULT_TIMEOUT_S`` plus the think time of every
    query of the bag (they are answered one after the other)."""
    if given is not None:
        return given
    return RESULT_TIMEOUT_S + think_s * CALLS_PER_QUERY * queries


def node_parameters(think_s: float) -> dict:
    """The demo's parameters for the node; ``think_s`` > 0: the offline planner's rehearsal of a
    real model's time per call (``llm.offline_think_s``)."""
    if think_s <= 0:
        return DEMO_PARAMETERS
    return {**DEMO_PARAMETERS, "llm": {**DEMO_PARAMETERS["llm"], "offline_think_s": think_s}}


def run_demo(options: DemoOptions, out=None) -> int:
    """Run the demo; prints as it goes; returns 0 when every query is answered correctly, 130
    when interrupted (one line, no summary)."""
    out = out or sys.stdout
    report = _run(options, out)
    interrupted = harness.interrupted_exit(report, TAG, options.out_dir, out)
    if interrupted is not None:
        return interrupted
    for line in format_summary(report):
        print(line, file=out)
    out.flush()
    return 0 if report.ok else 1


def _run(options: DemoOptions, out) -> DemoReport:
    started = time.monotonic()
    report = DemoReport()
    try:
        sample_dir = options.sample_dir or sample.default_sample_dir()
        truth = sample.load_ground_truth(sample_dir)
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        report.error = f"cannot load the sample: {exc}"
        return report
    report.outcomes = [QueryOutcome(q["query"], q["query_id"], q["expected"], q.get("refines"))
                       for q in truth.queries]
    options = dataclasses.replace(options, result_timeout_s=result_timeout_s(
        options.result_timeout_s, options.think_s, len(truth.queries)))
    try:
        with harness.output_lock(options.out_dir):
            _run_locked(options, out, truth, report, sample_dir)
            report.wall_s = time.monotonic() - started
            report.write(options.out_dir)
    except harness.OutputBusy as exc:
        report.error = str(exc)
    return report


def _run_locked(options: DemoOptions, out, truth: sample.GroundTruth, report: DemoReport,
                sample_dir: Path) -> None:
    from sam3_agent_demo.tabletop_session import TabletopSession

    out_dir = options.out_dir
    for old in out_dir.glob("*_overlay.png"):
        old.unlink()
    bag_out = out_dir / OUTPUT_BAG
    if bag_out.exists():
        shutil.rmtree(bag_out)

    def session(process) -> None:
        tabletop = TabletopSession(truth, report.outcomes, out_dir, bag_out, out)
        try:
            tabletop.run(sample_dir / sample.BAG_DIRNAME, process, options.rate,
                         options.startup_timeout_s, options.result_timeout_s)
            report.concepts = tabletop.concepts_outcome()
        finally:
            tabletop.close()

    if options.think_s > 0:
        print(f"[{TAG}] --think-s {options.think_s:g}: each model call of the offline planner "
              "takes that long (a rehearsal of a real model's timing, not a model); waiting up "
              f"to {options.result_timeout_s:g} s after the bag for the answers", file=out)
    harness.run_node(TAG, options, node_parameters(options.think_s), sample_dir, report, out,
                     session)
    if bag_out.exists():
        from sam3_agent_ros.bags.record import read_bag_counts

        report.output_bag = str(bag_out)
        try:
            report.output_counts = read_bag_counts(bag_out)
        except Exception as exc:
            report.error = report.error or f"the output bag does not read back: {exc}"
