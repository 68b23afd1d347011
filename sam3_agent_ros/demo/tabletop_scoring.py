"""``sam3-agent demo`` scored against the tabletop sample's ground truth (pure: no ROS): one
``QueryOutcome`` per query of the bag, and the lines printed for them and for the run's
``DemoReport`` (``report.py``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from sam3_agent_ros.core.types import stamp_ns
from sam3_agent_ros.demo import sample
from sam3_agent_ros.demo.concepts_scoring import format_concepts
from sam3_agent_ros.demo.report import DemoReport, backends_lines

IOU_THRESHOLD = 0.8


@dataclass
class QueryOutcome:
    """One query of the bag and what the node answered."""

    query: str
    query_id: str | None
    expected: str | None
    status: str = "unanswered"
    result_count: int = 0
    latency_s: float | None = None  # query published -> result received
    agent_s: float | None = None  # the node's own timings.total_s
    stamp_ns: int | None = None
    frame_index: int | None = None
    iou: float | None = None
    position_m: list[float] | None = None
    position_error_cm: float | None = None
    bbox: list[float] | None = None
    centroid: list[float] | None = None
    overlay_png: str | None = None
    correct: bool = False
    problem: str | None = None
    backends: dict | None = None  # the result's "backends" (what answered)

    @property
    def answered(self) -> bool:
        return self.result_count > 0

    @property
    def ok(self) -> bool:
        return self.correct

    def to_json(self) -> dict:
        return asdict(self)


def score_outcome(outcome: QueryOutcome, result: dict, truth: sample.GroundTruth,
                  mask: np.ndarray | None) -> None:
    """Fill ``outcome`` from the result JSON, the received ~/mask and the ground truth."""
    outcome.status = str(result.get("status"))
    stamp = result.get("stamp") or {}
    outcome.stamp_ns = stamp_ns(stamp.get("sec", 0), stamp.get("nanosec", 0))
    outcome.frame_index = truth.frame_index(outcome.stamp_ns)
    outcome.agent_s = (result.get("timings") or {}).get("total_s")
    outcome.backends = result.get("backends")
    masks = result.get("masks") or []
    if masks:
        outcome.bbox = masks[0].get("bbox")
        outcome.centroid = masks[0].get("centroid")
        position = masks[0].get("position")
        if isinstance(position, dict):
            outcome.position_m = [float(position[k]) for k in ("x", "y", "z")]
    if outcome.frame_index is None:
        outcome.problem = "the result's stamp is not the stamp of a frame of the bag"
        return
    if outcome.expected is None:
        outcome.correct = outcome.status == "no_mask"
        if not outcome.correct:
            outcome.problem = f"expected no_mask, got {outcome.status}"
        return
    if outcome.status != "succeeded":
        outcome.problem = f"expected {outcome.expected}, got {outcome.status}"
        return
    truth_mask = truth.mask(outcome.frame_index, outcome.expected)
    if mask is not None:
        outcome.iou = sample.mask_iou(mask, truth_mask)
    if outcome.position_m is not None:
        error = np.asarray(outcome.position_m) - truth.position(outcome.frame_index,
                                                                outcome.expected)
        outcome.position_error_cm = float(np.linalg.norm(error) * 100.0)
    if outcome.iou is None:
        outcome.problem = "no ~/mask image arrived for this result"
    elif outcome.iou < IOU_THRESHOLD:
        outcome.problem = f"IoU {outcome.iou:.2f} with {outcome.expected} is below {IOU_THRESHOLD}"
    else:
        outcome.correct = True


def format_outcome(outcome: QueryOutcome, label: str) -> str:
    """The one line printed when a result arrives."""
    parts = [f"[{label}] {outcome.query!r}: {outcome.status}"]
    if outcome.bbox is not None:
        parts.append("bbox [" + ", ".join(f"{v:.0f}" for v in outcome.bbox) + "]")
    if outcome.centroid is not None:
        parts.append("centroid (" + ", ".join(f"{v:.0f}" for v in outcome.centroid) + ")")
    if outcome.position_m is not None:
        parts.append("xyz (" + ", ".join(f"{v:.3f}" for v in outcome.position_m) + ") m")
    if outcome.latency_s is not None:
        parts.append(f"latency {outcome.latency_s:.2f} s")
    verdict = "OK" if outcome.correct else "WRONG"
    truth = outcome.expected or "nothing"
    details = [f"truth {truth}"]
    if outcome.iou is not None:
        details.append(f"IoU {outcome.iou:.3f}")
    if outcome.position_error_cm is not None:
        details.append(f"3D error {outcome.position_error_cm:.2f} cm")
    if outcome.problem:
        details.append(outcome.problem)
    return ", ".join(parts) + f"  | {verdict}: " + ", ".join(details)


def format_summary(report: DemoReport) -> list[str]:
    outcomes = report.outcomes
    lines = ["", "=== sam3-agent demo summary ===",
             f"queries answered: {report.answered}/{len(outcomes)}",
             f"correct vs ground truth: {report.correct}/{len(outcomes)} (IoU >= {IOU_THRESHOLD} "
             "for objects that are there, no_mask for the one that is not)"]
    latencies = [o.latency_s for o in outcomes if o.latency_s is not None]
    if latencies:
        lines.append("latency query -> result: " + ", ".join(f"{v:.2f}" for v in latencies)
                     + f" s (mean {np.mean(latencies):.2f} s, max {max(latencies):.2f} s)")
    ious = [o.iou for o in outcomes if o.iou is not None]
    if ious:
        lines.append("IoU: " + ", ".join(f"{v:.3f}" for v in ious))
    errors = [o.position_error_cm for o in outcomes if o.position_error_cm is not None]
    if errors:
        lines.append("3D position error: " + ", ".join(f"{v:.2f}" for v in errors)
                     + f" cm (max {max(errors):.2f} cm)")
    lines += format_concepts(report.concepts)
    lines += backends_lines(outcomes)
    for outcome in outcomes:
        if outcome.problem:
            lines.append(f"problem with {outcome.query!r}: {outcome.problem}")
    if report.output_bag:
        counts = ", ".join(f"{t.rsplit('/', 1)[-1]}: {n}" for t, n in report.output_counts.items())
        lines.append(f"output bag: {report.output_bag} ({counts})")
    if report.error:
        lines.append(f"error: {report.error}")
    lines.append(f"wall time: {report.wall_s:.1f} s")
    return lines
