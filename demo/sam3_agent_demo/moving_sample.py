"""The moving sample bags (follow mode): ``moving_scene``'s sequences as rosbag2 bags with follow
queries and per-frame ground truth.

``MOVING`` (``data/sample_moving/``): the camera pans while objects move; ``blue_box`` leaves the
view at frame 63 (6.3 s). Its ``/query`` messages exercise every way following ends:

- 0.55 s follow "the yellow object" -> 1.55 s a new query ends it (``stopped``);
- 1.55 s follow "the leftmost blue object" (``blue_box``) -> it leaves the view -> ``lost``;
- 7.55 s follow "the green object" -> 8.35 s ``{"stop_follow": true}`` (``stopped``).

``GRASP`` (``data/sample_grasp/``, its frames from 10 s on, so that both bags can be replayed one
after the other into one node): ``blue_box`` beside its look-alike ``blue_twin``; 10.35 s follow
"the leftmost blue object" (``blue_box``) -> it is taken away in place at 11.5 s -> ``lost``,
never ``blue_twin``.

Layout of a sample's folder, as ``sample.py``'s (``sample.load_ground_truth`` reads it): ``bag/``,
``ground_truth.json`` (queries with ``follow``, ``expected``, ``ends``, and how the expected
object goes: ``gone`` "left the view" / "taken away" at ``gone_stamp_ns``; ``look_alike``),
``ground_truth.npz`` (per frame: stamp, label image, 3D top centres; NaN while an object is
away). Same topics and frame id as the tabletop sample, so the demo's remaps are the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sam3_agent_demo import sample
from sam3_agent_demo import scene as scene_mod
from sam3_agent_demo.moving_scene import (
    GRASPED_OBJECT,
    LEAVING_OBJECT,
    LOOK_ALIKE,
    GraspSequence,
    MovingSequence,
)

DIRNAME = "sample_moving"
FPS = 10.0
N_FRAMES = 90
GONE_LEFT_VIEW = "left the view"
GONE_TAKEN = "taken away"


@dataclass(frozen=True)
class MovingQuery:
    """A ``/query`` message at ``t_s``: a followed query (``text``) or a stop (``text`` None).

    ``expected``: the object it answers; ``ends``: how its following ends (``stopped`` /
    ``lost``); ``look_alike``: an object its masks must never be."""

    t_s: float
    query_id: str | None
    text: str | None
    expected: str | None = None
    ends: str | None = None
    look_alike: str | None = None

    def message_data(self) -> str:
        if self.text is None:
            return json.dumps({"stop_follow": True})
        return json.dumps({"id": self.query_id, "query": self.text, "follow": True})


MOVING_QUERIES: tuple[MovingQuery, ...] = (
    MovingQuery(0.55, "follow-yellow", "the yellow object", "yellow_ellipse", "stopped"),
    MovingQuery(1.55, "follow-blue", "the leftmost blue object", LEAVING_OBJECT, "lost"),
    MovingQuery(7.55, "follow-green", "the green object", "green_prism", "stopped"),
    MovingQuery(8.35, None, None),
)
GRASP_QUERIES: tuple[MovingQuery, ...] = (
    MovingQuery(10.35, "follow-grasp", "the leftmost blue object", GRASPED_OBJECT, "lost",
                look_alike=LOOK_ALIKE),
)


@dataclass(frozen=True)
class MovingSample:
    """One moving sample bag: its folder name, its sequence, its queries, the time of its first
    frame (seconds after ``sample.START_NS``) and a line saying what it shows."""

    dirname: str
    sequence: MovingSequence
    queries: tuple[MovingQuery, ...]
    start_s: float = 0.0
    about: str = ""

    def frame_time(self, index: int) -> float:
        return self.start_s + self.sequence.stamp(index)

    def render_frame(self, index: int) -> scene_mod.SceneFrame:
        """Frame ``index`` without pixel noise (noise would make the bag ~15x larger: 47 MB);
        masks and positions are those of ``sequence.frame(index)``."""
        return self.sequence.frame(index, pixel_noise=False).scene_frame

    def iter_messages(self, typestore=None,
                      frames: list[int] | None = None) -> Iterator[tuple[int, str, bytes]]:
        """``(timestamp_ns, topic, cdr)`` in time order; ``frames`` restricts the frames
        (tests)."""
        typestore = typestore or sample.new_typestore()
        string_type = sample.STRING_TYPE
        indices = range(len(self.sequence)) if frames is None else frames
        events: list[tuple[float, int, object]] = [(self.frame_time(i), 0, i) for i in indices]
        events += [(q.t_s, 1, q) for q in self.queries]
        for t_s, kind, item in sorted(events, key=lambda e: (e[0], e[1])):
            stamp = sample.stamp_ns(t_s)
            if kind == 0:
                messages = sample.frame_messages(self.render_frame(item), stamp, typestore)
                for topic in (sample.COLOR_TOPIC, sample.DEPTH_TOPIC, sample.CAMERA_INFO_TOPIC):
                    yield stamp, topic, messages[topic]
            else:
                data = typestore.types[string_type](data=item.message_data())
                yield stamp, sample.QUERY_TOPIC, typestore.serialize_cdr(data, string_type)

    def gone(self, query: MovingQuery) -> tuple[str, int] | None:
        """How and when (frame stamp, ns) the query's object goes after the query: it leaves
        the view or is taken away; None when it stays."""
        if query.expected is None:
            return None
        after = next((i for i in range(len(self.sequence)) if self.frame_time(i) >= query.t_s),
                     len(self.sequence))
        index = self.sequence.first_index_without(query.expected, start=after)
        if index is None:
            return None
        on_table = {obj.name for obj in self.sequence.scene(index).objects}
        how = GONE_LEFT_VIEW if query.expected in on_table else GONE_TAKEN
        return how, sample.stamp_ns(self.frame_time(index))

    def write_truth_arrays(self, out_dir: Path) -> None:
        frames = [self.render_frame(i) for i in range(len(self.sequence))]
        names = list(frames[0].masks)
        labels = np.zeros((len(frames),) + frames[0].rgb.shape[:2], np.uint8)
        for index, frame in enumerate(frames):
            for k, name in enumerate(names):
                labels[index][frame.masks[name]] = k + 1
        np.savez_compressed(
            Path(out_dir) / sample.GROUND_TRUTH_NPZ,
            stamps_ns=np.array([sample.stamp_ns(self.frame_time(i)) for i in range(len(frames))],
                               np.int64),
            labels=labels,
            positions_m=np.array([[frame.positions[n] for n in names] for frame in frames]),
            names=np.array(names), K=frames[0].intrinsics.K)

    def description(self) -> dict:
        """What ``ground_truth.json`` holds."""
        leaves = self.sequence.first_index_without(LEAVING_OBJECT)
        if leaves is not None and LEAVING_OBJECT not in {
                obj.name for obj in self.sequence.scene(leaves).objects}:
            leaves = None  # taken away, not out of the view
        queries = []
        for q in self.queries:
            gone = self.gone(q)
            queries.append({
                "t_s": q.t_s, "stamp_ns": sample.stamp_ns(q.t_s), "data": q.message_data(),
                "query": q.text, "query_id": q.query_id, "expected": q.expected,
                "follow": q.text is not None, "stop_follow": q.text is None, "ends": q.ends,
                "gone": gone[0] if gone else None, "gone_stamp_ns": gone[1] if gone else None,
                "look_alike": q.look_alike})
        return {
            "description": self.about,
            "frame_id": sample.FRAME_ID,
            "start_ns": sample.stamp_ns(self.start_s),
            "rate_hz": self.sequence.fps,
            "frame_count": len(self.sequence),
            "leaving_object": None if leaves is None else LEAVING_OBJECT,
            "leaves_view_stamp_ns": (None if leaves is None
                                     else sample.stamp_ns(self.frame_time(leaves))),
            "topics": {**sample.TOPIC_TYPES},
            "queries": queries,
        }

    def write_description(self, out_dir: Path) -> None:
        (Path(out_dir) / sample.GROUND_TRUTH_JSON).write_text(
            json.dumps(self.description(), indent=2) + "\n")

    def generate(self, out_dir: Path) -> Path:
        """Write the bag and its ground truth into ``out_dir``; returns the bag directory."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        typestore = sample.new_typestore()
        bag_dir = sample.write_messages(out_dir / sample.BAG_DIRNAME,
                                        self.iter_messages(typestore=typestore), typestore)
        self.write_truth_arrays(out_dir)
        self.write_description(out_dir)
        return bag_dir

    def default_dir(self) -> Path:
        """``data/<dirname>`` next to the tabletop sample (source tree or share directory)."""
        return sample.default_sample_dir().parent / self.dirname


MOVING = MovingSample(
    DIRNAME, MovingSequence(n_frames=N_FRAMES, fps=FPS), MOVING_QUERIES,
    about="Synthetic moving tabletop (sam3_agent_demo.moving_scene): the camera pans and "
          "objects move; blue_box leaves the view. 10 Hz. Positions are the centres of the "
          "objects' top faces in the camera optical frame (m).")
GRASP = MovingSample(
    "sample_grasp", GraspSequence(n_frames=45, fps=FPS, removed_at=15, put_back_at=None),
    GRASP_QUERIES, start_s=10.0,
    about="Synthetic grasp (sam3_agent_demo.moving_scene.GraspSequence): blue_box is taken "
          "away in place beside its look-alike blue_twin; the camera wobbles. 10 Hz. Positions "
          "are the centres of the objects' top faces in the camera optical frame (m), NaN "
          "while an object is away.")
SAMPLES = (MOVING, GRASP)  # what the follow demo replays, in this order


# The moving sample (MOVING), as the module has always offered it.
def sequence() -> MovingSequence:
    return MOVING.sequence


def render_frame(index: int) -> scene_mod.SceneFrame:
    return MOVING.render_frame(index)


def frame_time(index: int) -> float:
    return MOVING.frame_time(index)


def iter_messages(typestore=None,
                  frames: list[int] | None = None) -> Iterator[tuple[int, str, bytes]]:
    return MOVING.iter_messages(typestore, frames)


def generate(out_dir: Path) -> Path:
    return MOVING.generate(out_dir)


def default_dir() -> Path:
    return MOVING.default_dir()


def load_description(sample_dir: Path) -> dict:
    return json.loads((Path(sample_dir) / sample.GROUND_TRUTH_JSON).read_text())
