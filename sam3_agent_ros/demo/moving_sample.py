"""The moving sample bag (follow mode): ``moving_scene.MovingSequence`` as a rosbag2 bag with
follow queries and per-frame ground truth.

The camera pans while objects move; ``blue_box`` leaves the view at frame 63 (6.3 s). The bag's
``/query`` messages exercise every way following ends:

- 0.55 s follow "the yellow object" -> 1.55 s a new query ends it (``stopped``);
- 1.55 s follow "the leftmost blue object" (``blue_box``) -> it leaves the view -> ``lost``;
- 7.55 s follow "the green object" -> 8.35 s ``{"stop_follow": true}`` (``stopped``).

Layout of ``out_dir`` (``data/sample_moving/``), as ``sample.py``'s (``sample.load_ground_truth``
reads it): ``bag/``, ``ground_truth.json`` (queries with ``follow``, ``expected``, ``ends``),
``ground_truth.npz`` (per frame: stamp, label image, 3D top centres). Same topics and frame id
as the tabletop sample, so the demo's remaps are the same.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sam3_agent_ros.demo import sample
from sam3_agent_ros.demo import scene as scene_mod
from sam3_agent_ros.demo.moving_scene import (
    LEAVING_OBJECT,
    MovingSequence,
    camera_pose,
    lighting,
    moved_scene,
)

DIRNAME = "sample_moving"
FPS = 10.0
N_FRAMES = 90


@dataclass(frozen=True)
class MovingQuery:
    """A ``/query`` message at ``t_s``: a followed query (``text``) or a stop (``text`` None).

    ``expected``: the object it answers; ``ends``: how its following ends (``stopped`` /
    ``lost``)."""

    t_s: float
    query_id: str | None
    text: str | None
    expected: str | None = None
    ends: str | None = None

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


def sequence() -> MovingSequence:
    return MovingSequence(n_frames=N_FRAMES, fps=FPS)


def render_frame(index: int) -> scene_mod.SceneFrame:
    """Frame ``index`` of ``sequence()`` without pixel noise (noise would make the bag ~15x
    larger: 47 MB); masks and positions are those of ``sequence().frame(index)``."""
    moving = sequence()
    progress = moving.progress(index)
    light = dataclasses.replace(lighting(progress), noise_sigma=0.0)
    return scene_mod.render_scene(moved_scene(progress, scene_mod.default_scene()),
                                  camera_pose(progress), light, seed=index)


def frame_time(index: int) -> float:
    return index / FPS


def iter_messages(queries: tuple[MovingQuery, ...] = MOVING_QUERIES, typestore=None,
                  frames: list[int] | None = None) -> Iterator[tuple[int, str, bytes]]:
    """``(timestamp_ns, topic, cdr)`` in time order; ``frames`` restricts the frames (tests)."""
    typestore = typestore or sample.new_typestore()
    moving = sequence()
    string_type = sample.STRING_TYPE
    events: list[tuple[float, int, object]] = [
        (frame_time(i), 0, i) for i in (range(len(moving)) if frames is None else frames)]
    events += [(q.t_s, 1, q) for q in queries]
    for t_s, kind, item in sorted(events, key=lambda e: (e[0], e[1])):
        stamp = sample.stamp_ns(t_s)
        if kind == 0:
            messages = sample.frame_messages(render_frame(item), stamp, typestore)
            for topic in (sample.COLOR_TOPIC, sample.DEPTH_TOPIC, sample.CAMERA_INFO_TOPIC):
                yield stamp, topic, messages[topic]
        else:
            data = typestore.types[string_type](data=item.message_data())
            yield stamp, sample.QUERY_TOPIC, typestore.serialize_cdr(data, string_type)


def write_ground_truth(out_dir: Path, queries: tuple[MovingQuery, ...] = MOVING_QUERIES) -> None:
    moving = sequence()
    frames = [render_frame(i) for i in range(len(moving))]
    names = list(frames[0].masks)
    labels = np.zeros((len(frames),) + frames[0].rgb.shape[:2], np.uint8)
    for index, frame in enumerate(frames):
        for k, name in enumerate(names):
            labels[index][frame.masks[name]] = k + 1
    np.savez_compressed(
        Path(out_dir) / sample.GROUND_TRUTH_NPZ,
        stamps_ns=np.array([sample.stamp_ns(frame_time(i)) for i in range(len(frames))],
                           np.int64),
        labels=labels,
        positions_m=np.array([[frame.positions[n] for n in names] for frame in frames]),
        names=np.array(names), K=frames[0].intrinsics.K)
    leaves = moving.first_index_without(LEAVING_OBJECT)
    description = {
        "description": "Synthetic moving tabletop (sam3_agent_ros.demo.moving_scene): the camera "
                       "pans and objects move; blue_box leaves the view. 10 Hz. Positions are "
                       "the centres of the objects' top faces in the camera optical frame (m).",
        "frame_id": sample.FRAME_ID,
        "start_ns": sample.START_NS,
        "rate_hz": FPS,
        "frame_count": len(frames),
        "leaving_object": LEAVING_OBJECT,
        "leaves_view_stamp_ns": None if leaves is None else sample.stamp_ns(frame_time(leaves)),
        "topics": {**sample.TOPIC_TYPES},
        "queries": [{"t_s": q.t_s, "stamp_ns": sample.stamp_ns(q.t_s), "data": q.message_data(),
                     "query": q.text, "query_id": q.query_id, "expected": q.expected,
                     "follow": q.text is not None, "stop_follow": q.text is None,
                     "ends": q.ends} for q in queries],
    }
    (Path(out_dir) / sample.GROUND_TRUTH_JSON).write_text(json.dumps(description, indent=2)
                                                          + "\n")


def generate(out_dir: Path) -> Path:
    """Write the bag and its ground truth into ``out_dir``; returns the bag directory."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    typestore = sample.new_typestore()
    bag_dir = sample.write_messages(out_dir / sample.BAG_DIRNAME,
                                    iter_messages(typestore=typestore), typestore)
    write_ground_truth(out_dir)
    return bag_dir


def load_description(sample_dir: Path) -> dict:
    return json.loads((Path(sample_dir) / sample.GROUND_TRUTH_JSON).read_text())


def default_dir() -> Path:
    """``data/sample_moving`` next to the tabletop sample (source tree or share directory)."""
    return sample.default_sample_dir().parent / DIRNAME
