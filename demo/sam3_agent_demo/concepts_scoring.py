"""``sam3-agent demo``'s standing-concepts run scored against the tabletop sample's ground truth
(pure: no ROS).

The demo's node segments ``DEMO_CONCEPTS`` on the bag's frames beside answering its queries. Each
published pass (``~/concepts/detections`` with its ``~/concepts/labels``) is scored on its frame:
a detection is right when its labelled pixels cover an object of its concept (a colour word:
``"blue object"`` -> the blue objects) with IoU >= ``IOU_THRESHOLD``, each object once; a frame is
right when every visible object of every concept is found once and nothing else is. Ids are
right when each object keeps one id over the whole run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from sam3_agent_demo import sample

DEMO_CONCEPTS = ("blue object", "red object")
CONCEPTS_RATE_HZ = 5.0
IOU_THRESHOLD = 0.8
SHOWN_FRAMES = 8  # frames listed in the summary when not right


def objects_of(concept: str, names: tuple[str, ...]) -> list[str]:
    """The scene objects a concept names: those whose name starts with its colour word."""
    colour = concept.split()[0].lower() if concept.split() else ""
    return [name for name in names if name.split("_")[0] == colour]


@dataclass
class ConceptFrameScore:
    """One pass on one frame of the bag: per concept, objects there / detections / right ones."""

    stamp_ns: int
    frame_index: int | None
    truth: dict[str, int] = field(default_factory=dict)  # concept -> visible objects
    found: dict[str, int] = field(default_factory=dict)  # concept -> detections
    matched: dict[str, int] = field(default_factory=dict)  # concept -> right detections
    ious: list[float] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)  # object -> id of its detection

    @property
    def right(self) -> bool:
        return self.frame_index is not None and all(
            self.found.get(c, 0) == n == self.matched.get(c, 0) for c, n in self.truth.items())

    def compact(self) -> str:
        """``4/4`` (right detections / objects), ``3/4 +1`` with extra detections."""
        truth = sum(self.truth.values())
        matched = sum(self.matched.values())
        extra = sum(self.found.values()) - matched
        return f"{matched}/{truth}" + (f" +{extra}" if extra else "")


def score_frame(detections: list[dict], labels: np.ndarray | None, stamp: int,
                truth: sample.GroundTruth, concepts: tuple[str, ...]) -> ConceptFrameScore:
    """Score one pass: ``detections`` as ``{"concept", "id"}`` dicts, ``labels`` its mono16 label
    image (None: not received, nothing is matched)."""
    index = truth.frame_index(stamp)
    score = ConceptFrameScore(stamp, index)
    if index is None:
        return score
    for concept in concepts:
        names = [n for n in objects_of(concept, truth.names) if truth.mask(index, n).any()]
        mine = [d for d in detections if d["concept"] == concept]
        score.truth[concept], score.found[concept] = len(names), len(mine)
        score.matched[concept] = 0
        left = list(names)
        for detection in mine:
            if labels is None:
                continue
            pixels = labels == detection["id"]
            best, best_iou = None, 0.0
            for name in left:
                iou = sample.mask_iou(pixels, truth.mask(index, name))
                if iou > best_iou:
                    best, best_iou = name, iou
            if best is not None and best_iou >= IOU_THRESHOLD:
                left.remove(best)
                score.matched[concept] += 1
                score.ious.append(best_iou)
                score.ids[best] = int(detection["id"])
    return score


@dataclass
class ConceptsOutcome:
    """The whole standing-concepts run of the demo."""

    concepts: tuple[str, ...] = DEMO_CONCEPTS
    rate_hz: float = CONCEPTS_RATE_HZ
    frames: list[ConceptFrameScore] = field(default_factory=list)
    problem: str | None = None

    @property
    def ids(self) -> dict[str, list[int]]:
        """Every id each object was given over the run (one each when they are stable)."""
        out: dict[str, list[int]] = {}
        for frame in self.frames:
            for name, instance_id in frame.ids.items():
                if instance_id not in out.setdefault(name, []):
                    out[name].append(instance_id)
        return out

    @property
    def right_frames(self) -> int:
        return sum(1 for f in self.frames if f.right)

    @property
    def ok(self) -> bool:
        return (self.problem is None and bool(self.frames)
                and self.right_frames == len(self.frames)
                and all(len(ids) == 1 for ids in self.ids.values()))

    def to_json(self) -> dict:
        return {"concepts": list(self.concepts), "rate_hz": self.rate_hz, "ok": self.ok,
                "right_frames": self.right_frames, "ids": self.ids, "problem": self.problem,
                "frames": [dict(asdict(f), right=f.right) for f in self.frames]}


def format_concepts(outcome: ConceptsOutcome | None) -> list[str]:
    """The summary lines of the standing-concepts run (none when the demo had none)."""
    if outcome is None:
        return []
    names = ", ".join(repr(c) for c in outcome.concepts)
    lines = [f"standing concepts [{names}] at concepts.rate_hz {outcome.rate_hz:g}: "
             f"{len(outcome.frames)} frames segmented beside the queries"]
    if outcome.frames:
        frames = outcome.frames
        ious = [v for f in frames for v in f.ious]
        lines.append(f"  right vs ground truth: {outcome.right_frames}/{len(frames)} frames "
                     f"(every object of each concept once, IoU >= {IOU_THRESHOLD})"
                     + (f"; mean IoU {np.mean(ious):.3f}" if ious else ""))
        counts: dict[str, int] = {}
        for frame in frames:
            counts[frame.compact()] = counts.get(frame.compact(), 0) + 1
        lines.append("  per frame, right detections/objects: "
                     + ", ".join(f"{key} on {n} frame(s)" for key, n in counts.items()))
        wrong = [f for f in frames if not f.right][:SHOWN_FRAMES]
        for frame in wrong:
            where = "not a frame of the bag" if frame.frame_index is None else \
                f"frame {frame.frame_index}"
            lines.append(f"  {where}: " + ", ".join(
                f"{c} {frame.matched.get(c, 0)}/{n} of {frame.found.get(c, 0)} found"
                for c, n in frame.truth.items()))
        ids = outcome.ids
        changed = sum(len(v) - 1 for v in ids.values())
        lines.append("  ids: " + ", ".join(f"{name} {'/'.join(map(str, v))}"
                                           for name, v in sorted(ids.items()))
                     + f" ({changed} id change(s) over the run)")
    if outcome.problem:
        lines.append(f"  problem: {outcome.problem}")
    return lines
