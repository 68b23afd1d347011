"""``sam3-agent demo`` scored against the tabletop sample's ground truth (pure: no ROS): one
``QueryOutcome`` per query of the bag, and the lines printed for them and for the run's
``DemoReport`` (``report.py``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from sam3_agent_demo import sample
from sam3_agent_demo.concepts_scoring import format_concepts
from sam3_agent_demo.report import DemoReport, backends_lines
from sam3_agent_demo.scene import BoxErrors, box_errors
from sam3_agent_ros.core.types import stamp_ns
from sam3_agent_ros.geometry.rotations import quaternion_to_matrix

IOU_THRESHOLD = 0.8


@dataclass
class QueryOutcome:
    """One query of the bag and what the node answered."""

    query: str
    query_id: str | None
    expected: str | None
    refines: str | None = None  # a refinement: the query_id of the answer it corrects
    status: str = "unanswered"
    result_count: int = 0
    latency_s: float | None = None  # query published -> result received
    agent_s: float | None = None  # the node's own timings.total_s
    stamp_ns: int | None = None
    frame_index: int | None = None
    iou: float | None = None
    position_m: list[float] | None = None
    position_error_cm: float | None = None
    box: dict | None = None  # the first mask's box in the result JSON
    box_error: str | None = None  # why it has none
    box_center_error_cm: float | None = None  # against the true box (scene.box_errors)
    box_size_error_pct: list[float] | None = None
    box_angle_error_deg: float | None = None
    box_on_target: bool | None = None  # centre 1 cm, sizes 10 %, angle 10 degrees
    # The best grasp (grasp_scoring): None when the result reports no grasps field at all
    grasps_reported: bool = False
    grasp_error: str | None = None  # the result's reason for no grasp
    grasp_clear: bool | None = None  # the best grasp clears the true neighbours and table
    grasp_nearest_cm: float | None = None
    grasp_above_table_cm: float | None = None
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
                  mask: np.ndarray | None, refined: QueryOutcome | None = None) -> None:
    """Fill ``outcome`` from the result JSON, the received ~/mask and the ground truth. A
    refinement is correct only when it also names the answer it refines and was answered on
    that answer's frame (``refined``: that query's outcome, scored before)."""
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
        box = masks[0].get("box")
        outcome.box = box if isinstance(box, dict) else None
        outcome.box_error = masks[0].get("box_error")
        outcome.grasps_reported = "grasps" in masks[0] or "grasp_error" in masks[0]
    if outcome.frame_index is None:
        outcome.problem = "the result's stamp is not the stamp of a frame of the bag"
        return
    if outcome.refines is not None:
        outcome.problem = _refinement_problem(outcome, result, refined)
        if outcome.problem:
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
    _score_box(outcome, truth, masks[0].get("support") is not None if masks else False)
    if masks:
        _score_grasp(outcome, masks[0], truth)
    if outcome.iou is None:
        outcome.problem = "no ~/mask image arrived for this result"
    elif outcome.iou < IOU_THRESHOLD:
        outcome.problem = f"IoU {outcome.iou:.2f} with {outcome.expected} is below {IOU_THRESHOLD}"
    else:
        outcome.correct = True


def _score_box(outcome: QueryOutcome, truth: sample.GroundTruth, reaching: bool = False
               ) -> None:
    """The first mask's box against the expected object's true box on the answer's frame. An
    answer WITHOUT a box where the object has one (no depth for that frame, say: a slow answer)
    counts as a box off target, so the summary's count says so instead of leaving it out.
    ``reaching``: the box reaches its support (the mask has a ``support``): its top face is
    scored (the truth is the top face)."""
    true_box = truth.true_box(outcome.frame_index, outcome.expected)
    box = outcome.box
    if true_box is None:
        return
    if box is None:
        outcome.box_on_target = False
        return
    center, size, rotation = box_as_scored(box, reaching)
    errors = box_errors(true_box, center, size, rotation)
    outcome.box_center_error_cm = errors.center_cm
    outcome.box_size_error_pct = list(errors.size_pct) if errors.size_pct else None
    outcome.box_angle_error_deg = errors.angle_deg
    outcome.box_on_target = errors.within()


def box_as_scored(box: dict, reaching: bool) -> tuple[list[float], list[float], np.ndarray]:
    """A result JSON box as the sample's truth (top faces) is compared with it: (centre, sizes,
    rotation); a box that reaches its support (``reaching``) by its top face's centre (box z
    points away from the camera: the top face is half its height back)."""
    rotation = quaternion_to_matrix([box["orientation"][a] for a in "xyzw"])
    size = [box["size"][a] for a in "xyz"]
    center = np.array([box["center"][a] for a in "xyz"], np.float64)
    if reaching:
        center = center - 0.5 * size[2] * rotation[:, 2]
    return [float(v) for v in center], size, rotation


def _score_grasp(outcome: QueryOutcome, mask: dict, truth: sample.GroundTruth) -> None:
    """The first mask's best grasp against the frame's true geometry (grasp_scoring)."""
    from sam3_agent_demo.grasp_scoring import check_grasp
    from sam3_agent_ros.config.sections import GraspConfig

    grasps = mask.get("grasps")
    outcome.grasp_error = mask.get("grasp_error")
    if not isinstance(grasps, list) or not grasps or outcome.frame_index is None \
            or outcome.expected is None:
        return
    grasp = GraspConfig()  # the node's defaults: the demo sets no grasp.* parameter
    check = check_grasp(grasps[0], truth, outcome.frame_index, outcome.expected,
                        grasp.clearance_m, grasp.max_width_m)
    if check is not None:
        outcome.grasp_clear = check.clear
        outcome.grasp_nearest_cm = check.nearest_m * 100.0 if np.isfinite(check.nearest_m) \
            else None
        outcome.grasp_above_table_cm = check.above_table_m * 100.0


def grasp_lines(outcomes: list[QueryOutcome]) -> list[str]:
    """``grasps clear: n/n`` over the answered queries with depth whose result has a best
    grasp, one line per query; ``grasps: none reported`` when no result had a grasps field."""
    with_depth = [o for o in outcomes if o.answered and o.position_m is not None]
    if not with_depth:
        return []
    if not any(o.grasps_reported for o in with_depth):
        return ["grasps: none reported (no result has a grasps field)"]
    checked = [o for o in with_depth if o.grasp_clear is not None]
    clear = sum(bool(o.grasp_clear) for o in checked)
    lines = [f"grasps clear: {clear}/{len(checked)} (the best grasp's fingers and palm at "
             "least half of grasp.clearance_m from the other objects' true boxes and above "
             "the table)"]
    for o in with_depth:
        if o.grasp_clear is not None:
            nearest = (f"{o.grasp_nearest_cm:.1f} cm from the nearest other object"
                       if o.grasp_nearest_cm is not None else "no other object")
            lines.append(f"  {o.query!r}: {'clear' if o.grasp_clear else 'NOT CLEAR'}, "
                         f"{nearest}, {o.grasp_above_table_cm:.1f} cm above the table")
        elif o.grasp_error:
            lines.append(f"  {o.query!r}: no grasp: {o.grasp_error}")
    return lines


def box_description(outcome: QueryOutcome) -> str | None:
    """``box: centre 0.06 cm, sizes +3.9/+3.9 %, angle 0.1 deg (on target)``, ``no box: WHY``
    for an answer without the box its object has, or None (nothing to score)."""
    if outcome.box_on_target is None:
        return None
    if outcome.box_center_error_cm is None:
        return f"no box: {outcome.box_error or 'none in the result'}"
    errors = BoxErrors(outcome.box_center_error_cm,
                       tuple(outcome.box_size_error_pct) if outcome.box_size_error_pct else None,
                       outcome.box_angle_error_deg)
    verdict = "on target" if outcome.box_on_target else "OFF TARGET"
    return f"box error {errors.describe()} ({verdict})"


def _refinement_problem(outcome: QueryOutcome, result: dict,
                        refined: QueryOutcome | None) -> str | None:
    if result.get("refines") != outcome.refines:
        return f"the result names refines={result.get('refines')!r}, not {outcome.refines!r}"
    if refined is None or refined.stamp_ns is None:
        return f"the answer it refines ({outcome.refines}) was not received first"
    if refined.stamp_ns != outcome.stamp_ns:
        return (f"answered on frame {outcome.frame_index}, not on the frame of the answer it "
                f"refines (frame {refined.frame_index})")
    return None


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
    if outcome.refines is not None:
        details.append(f"refines {outcome.refines}" + (" on its frame" if outcome.correct
                                                        else ""))
    if outcome.iou is not None:
        details.append(f"IoU {outcome.iou:.3f}")
    if outcome.position_error_cm is not None:
        details.append(f"3D error {outcome.position_error_cm:.2f} cm")
    box = box_description(outcome)
    if box is not None:
        details.append(box)
    if outcome.problem:
        details.append(outcome.problem)
    return ", ".join(parts) + f"  | {verdict}: " + ", ".join(details)


def format_summary(report: DemoReport) -> list[str]:
    outcomes = report.outcomes
    lines = ["", "=== sam3-agent demo summary ===",
             f"queries answered: {report.answered}/{len(outcomes)}",
             f"correct vs ground truth: {report.correct}/{len(outcomes)} (IoU >= {IOU_THRESHOLD} "
             "for objects that are there, no_mask for the one that is not)"]
    refinements = [o for o in outcomes if o.refines is not None]
    if refinements:
        right = sum(o.correct for o in refinements)
        lines.append(f"refinements correct: {right}/{len(refinements)} (the corrected object, "
                     "answered on the frame of the answer it refines: "
                     + ", ".join(f"{o.query!r} refines {o.refines}" for o in refinements) + ")")
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
    boxes = [o for o in outcomes if o.box_on_target is not None]
    if boxes:
        lines.append(f"3D boxes on target: {sum(o.box_on_target for o in boxes)}/{len(boxes)} "
                     "(centre 1 cm, sizes 10 %, long-axis angle 10 deg)")
        for outcome in boxes:
            lines.append(f"  {outcome.query!r}: {box_description(outcome)}")
    lines += grasp_lines(outcomes)
    lines += format_concepts(report.concepts)
    lines += backends_lines(outcomes)
    for outcome in outcomes:
        if outcome.problem:
            lines.append(f"problem with {outcome.query!r}: {outcome.problem}")
    if report.output_bag:
        counts = ", ".join(f"{t.removeprefix('/sam3_agent/')}: {n}"
                           for t, n in report.output_counts.items())
        lines.append(f"output bag: {report.output_bag} ({counts})")
    if report.error:
        lines.append(f"error: {report.error}")
    lines.append(f"wall time: {report.wall_s:.1f} s")
    lines.append("watch it: sam3-agent console (beside a running node; docs/console.md)")
    return lines
