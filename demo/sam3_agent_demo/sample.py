"""The bundled sample bag: a synthetic tabletop sequence with queries and exact ground truth.

``generate_sample(out_dir)`` renders ``scene.render_sequence_frame`` at 10 Hz for 10 s and writes
a real rosbag2 bag (mcap, zstd chunks) with the topics a RealSense-style camera publishes, plus
``std_msgs/String`` queries at chosen times, and the ground truth the demo and the tests score
against. Everything is deterministic: the same code writes byte-identical messages.

Layout of ``out_dir`` (``data/sample_tabletop/`` in the repository):

- ``bag/`` - the rosbag2 bag (``metadata.yaml`` + ``bag.mcap``);
- ``ground_truth.json`` - topics, objects, queries with their expected object;
- ``ground_truth.npz`` - per frame: stamp, label image (k on the k-th object), 3D top centres.

Size: raw 640x480 rgb8 is 921,600 bytes a frame. The frames are rendered without pixel noise and
the chunks are compressed with zstd level 19 (about 30 KB a frame), so 101 frames with aligned
depth stay near 3 MB while the messages remain plain ``sensor_msgs/Image``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from sam3_agent_demo import scene as scene_mod

COLOR_TOPIC = "/camera/color/image_raw"
DEPTH_TOPIC = "/camera/aligned_depth_to_color/image_raw"
CAMERA_INFO_TOPIC = "/camera/color/camera_info"
QUERY_TOPIC = "/query"
FRAME_ID = "camera_color_optical_frame"

IMAGE_TYPE = "sensor_msgs/msg/Image"
CAMERA_INFO_TYPE = "sensor_msgs/msg/CameraInfo"
STRING_TYPE = "std_msgs/msg/String"
TOPIC_TYPES = {
    COLOR_TOPIC: IMAGE_TYPE,
    DEPTH_TOPIC: IMAGE_TYPE,
    CAMERA_INFO_TOPIC: CAMERA_INFO_TYPE,
    QUERY_TOPIC: STRING_TYPE,
}

BAG_DIRNAME = "bag"
GROUND_TRUTH_JSON = "ground_truth.json"
GROUND_TRUTH_NPZ = "ground_truth.npz"
MAX_SAMPLE_BYTES = 5 * 1024 * 1024
ZSTD_LEVEL = 19
START_NS = 1_700_000_000 * 1_000_000_000  # a fixed epoch keeps the bag reproducible


@dataclass(frozen=True)
class SampleQuery:
    """A query published at ``t_s`` seconds into the bag.

    ``query_id`` set: the message is the JSON ``{"id", "query"}`` (with ``"refines"`` when it
    corrects an earlier query's answer), else plain text.
    ``expected``: the scene object that answers it, or None when nothing should (``no_mask``); a
    refinement is answered on the frame of the answer it refines, and scored there.
    """

    t_s: float
    text: str
    expected: str | None
    query_id: str | None = None
    refines: str | None = None  # the query_id of the earlier query it corrects

    def message_data(self) -> str:
        if self.query_id is None:
            return self.text
        payload = {"id": self.query_id, "query": self.text}
        if self.refines is not None:
            payload["refines"] = self.refines
        return json.dumps(payload)


SAMPLE_QUERIES: tuple[SampleQuery, ...] = (
    SampleQuery(2.05, "the leftmost blue object", "blue_box"),
    SampleQuery(4.05, "the largest red object", "red_box", query_id="sample-red"),
    # The operator corrects the answer above: the other red object, on the same frame.
    SampleQuery(5.05, "no, the other one", "red_cylinder", query_id="sample-red-other",
                refines="sample-red"),
    SampleQuery(6.05, "the purple object", None),
    SampleQuery(8.05, "the yellow object", "yellow_ellipse", query_id="sample-yellow"),
)


@dataclass(frozen=True)
class SampleSpec:
    """What the sample bag holds; the defaults are the bundled bag."""

    rate_hz: float = 10.0
    duration_s: float = 10.0
    queries: tuple[SampleQuery, ...] = SAMPLE_QUERIES
    seed: int = 0
    noise_sigma: float = 0.0  # pixel noise would make the bag ~10x larger
    zstd_level: int = ZSTD_LEVEL

    def frame_times(self) -> list[float]:
        """Frame times in seconds from the start: 0, 1/rate, ..., duration (inclusive)."""
        count = int(round(self.duration_s * self.rate_hz)) + 1
        return [index / self.rate_hz for index in range(count)]


def stamp_ns(t_s: float) -> int:
    """Bag time (ns since the epoch) of ``t_s`` seconds into the sample."""
    return START_NS + int(round(t_s * 1e9))


def render_frame(t_s: float, spec: SampleSpec = SampleSpec()) -> scene_mod.SceneFrame:
    """The sample's frame at ``t_s`` (slight camera motion and lighting change over 10 s)."""
    pose, lighting = scene_mod.sequence_conditions(t_s, period_s=spec.duration_s)
    lighting = dataclasses.replace(lighting, noise_sigma=spec.noise_sigma)
    return scene_mod.render_scene(None, pose, lighting, seed=spec.seed * 1_000_003 +
                                  int(round(t_s * 1000.0)))


def new_typestore():
    """The rosbags type store of the bags (ROS 2 Kilted message definitions)."""
    return _typestore()


def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def _header(types, stamp: int):
    time_msg = types["builtin_interfaces/msg/Time"](sec=stamp // 1_000_000_000,
                                                    nanosec=stamp % 1_000_000_000)
    return types["std_msgs/msg/Header"](stamp=time_msg, frame_id=FRAME_ID)


def frame_messages(frame: scene_mod.SceneFrame, stamp: int, typestore) -> dict[str, bytes]:
    """CDR bytes of the colour image, aligned depth (16UC1 mm) and camera info of one frame."""
    types = typestore.types
    height, width = frame.rgb.shape[:2]
    image_cls = types[IMAGE_TYPE]
    rgb = image_cls(header=_header(types, stamp), height=height, width=width, encoding="rgb8",
                    is_bigendian=0, step=width * 3,
                    data=np.ascontiguousarray(frame.rgb).reshape(-1))
    depth_mm = frame.depth_mm()
    depth = image_cls(header=_header(types, stamp), height=height, width=width,
                      encoding="16UC1", is_bigendian=0, step=width * 2,
                      data=np.ascontiguousarray(depth_mm).view(np.uint8).reshape(-1))
    k = frame.intrinsics
    roi = types["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0,
                                                    do_rectify=False)
    info = types[CAMERA_INFO_TYPE](
        header=_header(types, stamp), height=height, width=width, distortion_model="plumb_bob",
        d=np.zeros(5), k=np.asarray(k.K, np.float64).reshape(-1),
        r=np.eye(3).reshape(-1),
        p=np.array([k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]),
        binning_x=0, binning_y=0, roi=roi)
    return {
        COLOR_TOPIC: typestore.serialize_cdr(rgb, IMAGE_TYPE),
        DEPTH_TOPIC: typestore.serialize_cdr(depth, IMAGE_TYPE),
        CAMERA_INFO_TOPIC: typestore.serialize_cdr(info, CAMERA_INFO_TYPE),
    }


def query_message(query: SampleQuery, typestore) -> bytes:
    return typestore.serialize_cdr(typestore.types[STRING_TYPE](data=query.message_data()),
                                   STRING_TYPE)


def iter_messages(spec: SampleSpec = SampleSpec(), typestore=None,
                  frame_times: list[float] | None = None) -> Iterator[tuple[int, str, bytes]]:
    """``(timestamp_ns, topic, cdr_bytes)`` of the sample in time order (frames before a query
    of the same time). ``frame_times`` restricts the frames rendered (tests)."""
    typestore = typestore or _typestore()
    events: list[tuple[float, int, object]] = []
    for t_s in spec.frame_times() if frame_times is None else frame_times:
        events.append((t_s, 0, t_s))
    for query in spec.queries:
        events.append((query.t_s, 1, query))
    for t_s, kind, item in sorted(events, key=lambda e: (e[0], e[1])):
        stamp = stamp_ns(t_s)
        if kind == 0:
            messages = frame_messages(render_frame(t_s, spec), stamp, typestore)
            for topic in (COLOR_TOPIC, DEPTH_TOPIC, CAMERA_INFO_TOPIC):
                yield stamp, topic, messages[topic]
        else:
            yield stamp, QUERY_TOPIC, query_message(item, typestore)


def write_bag(bag_dir: Path, spec: SampleSpec = SampleSpec()) -> Path:
    """Write the sample bag into ``bag_dir`` (replaced if it exists); returns ``bag_dir``."""
    typestore = _typestore()
    return write_messages(bag_dir, iter_messages(spec, typestore), typestore, spec.zstd_level)


def write_messages(bag_dir: Path, messages, typestore, zstd_level: int = ZSTD_LEVEL,
                   topic_types: dict[str, str] = TOPIC_TYPES) -> Path:
    """Write ``(timestamp_ns, topic, cdr_bytes)`` into a new mcap bag at ``bag_dir`` (replaced
    if it exists), zstd chunks at ``zstd_level``; returns ``bag_dir``."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

    bag_dir = Path(bag_dir)
    if bag_dir.exists():
        shutil.rmtree(bag_dir)
    writer = Writer(bag_dir, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with writer:
        _raise_chunk_compression_level(writer, zstd_level)
        connections = {topic: writer.add_connection(topic, msgtype, typestore=typestore)
                       for topic, msgtype in topic_types.items()}
        for stamp, topic, data in messages:
            writer.write(connections[topic], stamp, data)
    return bag_dir


def _raise_chunk_compression_level(writer, level: int) -> None:
    """rosbags compresses mcap chunks with zstd's default level (3: ~100 KB a frame here); level
    19 is 3-4x smaller and still a standard zstd chunk every mcap reader decodes. The hook is an
    attribute of rosbags' mcap storage: if it moves, the bag is only larger, never invalid."""
    storage = getattr(writer, "storage", None)
    if storage is None or getattr(storage, "compression", "") != "zstd":
        return
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    storage.compressor = partial(zstd.compress, level=level)


def write_ground_truth(out_dir: Path, spec: SampleSpec = SampleSpec()) -> None:
    """``ground_truth.json`` (description, queries) and ``ground_truth.npz`` (per-frame arrays)."""
    out_dir = Path(out_dir)
    times = spec.frame_times()
    frames = [render_frame(t_s, spec) for t_s in times]
    scene = frames[0].scene
    names = [obj.name for obj in scene.objects]
    np.savez_compressed(
        out_dir / GROUND_TRUTH_NPZ,
        stamps_ns=np.array([stamp_ns(t) for t in times], np.int64),
        labels=np.stack([frame.label_image() for frame in frames]),
        positions_m=np.array([[frame.positions[n] for n in names] for frame in frames]),
        names=np.array(names), K=frames[0].intrinsics.K)
    write_description(out_dir, spec, scene)


def write_description(out_dir: Path, spec: SampleSpec = SampleSpec(),
                      scene: scene_mod.Scene | None = None) -> None:
    """``ground_truth.json``: topics, queries, and each object's shape (enough for its true
    3D box: ``GroundTruth.true_box``)."""
    scene = scene or render_frame(0.0, spec).scene
    description = {
        "description": "Synthetic tabletop (sam3_agent_demo.scene.default_scene) seen from 1 m "
                       "above, 10 Hz, slight camera motion and lighting change. Positions are "
                       "the centres of the objects' top faces in the camera optical frame (m); "
                       "size_m is a top face's extent along x and y before its yaw_deg turn "
                       "(a triangle: base and height), tilt_deg its turn about x then y.",
        "frame_id": FRAME_ID,
        "start_ns": START_NS,
        "rate_hz": spec.rate_hz,
        "frame_count": len(spec.frame_times()),
        "topics": {**TOPIC_TYPES},
        "objects": [{"name": o.name, "color": o.color_name, "shape": o.shape,
                     "height_m": o.height, "size_m": list(o.size), "yaw_deg": o.yaw_deg,
                     "tilt_deg": list(o.tilt_deg)} for o in scene.objects],
        "queries": [{"t_s": q.t_s, "stamp_ns": stamp_ns(q.t_s), "data": q.message_data(),
                     "query": q.text, "query_id": q.query_id, "refines": q.refines,
                     "expected": q.expected}
                    for q in spec.queries],
    }
    (Path(out_dir) / GROUND_TRUTH_JSON).write_text(json.dumps(description, indent=2) + "\n")


def generate_sample(out_dir: Path, spec: SampleSpec = SampleSpec()) -> Path:
    """Write the bag and its ground truth into ``out_dir``; returns the bag directory."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bag_dir = write_bag(out_dir / BAG_DIRNAME, spec)
    write_ground_truth(out_dir, spec)
    return bag_dir


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# --- reading the ground truth back (demo, tests) ------------------------------------------------


@dataclass(frozen=True)
class GroundTruth:
    """The sample's ground truth, indexed by frame stamp."""

    stamps_ns: np.ndarray
    labels: np.ndarray  # (F, H, W) uint8
    positions_m: np.ndarray  # (F, N, 3)
    names: tuple[str, ...]
    queries: tuple[dict, ...]
    topics: dict[str, str]
    objects: tuple[dict, ...] = ()  # ground_truth.json's objects (shape, size, yaw, tilt)

    def frame_index(self, stamp: int) -> int | None:
        """Index of the frame with this exact stamp (ns), or None."""
        hits = np.nonzero(self.stamps_ns == stamp)[0]
        return int(hits[0]) if hits.size else None

    def mask(self, frame_index: int, name: str) -> np.ndarray:
        return self.labels[frame_index] == self.names.index(name) + 1

    def position(self, frame_index: int, name: str) -> np.ndarray:
        return self.positions_m[frame_index, self.names.index(name)]

    def true_box(self, frame_index: int, name: str) -> scene_mod.TrueBox | None:
        """The object's true 3D box on that frame (None for an older ground truth without the
        objects' sizes)."""
        described = next((o for o in self.objects if o["name"] == name), None)
        if described is None or "size_m" not in described:
            return None
        obj = scene_mod.SceneObject(
            name, described["color"], described["shape"], (0.0, 0.0),
            tuple(described["size_m"]), described["height_m"], described.get("yaw_deg", 0.0),
            tuple(described.get("tilt_deg", (0.0, 0.0))))
        return scene_mod.true_box(obj, tuple(self.position(frame_index, name)))

    def query_for(self, query_id: str | None, text: str) -> dict | None:
        """The bag's query a result answers: by id when the bag gave one, else by text."""
        for query in self.queries:
            if query["query_id"] is not None and query["query_id"] == query_id:
                return query
        for query in self.queries:
            if query["query_id"] is None and query["query"] == text:
                return query
        return None


def load_ground_truth(sample_dir: Path) -> GroundTruth:
    sample_dir = Path(sample_dir)
    description = json.loads((sample_dir / GROUND_TRUTH_JSON).read_text())
    with np.load(sample_dir / GROUND_TRUTH_NPZ) as data:
        return GroundTruth(stamps_ns=data["stamps_ns"], labels=data["labels"],
                           positions_m=data["positions_m"],
                           names=tuple(str(n) for n in data["names"]),
                           queries=tuple(description["queries"]), topics=description["topics"],
                           objects=tuple(description.get("objects", ())))


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two boolean masks (1.0 when both are empty)."""
    union = np.logical_or(a, b).sum()
    if union == 0:
        return 1.0
    return float(np.logical_and(a, b).sum() / union)


def default_sample_dir() -> Path:
    """``data/sample_tabletop`` of the source tree, else of the installed share directory."""
    from sam3_agent_ros.ros.dds import config_file_candidates

    candidates = [Path(__file__).resolve().parents[2] / "data" / "sample_tabletop"]
    # config_file_candidates gives <root>/config/<name>; the data dir is its sibling.
    candidates += [c.parent.parent / "data" / "sample_tabletop"
                   for c in config_file_candidates("x")[1:]]
    for candidate in candidates:
        if (candidate / BAG_DIRNAME / "metadata.yaml").is_file():
            return candidate
    searched = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"the sample bag is not installed; searched: {searched} "
                            "(make it with scripts/make_sample_bag.py)")
