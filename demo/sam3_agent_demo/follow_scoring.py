"""Follow mode scored against the moving samples' ground truth (pure: no ROS).

For each followed query of a bag: the IoU of ``~/follow/mask`` with the true mask on every
``tracking`` frame where the object is in view (a tracking frame without the object counts 0),
the IoU with its look-alike's true mask on every tracking frame (it must stay ~0: following
never switches to the look-alike), the 3D error of ``~/follow/target`` on frames where the
object is wholly in view (its true point is the centre of its top face, which a partly visible
object does not show), and how following ended (``lost`` within the bound after the object
left the view or was taken away, or ``stopped``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from sam3_agent_demo import sample
from sam3_agent_demo.report import DemoReport, backends_lines
from sam3_agent_ros.core.types import stamp_ns

MIN_MEAN_IOU = 0.85
MAX_MEAN_ERROR_CM = 2.0
MAX_LOOKALIKE_IOU = 0.05


def lost_bound_s(gone: str | None, lost_timeout_s: float, redetect_period_s: float) -> float:
    """How long after the object went ``lost`` may come: ``lost_timeout_s`` when it left the view
    (flow sees its mask shrink), plus one re-detection period when it was taken away in place
    (only a re-detection can tell)."""
    return lost_timeout_s + (redetect_period_s if gone == "taken away" else 0.0)


def stamp_of(status: dict) -> int:
    frame = status.get("frame") or {}
    return stamp_ns(frame.get("sec", 0), frame.get("nanosec", 0))


def touches_border(mask: np.ndarray) -> bool:
    return bool(mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any())


@dataclass
class FollowOutcome:
    """One followed query of the bag and what the node made of it."""

    query_id: str
    query: str
    expected: str
    ends: str  # the expected final state
    answer: str | None = None  # the query's result status
    frames: int = 0  # tracking updates
    ious: list[float] = field(default_factory=list)
    errors_cm: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    final_state: str | None = None
    final_reason: str | None = None
    gone: str | None = None  # how the object goes: "left the view" / "taken away" (None: stays)
    look_alike: str | None = None  # an object the followed masks must never be
    lookalike_ious: list[float] = field(default_factory=list)
    lost_delay_s: float | None = None  # object gone -> lost
    problems: list[str] = field(default_factory=list)
    backends: dict | None = None  # the query result's "backends" (what answered)

    @property
    def answered(self) -> bool:
        return self.answer is not None

    @property
    def mean_iou(self) -> float | None:
        return float(np.mean(self.ious)) if self.ious else None

    @property
    def mean_error_cm(self) -> float | None:
        return float(np.mean(self.errors_cm)) if self.errors_cm else None

    @property
    def max_lookalike_iou(self) -> float | None:
        return max(self.lookalike_ious) if self.lookalike_ious else None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        out = asdict(self)
        out.update(mean_iou=self.mean_iou, mean_error_cm=self.mean_error_cm,
                   max_lookalike_iou=self.max_lookalike_iou, ok=self.ok)
        return out


def score_follow(outcome: FollowOutcome, statuses: list[dict], masks: dict[int, np.ndarray],
                 targets: dict[int, np.ndarray], truth: sample.GroundTruth,
                 gone_ns: int | None, lost_bound: float) -> None:
    """Fill ``outcome`` from its ``~/follow/status`` messages (in arrival order), the received
    masks and targets by frame stamp (ns), and the ground truth; ``gone_ns``: the stamp of the
    first frame without the object (None: it stays); ``lost_bound``: how long after it
    ``lost`` may come (``lost_bound_s``)."""
    name = outcome.expected
    for status in statuses:
        stamp = stamp_of(status)
        if status.get("state") != "tracking":
            continue
        outcome.frames += 1
        if status.get("latency_ms") is not None:
            outcome.latencies_ms.append(float(status["latency_ms"]))
        index = truth.frame_index(stamp)
        if index is None:
            outcome.problems.append(f"a follow status has stamp {stamp}, not a frame of the bag")
            continue
        got = masks.get(stamp)
        if got is not None and outcome.look_alike is not None:
            outcome.lookalike_ious.append(sample.mask_iou(got, truth.mask(index,
                                                                          outcome.look_alike)))
        true_mask = truth.mask(index, name)
        if not true_mask.any():
            continue
        if got is None and status.get("objects"):
            continue  # the image was lost in transit: nothing to score
        outcome.ious.append(0.0 if got is None else sample.mask_iou(got, true_mask))
        point = targets.get(stamp)
        if point is not None and not touches_border(true_mask):
            error = np.asarray(point, float) - truth.position(index, name)
            outcome.errors_cm.append(float(np.linalg.norm(error) * 100.0))
    finals = [s for s in statuses if s.get("state") in ("lost", "stopped")]
    if finals:
        outcome.final_state = finals[0].get("state")
        outcome.final_reason = finals[0].get("reason")
        if outcome.final_state == "lost" and gone_ns is not None:
            outcome.lost_delay_s = (stamp_of(finals[0]) - gone_ns) / 1e9
    _judge(outcome, len(finals), lost_bound)


def _gone_phrase(gone: str | None) -> str:
    return "was taken away" if gone == "taken away" else "left the view"


def _judge(outcome: FollowOutcome, final_count: int, lost_bound: float) -> None:
    problems = outcome.problems
    if outcome.answer != "succeeded":
        problems.append(f"the query ended {outcome.answer or 'unanswered'}")
        return
    if outcome.frames == 0:
        problems.append("no frame was followed")
    if outcome.mean_iou is not None and outcome.mean_iou < MIN_MEAN_IOU:
        problems.append(f"mean IoU {outcome.mean_iou:.3f} < {MIN_MEAN_IOU}")
    if outcome.mean_error_cm is not None and outcome.mean_error_cm > MAX_MEAN_ERROR_CM:
        problems.append(f"mean 3D error {outcome.mean_error_cm:.2f} cm > {MAX_MEAN_ERROR_CM} cm")
    worst = outcome.max_lookalike_iou
    if worst is not None and worst > MAX_LOOKALIKE_IOU:
        problems.append(f"a followed mask is the look-alike {outcome.look_alike} (IoU "
                        f"{worst:.3f} > {MAX_LOOKALIKE_IOU})")
    if final_count != 1:
        problems.append(f"{final_count} final statuses (lost/stopped), expected exactly 1")
    if outcome.final_state != outcome.ends:
        problems.append(f"ended {outcome.final_state}, expected {outcome.ends}")
    elif outcome.ends == "lost":
        delay = outcome.lost_delay_s
        if delay is None or not 0.0 <= delay <= lost_bound + 1e-6:
            problems.append(f"lost {delay} s after the object {_gone_phrase(outcome.gone)} "
                            f"(expected within {lost_bound:g} s)")


def format_outcome(outcome: FollowOutcome) -> list[str]:
    """The lines printed for one followed query: summary, per-frame IoU, how it ended."""
    head = f"[{outcome.query_id}] {outcome.query!r} -> {outcome.expected}: answer " \
           f"{outcome.answer}, {outcome.frames} frames followed"
    if outcome.mean_iou is not None:
        head += f", IoU mean {outcome.mean_iou:.3f} (min {min(outcome.ious):.3f})"
    if outcome.mean_error_cm is not None:
        head += (f", 3D error mean {outcome.mean_error_cm:.2f} cm "
                 f"(max {max(outcome.errors_cm):.2f} cm)")
    if outcome.latencies_ms:
        head += f", latency median {float(np.median(outcome.latencies_ms)):.1f} ms"
    if outcome.max_lookalike_iou is not None:
        head += f", IoU with the look-alike {outcome.look_alike} max " \
                f"{outcome.max_lookalike_iou:.3f}"
    lines = [head]
    for start in range(0, len(outcome.ious), 15):
        chunk = outcome.ious[start:start + 15]
        lines.append(f"    IoU per frame [{start + 1}-{start + len(chunk)}]: "
                     + " ".join(f"{v:.2f}" for v in chunk))
    end = f"    ended: {outcome.final_state} ({outcome.final_reason})"
    if outcome.lost_delay_s is not None:
        end += f", {outcome.lost_delay_s:.2f} s after the object {_gone_phrase(outcome.gone)}"
    lines.append(end)
    lines.append("    " + ("OK" if outcome.ok else "WRONG: " + "; ".join(outcome.problems)))
    return lines


def format_summary(report: DemoReport, out_dir) -> list[str]:
    """The lines printed at the end of ``demo-follow``: each followed query, what answered, the
    count of correct ones."""
    lines = [line for outcome in report.outcomes for line in format_outcome(outcome)]
    lines += backends_lines(report.outcomes)
    lines.append(f"followed queries correct: {report.correct}/{len(report.outcomes)}; "
                 f"overlays in {out_dir}; wall time {report.wall_s:.1f} s")
    if report.error:
        lines.append(f"error: {report.error}")
    return lines
