"""``sam3-agent``: run one query on an image file (``run``), and the bag tools (``replay``,
``record``, ``demo``, registered by ``sam3_agent_ros.bags.commands``), and ``eval`` /
``eval-compare`` (``sam3_agent_ros.eval.commands``), ``ask --ros`` (``sam3_agent_ros.client``), and
``lifecycle`` / ``param`` (``sam3_agent_ros.ros.graph_cli``: a running node, without the ros2 CLI).

``run`` prints the result JSON (CONTRACTS §6) on stdout and nothing else there; logs go to stderr.
Exit status: 0 succeeded/no_mask, 1 failed/cancelled, 2 bad usage (including a backend that
lacks what it needs: endpoint, API key, SAM 3 checkpoint; checked before anything loads).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path

from sam3_agent_ros.redact import install_log_redaction, redact_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
log = logging.getLogger("sam3_agent_ros.cli")


class UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sam3-agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="answer one query on one image file")
    run.add_argument("--image", required=True, help="image file (PNG or JPEG)")
    run.add_argument("--query", required=True, help='e.g. "the leftmost blue object"')
    run.add_argument("--query-id", default="cli-1", help="query_id of the result")
    run.add_argument("--params-file", help="ROS 2 parameters YAML (sam3_agent: ros__parameters:)")
    run.add_argument("-p", dest="overrides", action="append", default=[], metavar="NAME:=VALUE",
                     help="set one parameter (repeatable), e.g. -p llm.model:=gpt-4o")
    add_offline_flag(run)
    run.add_argument("--out", help="directory for overlay.png and mask.png")
    run.add_argument("--trace", help="write every LLM request/response as JSON lines here")
    run.set_defaults(handler=cmd_run)
    try:
        from sam3_agent_ros.bags.commands import register
    except ImportError:  # bag tools not installed in this build
        pass
    else:
        register(commands)
    from sam3_agent_ros.eval.commands import register as register_eval

    register_eval(commands)  # eval, eval-compare (docs/eval.md)
    from sam3_agent_ros.client import register as register_ask

    register_ask(commands)  # ask --ros: one goal to a running node (docs/ros.md)
    from sam3_agent_ros.ros.graph_cli import register as register_graph

    register_graph(commands)  # lifecycle, param: a running node's services, without ros2 CLI
    return parser


def add_offline_flag(parser: argparse.ArgumentParser) -> None:
    from sam3_agent_ros.config import offline_overrides

    parser.add_argument("--offline", action="store_true",
                        help="use the built-in demo backends, no model (= "
                             + " ".join(f"-p {o}" for o in offline_overrides()) + ")")


def load_config(params_file: str | None, overrides: list[str], offline: bool = False):
    """Params file, then ``-p`` overrides, then ``--offline`` (``OFFLINE_BACKENDS``), validated
    into a Config (ConfigError on any problem, e.g. ``--offline`` against a ``-p`` backend)."""
    from sam3_agent_ros.config import (
        OFFLINE_BACKENDS,
        Config,
        ConfigError,
        load_params_file,
        parse_override,
    )

    params = load_params_file(params_file) if params_file else {}
    for text in overrides:
        name, value = parse_override(text)
        if offline and name in OFFLINE_BACKENDS and value != OFFLINE_BACKENDS[name]:
            raise ConfigError(f"--offline sets {name}:={OFFLINE_BACKENDS[name]} but -p "
                              f"{name}:={value} asks otherwise: drop one of them")
        params[name] = value
    if offline:
        params.update(OFFLINE_BACKENDS)
    return Config.from_params(params)


def check_backends(config, command: str) -> bool:
    """Before anything loads: print what the chosen backends lack (one line each, with how to
    try without a model) and return False; else warn when demo backends answer; True."""
    from sam3_agent_ros.backends import missing_requirements
    from sam3_agent_ros.config import demo_backends_warning

    missing = missing_requirements(config)
    for problem in missing:
        print(f"sam3-agent {command}: {problem}; to try without a model: add --offline",
              file=sys.stderr)
    if missing:
        return False
    warning = demo_backends_warning(config.to_params())
    if warning:
        log.warning(warning)
    return True


def read_rgb(path: str | Path, max_pixels: int | None = None):
    """A PNG or JPEG file as RGB uint8 (H, W, 3); ``ValueError`` saying what is wrong with it.
    Its size is read from its header first: more than ``max_pixels`` (default: the
    ``max_image_pixels`` default) is refused before decoding (``image_header.py``)."""
    import cv2
    import numpy as np

    from sam3_agent_ros.image_header import (
        DEFAULT_MAX_PIXELS,
        ImageHeaderError,
        ImageTooLarge,
        decode_bounded,
    )

    if not Path(path).is_file():
        raise ValueError("no such file")
    try:
        image = decode_bounded(np.fromfile(path, dtype=np.uint8),
                               DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels)
    except ImageTooLarge as exc:
        raise ValueError(f"too large: {exc} (not decoded)") from None
    except ImageHeaderError as exc:
        raise ValueError(f"not a readable image: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"not a readable image (PNG, JPEG): {exc}") from None
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def read_image(path: str, max_pixels: int):
    try:
        return read_rgb(path, max_pixels)
    except ValueError as exc:
        raise UsageError(f"--image {path}: {exc}") from None


def cmd_run(args: argparse.Namespace) -> int:
    from sam3_agent_ros.config import ConfigError
    from sam3_agent_ros.core.types import Frame, Query, QueryStatus, Result

    try:
        config = load_config(args.params_file, args.overrides, args.offline)
        image = read_image(args.image, config.node.max_image_pixels)
    except (ConfigError, UsageError) as exc:
        print(f"sam3-agent run: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    if not check_backends(config, "run"):
        return EXIT_USAGE
    frame, query = Frame(image, frame_id="image"), Query(args.query_id, args.query)
    try:
        agent = _build_agent(config, args.trace)
    except Exception as exc:  # backend construction: a system error with a clear reason
        result = Result(query.id, query.text, QueryStatus.FAILED, error=str(exc), frame=frame,
                        backends=config.backends)
        print(json.dumps(result.to_json()))
        return EXIT_FAILED
    try:
        result = _run_interruptible(agent, frame, query)
    finally:
        from sam3_agent_ros.backends import close_quietly

        close_quietly(agent.llm)
        close_quietly(agent.segmenter)
    if args.out:
        _write_outputs(Path(args.out), frame, result)
    print(json.dumps(result.to_json()))
    return EXIT_OK if result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK) \
        else EXIT_FAILED


def _build_agent(config, trace_path: str | None):
    from sam3_agent_ros.backends import make_llm, make_segmenter
    from sam3_agent_ros.core.agent import Agent

    llm = make_llm(config)
    if trace_path:
        from sam3_agent_ros.llm.trace import TracingClient

        llm = TracingClient(llm, trace_path)
    return Agent(config, llm=llm, segmenter=make_segmenter(config))


def _run_interruptible(agent, frame, query):
    """Ctrl-C / SIGTERM cancel the query; it still ends with its one (cancelled) result."""
    from sam3_agent_ros.core.cancel import CancelToken

    cancel = CancelToken()

    def on_signal(signum, _frame):
        cancel.cancel(f"interrupted by signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
    return agent.run(frame, query, cancel=cancel,
                     on_status=lambda event: log.info("status %s", json.dumps(event.to_json())))


def _write_outputs(out: Path, frame, result) -> None:
    import cv2

    from sam3_agent_ros import render

    out.mkdir(parents=True, exist_ok=True)
    masks = [m.mask for m in result.masks]
    overlay = render.overlay_masks(frame.image, masks) if masks else frame.image
    cv2.imwrite(str(out / "overlay.png"), cv2.cvtColor(overlay, cv2.COLOR_RGB2BGR))
    cv2.imwrite(str(out / "mask.png"), render.union_mask(masks, frame.image.shape[:2]))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="[%(levelname)s] %(name)s: %(message)s")
    install_log_redaction()  # no URL credentials in any log line (httpx, openai, ours)
    for name in ("httpx", "httpx2"):  # one INFO line per request otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
