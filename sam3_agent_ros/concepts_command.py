"""``sam3-agent concepts``: standing concepts on one image file, or on every frame of a bag, without
ROS (docs/concepts.md).

    sam3-agent concepts --image PATH --concepts "cup,bottle" [--out DIR]
        prints {"detections": [...]} (the fields of sam3_agent_ros/msg/ConceptDetection, plus the
        frame's size and the pass's timings) on stdout; DIR gets overlay.png and labels.png
        (16-bit, pixel = instance id)
    sam3-agent concepts --bag DIR [--topic TOPIC] [--max-frames N] --concepts "cup,bottle"
        one JSON line per frame (its stamp, frame_id, detections with ids carried from frame to
        frame); on stderr, the per-frame rate

``--concepts`` (comma-separated) replaces ``concepts.prompts`` of ``--params-file`` / ``-p``; the
list is bounded by ``concepts.max_prompts`` and ``concepts.max_prompt_chars`` as on the node.
Only the segmenter is built (no LLM). Exit status: 0 ran, 1 the segmenter failed or --out could
not be written (the JSON is printed all the same), 2 bad usage (--out is checked before the pass).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

from sam3_agent_ros.core import finite_json
from sam3_agent_ros.inputs import (
    add_config_arguments,
    load_config,
    prepare_out_dir,
    read_rgb,
    write_png,
)
from sam3_agent_ros.redact import redact_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")


class UsageError(Exception):
    pass


def register(subparsers) -> None:
    """Add ``concepts`` to the ``sam3-agent`` sub-command parsers."""
    parser = subparsers.add_parser(
        "concepts", help="standing concepts on an image file or a bag's frames (no ROS)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--image", help="image file (PNG or JPEG)")
    source.add_argument("--bag", help="rosbag2 bag (directory, or its .mcap/.db3 file)")
    parser.add_argument("--concepts", help='comma-separated, e.g. "cup,bottle" (default: '
                                           "concepts.prompts of the parameters)")
    parser.add_argument("--topic", help="the bag's image topic (default: its only colour "
                                        "Image/CompressedImage topic)")
    parser.add_argument("--max-frames", type=int, default=0,
                        help="stop after this many frames of the bag (0: all)")
    add_config_arguments(parser)
    parser.add_argument("--out", help="--image: directory for overlay.png and labels.png")
    parser.set_defaults(handler=cmd_concepts)


def parse_concepts(text: str) -> list[str]:
    """``"cup, red ball,"`` -> ``["cup", "red ball"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def cmd_concepts(args: argparse.Namespace) -> int:
    from sam3_agent_ros.config import Config, ConfigError

    try:
        config = load_config(args.params_file, args.overrides, args.offline)
        if args.concepts is not None:
            config = Config.from_params({**config.to_params(),
                                         "concepts.prompts": parse_concepts(args.concepts)})
        if not config.concepts.prompts:
            raise UsageError("no concepts: give --concepts \"cup,bottle\" (or concepts.prompts)")
        if args.max_frames < 0:
            raise UsageError("--max-frames must be >= 0")
        image = None
        if args.image:
            try:
                image = read_rgb(args.image, config.node.max_image_pixels)
            except ValueError as exc:
                raise UsageError(f"--image {args.image}: {exc}") from None
            if args.out:  # before the segmenter runs: the answer must not be lost to a bad path
                prepare_out_dir(args.out)
        elif args.out:
            raise UsageError("--out goes with --image (a bag prints JSON lines only)")
    except (ConfigError, UsageError, ValueError) as exc:
        print(f"sam3-agent concepts: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    if not _segmenter_ready(config):
        return EXIT_USAGE
    from sam3_agent_ros.backends import close_quietly, make_segmenter
    from sam3_agent_ros.concepts import StandingConcepts
    from sam3_agent_ros.core.errors import SegmenterError
    from sam3_agent_ros.follow.redetect import Gates

    try:
        segmenter = make_segmenter(config)
    except Exception as exc:  # backend construction: a system error with a clear reason
        print(f"sam3-agent concepts: cannot build the segmenter: {type(exc).__name__}: "
              f"{redact_text(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    concepts = StandingConcepts(config.concepts.prompts,
                                Gates(config.follow.match_min_iou, config.follow.match_max_shift))
    try:
        if image is not None:
            return _on_image(concepts, segmenter, image, args.out)
        return _on_bag(concepts, segmenter, args, config.node.max_image_pixels)
    except SegmenterError as exc:
        print(f"sam3-agent concepts: the segmenter failed: {redact_text(str(exc))}",
              file=sys.stderr)
        return EXIT_FAILED
    except UsageError as exc:
        print(f"sam3-agent concepts: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        close_quietly(segmenter)


def _segmenter_ready(config) -> bool:
    """What the segmenter lacks (SAM 3 weights...), said before anything loads; the LLM's needs
    do not matter here (no LLM is built)."""
    from sam3_agent_ros.backends import missing_requirements

    segmenter_only = dataclasses.replace(config, llm=dataclasses.replace(config.llm,
                                                                         backend="offline"))
    missing = missing_requirements(segmenter_only)
    for problem in missing:
        print(f"sam3-agent concepts: {problem}; to try without a model: add --offline",
              file=sys.stderr)
    if config.segmenter.backend == "color":
        print("sam3-agent concepts: the colour demo segmenter answers (segmenter.backend color: "
              "colour words and shapes, no model)", file=sys.stderr)
    return not missing


def _on_image(concepts, segmenter, image, out: str | None) -> int:
    from sam3_agent_ros.core.types import Frame

    result = concepts.process(segmenter, Frame(image, frame_id="image"))
    status = EXIT_OK
    if out:
        try:
            _write_images(Path(out), result)
        except (OSError, ValueError) as exc:  # checked before the run; a disk can still fail
            print(f"sam3-agent concepts: could not write --out {out}: {exc} (the detections "
                  "are on stdout)", file=sys.stderr)
            status = EXIT_FAILED
    print(finite_json.dumps(result.to_json()))
    return status


def _write_images(out: Path, result) -> None:
    import cv2

    from sam3_agent_ros.concepts import images

    out.mkdir(parents=True, exist_ok=True)
    image = result.frame.image
    write_png(out / "overlay.png",
              cv2.cvtColor(images.overlay(image, result.detections), cv2.COLOR_RGB2BGR))
    write_png(out / "labels.png", images.label_image(result.detections, image.shape[:2]))


def _on_bag(concepts, segmenter, args: argparse.Namespace, max_pixels: int) -> int:
    from rosbags.typesys import Stores, get_typestore

    from sam3_agent_ros.bags.replay import BagError, BagSource
    from sam3_agent_ros.ros.conversions import FrameUnusable, message_to_frame

    typestore = get_typestore(Stores.ROS2_KILTED)
    try:
        with BagSource(args.bag) as probe:
            topic = _image_topic(probe.topic_types, args.topic)
        source = BagSource(args.bag, topics=[topic])
    except BagError as exc:
        raise UsageError(str(exc)) from None
    passes_ms: list[float] = []
    skipped = 0
    started = time.perf_counter()
    with source:
        for message in source.messages():
            if args.max_frames and len(passes_ms) >= args.max_frames:
                break
            msg = typestore.deserialize_cdr(message.data, message.msgtype)
            try:
                frame = message_to_frame(msg, max_pixels)
            except FrameUnusable as exc:
                skipped += 1
                print(f"sam3-agent concepts: skipping a frame: {exc.reason}", file=sys.stderr)
                continue
            pass_started = time.perf_counter()
            result = concepts.process(segmenter, frame)
            passes_ms.append((time.perf_counter() - pass_started) * 1000.0)
            print(finite_json.dumps(result.to_json()), flush=True)
    wall_s = time.perf_counter() - started
    print(rate_line(topic, passes_ms, wall_s, skipped, len(concepts.prompts)), file=sys.stderr)
    return EXIT_OK


def _image_topic(topic_types: dict[str, str], wanted: str | None) -> str:
    """``wanted`` when it is an image topic of the bag; else the bag's only colour image topic
    (depth topics, by name, are not colour)."""
    images = {t: kind for t, kind in topic_types.items() if kind in IMAGE_TYPES}
    if wanted is not None:
        topic = wanted if wanted.startswith("/") else "/" + wanted
        if topic not in images:
            raise UsageError(f"--topic {wanted}: not an Image/CompressedImage topic of the bag "
                             f"(it has: {', '.join(sorted(images)) or 'none'})")
        return topic
    colour = sorted(t for t in images if "depth" not in t.lower())
    if len(colour) != 1:
        raise UsageError("choose the image topic with --topic (the bag has: "
                         f"{', '.join(sorted(images)) or 'no image topic'})")
    return colour[0]


def rate_line(topic: str, passes_ms: list[float], wall_s: float, skipped: int,
              concept_count: int) -> str:
    """The per-frame rate of a bag run, for stderr."""
    if not passes_ms:
        return f"concepts: no frame processed on {topic} ({skipped} skipped)"
    mean = statistics.fmean(passes_ms)
    return (f"concepts: {len(passes_ms)} frames of {topic}, {concept_count} concept(s): "
            f"{mean:.1f} ms per frame (median {statistics.median(passes_ms):.1f}, max "
            f"{max(passes_ms):.1f}) = {1000.0 / mean:.1f} frames/s of segmentation; "
            f"{len(passes_ms) / wall_s:.1f} frames/s with bag reading"
            + (f"; {skipped} skipped" if skipped else ""))
