"""``sam3-agent run``: answer one query on one image file, or correct an earlier run's answer.

Prints the result JSON (interface §6) on stdout and nothing else there; logs go to stderr.
Exit status: 0 succeeded/no_mask, 1 failed/cancelled, 2 bad usage (including a backend that
lacks what it needs: endpoint, API key, SAM 3 checkpoint; checked before anything loads).

With ``--depth`` (a depth image registered to the colour image) and ``--intrinsics`` or
``--camera-info``, each mask gains ``position`` and ``box`` as on ROS (interface §4, §6): the same
``geometry.measure.measure_mask`` with the same ``depth.*`` parameters (``-p depth.erode_px:=...``).
The depth and intrinsics files are read before the agent runs: an unreadable one is a usage error.
A camera model that does not fit the colour image (``camera_model.image_intrinsics``: another size
unless binning/ROI map it, implausible focal lengths, a principal point outside) gives no position
and no box, the reason in each mask's ``position_error`` / ``box_error``, as on ROS. With
``scene.enabled`` the node's grasp scene runs too (``pipeline/answer_scene.py``, CONTRACTS §12):
each box reaches its support (``support`` / ``support_error``), the target gains ``grasps`` (or
``grasp_error``) and ``--out DIR`` gets ``scene.ply`` (x y z rgb label), in the camera frame.

``--out DIR`` also keeps what a refinement needs (``core/answer_folder.py``: the frame, the
selected masks, the query and its answer). DIR is created and checked writable before the query
runs (a usage error otherwise); should writing fail later all the same, the result JSON is still
printed, stderr says what could not be written, and the exit status is 1.
``run --refines DIR --query TEXT`` answers TEXT on that frame, shown that answer (interface
§8c), and may write its own ``--out`` (the same DIR too).
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading
from pathlib import Path

from sam3_agent_ros.core import finite_json
from sam3_agent_ros.inputs import (
    add_config_arguments,
    check_backends,
    load_config,
    prepare_out_dir,
    read_rgb,
    write_png,
)
from sam3_agent_ros.redact import redact_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
log = logging.getLogger("sam3_agent_ros.cli")


class UsageError(Exception):
    pass


def register(subparsers) -> None:
    """Add ``run`` to the ``sam3-agent`` sub-command parsers."""
    run = subparsers.add_parser("run", help="answer one query on one image file")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--image", help="image file (PNG or JPEG)")
    source.add_argument("--refines", metavar="DIR",
                        help="correct the answer an earlier run wrote with --out DIR: the query "
                             '(e.g. "no, the other one") is answered on its frame')
    run.add_argument("--query", required=True, help='e.g. "the leftmost blue object"')
    run.add_argument("--query-id", help="query_id of the result (default cli-1; with --refines "
                                        "the refined one's cli-<n> + 1)")
    add_config_arguments(run)
    depth = run.add_argument_group(
        "3D (as with depth on ROS: position and box per mask in the result JSON)")
    depth.add_argument("--depth", metavar="DEPTH",
                       help="depth image registered to --image: a 16-bit PNG or a .npy array")
    depth.add_argument("--depth-scale", type=float, metavar="M",
                       help="metres per depth unit (default: 0.001 for integer data, i.e. "
                            "millimetres; 1.0 for float data)")
    intrinsics = depth.add_mutually_exclusive_group()
    intrinsics.add_argument("--intrinsics", metavar="FX,FY,CX,CY",
                            help="the colour camera's intrinsics in pixels")
    intrinsics.add_argument("--camera-info", metavar="YAML",
                            help="the colour camera's calibration YAML (camera_matrix: data:) "
                                 "or a dumped sensor_msgs/CameraInfo (k:)")
    run.add_argument("--out", help="directory for overlay.png and mask.png, and what a later "
                                   "--refines needs (frame.png, masks/, answer.json)")
    run.add_argument("--trace", help="write every LLM request/response as JSON lines here")
    run.set_defaults(handler=cmd_run)


def read_image(path: str, max_pixels: int):
    try:
        return read_rgb(path, max_pixels)
    except ValueError as exc:
        raise UsageError(f"--image {path}: {exc}") from None


def read_depth_inputs(args: argparse.Namespace, width: int, height: int, max_pixels: int,
                      rectified: bool = True):
    """``(depth in metres at the colour resolution, the colour intrinsics, None)`` from --depth
    and --intrinsics / --camera-info, or ``(None, None, why the camera model does not fit)``;
    None without --depth; UsageError for a missing or unreadable one. ``rectified``:
    ``depth.rectified`` (false: the camera-info's K and D undistort the mask pixels)."""
    from sam3_agent_ros.depth_files import parse_intrinsics, read_camera_model, read_depth
    from sam3_agent_ros.geometry.camera_model import CameraModel, CameraModelError, image_intrinsics
    from sam3_agent_ros.geometry.depth_image import depth_for_colour

    has_intrinsics = args.intrinsics is not None or args.camera_info is not None
    if args.depth is None:
        if has_intrinsics or args.depth_scale is not None:
            raise UsageError("--intrinsics, --camera-info and --depth-scale go with --depth")
        return None
    if not has_intrinsics:
        raise UsageError("--depth needs the colour camera's --intrinsics fx,fy,cx,cy or "
                         "--camera-info YAML")
    try:
        depth_m = read_depth(args.depth, args.depth_scale, max_pixels)
    except ValueError as exc:
        raise UsageError(f"--depth {args.depth}: {exc}") from None
    flag = (f"--intrinsics {args.intrinsics}" if args.intrinsics is not None
            else f"--camera-info {args.camera_info}")
    try:
        if args.intrinsics is not None:
            model = CameraModel(parse_intrinsics(args.intrinsics))
        else:
            model = read_camera_model(args.camera_info)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None
    try:
        intrinsics = image_intrinsics(model, (width, height), rectified=rectified)
    except CameraModelError as exc:
        return None, None, f"unusable camera model ({flag}): {exc}"
    try:
        return (*depth_for_colour(depth_m, (width, height), intrinsics), None)
    except ValueError as exc:
        raise UsageError(f"--depth {args.depth}: {exc}") from None


def read_refined(folder: str, max_pixels: int):
    from sam3_agent_ros.core.answer_folder import AnswerFolderError, read_answer_folder

    try:
        return read_answer_folder(Path(folder), max_pixels)
    except AnswerFolderError as exc:
        raise UsageError(f"--refines {folder}: {exc}") from None


def next_cli_id(refined_id: str) -> str:
    """The default query_id of a refinement: ``cli-2`` after ``cli-1``, and so on."""
    match = re.fullmatch(r"cli-([0-9]{1,9})", refined_id)
    return f"cli-{int(match.group(1)) + 1}" if match else "cli-2"


def cmd_run(args: argparse.Namespace) -> int:
    from sam3_agent_ros.config import ConfigError
    from sam3_agent_ros.core.answers import AnswerStore
    from sam3_agent_ros.core.types import Frame, Query, QueryStatus, Result

    refined = None
    try:
        config = load_config(args.params_file, args.overrides, args.offline)
        if args.refines:
            refined = read_refined(args.refines, config.node.max_image_pixels)
            image = refined.frame.image
        else:
            image = read_image(args.image, config.node.max_image_pixels)
        # With --refines, --depth is the depth of the refined answer's frame.
        depth = read_depth_inputs(args, image.shape[1], image.shape[0],
                                  config.node.max_image_pixels, config.depth.rectified)
        if args.out:  # before the query runs: an answer must not be lost to a bad path
            prepare_out_dir(args.out)
    except (ConfigError, UsageError, ValueError) as exc:
        print(f"sam3-agent run: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    if not check_backends(config, "run"):
        return EXIT_USAGE
    answers = AnswerStore(1)  # the refined answer, if any: the CLI answers one query
    if refined is not None:
        answers.add(refined)
        frame = refined.frame
        query = Query(args.query_id or next_cli_id(refined.record.query_id), args.query,
                      refines=refined.record.query_id)
    else:
        frame, query = Frame(image, frame_id="image"), Query(args.query_id or "cli-1", args.query)
    try:
        agent = _build_agent(config, args.trace, answers)
    except Exception as exc:  # backend construction: a system error with a clear reason
        result = Result(query.id, query.text, QueryStatus.FAILED, error=str(exc), frame=frame,
                        refines=query.refines, backends=config.backends)
        _write_then_print(args.out, result, refined)
        return EXIT_FAILED
    try:
        result, signalled = _run_interruptible(agent, frame, query)
    finally:
        from sam3_agent_ros.backends import close_quietly

        close_quietly(agent.llm)
        close_quietly(agent.segmenter)
    points = scene = None
    if depth is not None:  # the node's 3D step (pipeline.measurement), on one depth image
        from sam3_agent_ros.pipeline.measurement import SceneRequest, measure_answer
        from sam3_agent_ros.pipeline.three_d import PreparedDepth

        # --out: the target's points too (DIR/points.ply), at most depth.cloud_max_points
        cloud = config.depth.cloud_max_points if args.out else None
        depth_m, intrinsics, reason = depth
        # The grasp scene (CONTRACTS §12) as the node runs it: the boxes reach their support,
        # the target gains its grasps, DIR/scene.ply the labelled cloud around it
        answer = measure_answer(result, PreparedDepth(depth_m, intrinsics, reason, config.depth),
                                cloud_max_points=cloud,
                                scene=SceneRequest(config.scene, config.grasp,
                                                   config.depth.cloud_max_points))
        points, scene = answer.points, answer.scene
    if not _write_then_print(args.out, result, refined, points, scene):
        return EXIT_FAILED
    if signalled is not None:  # Ctrl-C 130, SIGTERM 143: as a shell reports them, as ask does
        return 128 + signalled
    return EXIT_OK if result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK) \
        else EXIT_FAILED


def _build_agent(config, trace_path: str | None, answers=None):
    from sam3_agent_ros.backends import describe_backends, make_llm, make_segmenter
    from sam3_agent_ros.core.agent import Agent

    llm = make_llm(config)
    if trace_path:
        from sam3_agent_ros.llm.trace import TracingClient

        llm = TracingClient(llm, trace_path)
    segmenter = make_segmenter(config)
    agent = Agent(config, llm=llm, segmenter=segmenter, answers=answers)
    agent.backends = describe_backends(config, segmenter)  # + the engine and its providers
    return agent


def _run_interruptible(agent, frame, query):
    """Ctrl-C / SIGTERM cancel the query; it still ends with its one (cancelled) result.
    Returns (result, the number of the signal that cancelled it or None)."""
    from sam3_agent_ros.core.cancel import CancelToken

    cancel = CancelToken()
    signalled: list[int] = []

    def on_signal(signum, _frame):
        signalled.append(int(signum))
        cancel.cancel(f"interrupted by signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
    result = agent.run(frame, query, cancel=cancel,
                       on_status=lambda event: log.info("status %s",
                                                        finite_json.dumps(event.to_json())))
    return result, (signalled[0] if signalled else None)


def _write_then_print(out: str | None, result, refined, points=None, scene=None) -> bool:
    """Write ``--out`` (when given), then print the result JSON whatever happened to the files;
    False (said on stderr) when they could not be written."""
    written = True
    if out:
        try:
            _write_outputs(Path(out), result, refined, points, scene)
        except (OSError, ValueError) as exc:  # checked before the run; a disk can still fail
            print(f"sam3-agent run: could not write --out {out}: {exc} (the result is on "
                  "stdout)", file=sys.stderr)
            written = False
    print(finite_json.dumps(result.to_json()))
    return written


# what --out holds besides the answer folder
RUN_FILES = ("overlay.png", "mask.png", "points.ply", "scene.ply")


def _write_outputs(out: Path, result, refined, points=None, scene=None) -> None:
    """overlay.png and mask.png, the answer folder a later ``--refines`` reads, and with depth
    points.ply (the target's points, ``points``: geometry.target_points.TargetPoints) and
    scene.ply (the labelled cloud around the target, x y z rgb label: ``scene``'s, the
    answer's pipeline.answer_scene.AnswerScene). A file of an earlier run that this one does
    not write (points.ply and scene.ply without --depth or without a target, the images of a
    query that got no frame) is removed: the folder holds this answer only."""
    import cv2

    from sam3_agent_ros import render
    from sam3_agent_ros.core.answer_folder import write_answer_folder

    out.mkdir(parents=True, exist_ok=True)
    write_answer_folder(out, result, refined)
    written = set()
    frame = result.frame
    if frame is not None:  # else no frame was answered on: nothing to draw
        masks = [m.mask for m in result.masks]
        overlay = render.overlay_masks(frame.image, masks) if masks else frame.image
        write_png(out / "overlay.png", cv2.cvtColor(overlay, cv2.COLOR_RGB2BGR))
        write_png(out / "mask.png", render.union_mask(masks, frame.image.shape[:2]))
        written |= {"overlay.png", "mask.png"}
        if points is not None:
            from sam3_agent_ros.geometry.target_points import write_ply

            write_ply(out / "points.ply", points.points, points.colours)
            written.add("points.ply")
        if scene is not None and scene.cloud is not None:
            from sam3_agent_ros.geometry.scene_cloud import write_scene_ply

            write_scene_ply(out / "scene.ply", scene.cloud)
            written.add("scene.ply")
    for name in set(RUN_FILES) - written:
        (out / name).unlink(missing_ok=True)
