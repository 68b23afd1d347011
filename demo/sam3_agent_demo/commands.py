"""``sam3-agent demo | demo-follow``: argparse registration and handlers.

Nothing ROS is imported at module import: the demos import rclpy when they start their listener.
Handlers return the exit status: 0 when every query of the bag is answered correctly, 130 when
interrupted (Ctrl-C, SIGTERM: one line, the node stopped), else 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    """Add ``demo`` and ``demo-follow`` to the ``sam3-agent`` sub-command parsers."""
    demo = subparsers.add_parser(
        "demo", help="run the node on the bundled sample bag and score it against ground truth",
        description="Start sam3_agent_node (offline backends, depth on), replay the bundled "
                    "tabletop bag into it, print every result, write overlays and an output bag "
                    "and a summary against the ground truth. DDS stays on loopback.")
    demo.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    demo.add_argument("--sample", help="sample directory (default: the bundled sample)")
    demo.add_argument("--params-file", help="extra ROS parameters YAML for the node (e.g. a real "
                                            "endpoint: llm.backend openai)")
    demo.add_argument("-p", dest="overrides", action="append", default=[],
                      metavar="NAME:=VALUE", help="set one node parameter (repeatable)")
    demo.add_argument("--rate", type=float, default=1.0, help="bag playback speed factor")
    demo.add_argument("--startup-timeout", type=float, default=60.0, metavar="SECONDS",
                      help="how long to wait for the node to become active")
    demo.add_argument("--result-timeout", type=float, default=None, metavar="SECONDS",
                      help="how long to wait for the last results after the bag ended "
                           "(default 30, plus what --think-s adds to the queued queries)")
    demo.add_argument("--think-s", type=_seconds, default=0.0, metavar="SECONDS",
                      help="make the offline planner take this long for each model call, as a "
                           "real model does (1-10 s): a rehearsal of real timing, not a model "
                           "(llm.offline_think_s; default 0)")
    demo.set_defaults(handler=cmd_demo)

    follow = subparsers.add_parser(
        "demo-follow", help="run the node on the moving sample bag and score follow mode",
        description="Start sam3_agent_node (offline backends, depth on), replay the moving "
                    "sample bag (its queries start and stop following), print the IoU per frame "
                    "and its mean, the 3D error and how each follow ended, and write overlays. "
                    "DDS stays on loopback.")
    follow.add_argument("--out", default="out/demo_follow",
                        help="output directory (default out/demo_follow)")
    follow.add_argument("--sample", help="sample directory (default: data/sample_moving)")
    follow.add_argument("--params-file", help="extra ROS parameters YAML for the node")
    follow.add_argument("-p", dest="overrides", action="append", default=[],
                        metavar="NAME:=VALUE", help="set one node parameter (repeatable), e.g. "
                                                    "follow.mode:=redetect")
    follow.add_argument("--rate", type=float, default=1.0, help="bag playback speed factor")
    follow.set_defaults(handler=cmd_demo_follow)


def _seconds(text: str) -> float:
    """A finite number of seconds >= 0 (argparse's type: its usage error otherwise)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 600.0:
        raise argparse.ArgumentTypeError(f"{text} is outside 0 to 600 s")
    return value


def _options(args: argparse.Namespace, **timeouts: float):
    from sam3_agent_demo.harness import DemoOptions

    return DemoOptions(out_dir=Path(args.out),
                       sample_dir=Path(args.sample) if args.sample else None,
                       params_file=Path(args.params_file) if args.params_file else None,
                       overrides=list(args.overrides), rate=args.rate, **timeouts)


def cmd_demo(args: argparse.Namespace) -> int:
    from sam3_agent_demo.tabletop_demo import run_demo

    try:
        return run_demo(_options(args, startup_timeout_s=args.startup_timeout,
                                 result_timeout_s=args.result_timeout, think_s=args.think_s))
    except KeyboardInterrupt:  # outside the node's session (its start, the summary)
        return _interrupted("demo")


def cmd_demo_follow(args: argparse.Namespace) -> int:
    from sam3_agent_demo.follow_demo import RESULT_TIMEOUT_S, run_follow_demo

    try:
        return run_follow_demo(_options(args, result_timeout_s=RESULT_TIMEOUT_S))
    except KeyboardInterrupt:
        return _interrupted("demo-follow")


def _interrupted(tag: str) -> int:
    from sam3_agent_demo.harness import EXIT_INTERRUPTED

    print(f"[{tag}] interrupted", flush=True)
    return EXIT_INTERRUPTED
