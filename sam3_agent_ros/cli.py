"""``sam3-agent``: one query on an image file (``run``), standing concepts on an image or a bag
(``concepts``), the bag tools (``replay``, ``record``), the demos (``demo``, ``demo-follow``),
``eval`` / ``eval-compare``, ``ask --ros``, ``lifecycle`` / ``param`` (a running node,
without the ros2 CLI) and ``static-transform`` (a fixed camera's mount on /tf_static).

This module only builds the parser from each command's ``register`` and calls the chosen handler,
which returns the exit status: ``run_command.py`` (run), ``concepts_command.py`` (concepts),
``bags/commands.py`` (replay, record),
``sam3_agent_demo.commands`` (demo, demo-follow: the demo package of the source repository,
imported here only, lazily; a robot's install has none and the two commands say so),
``eval/commands.py`` (eval, eval-compare),
``client.py`` (ask --ros), ``graph/commands.py`` (lifecycle, param, ask --topic / --stop-follow),
``console/command.py`` (console: aiohttp and rclpy imported only when it runs),
``engine_command.py`` (export-engine: SAM 3 to ONNX for ``segmenter.engine: onnxruntime``),
``static_transform_command.py`` (static-transform: tf2_ros's static_transform_publisher, from
the venv).
"""

from __future__ import annotations

import argparse
import logging
import sys

from sam3_agent_ros.redact import install_log_redaction
from sam3_agent_ros.ros.python_logging import quiet_request_lines

DEMO_PACKAGE = "sam3_agent_demo"  # demo/ of the source repository; never deployed (colcon)
DEMO_COMMANDS = ("demo", "demo-follow")
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    from sam3_agent_ros import (
        client,
        concepts_command,
        engine_command,
        run_command,
        static_transform_command,
    )
    from sam3_agent_ros.console import command as console_command
    from sam3_agent_ros.eval import commands as eval_commands
    from sam3_agent_ros.graph import commands as graph_commands

    parser = argparse.ArgumentParser(prog="sam3-agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    commands = parser.add_subparsers(dest="command", required=True)
    run_command.register(commands)  # run
    concepts_command.register(commands)  # concepts (docs/concepts.md)
    try:
        from sam3_agent_ros.bags import commands as bag_commands
    except ImportError:  # bag tools not installed in this build
        pass
    else:
        bag_commands.register(commands)  # replay, record
    try:
        from sam3_agent_demo import commands as demo_commands
    except ModuleNotFoundError as exc:
        if exc.name != DEMO_PACKAGE:
            raise
        _register_missing_demo(commands)
    else:
        demo_commands.register(commands)  # demo, demo-follow
    eval_commands.register(commands)  # eval, eval-compare (docs/eval.md)
    client.register(commands)  # ask --ros: one goal to a running node (docs/ros.md)
    graph_commands.register(commands)  # lifecycle, param: a running node's services (no ros2)
    console_command.register(commands)  # console: the operator console (docs/console.md)
    engine_command.register(commands)  # export-engine: SAM 3 to ONNX (docs/sam3.md)
    static_transform_command.register(commands)  # static-transform: like tf2_ros's, from the venv
    return parser


def _register_missing_demo(commands) -> None:
    """``demo`` and ``demo-follow`` where the demo package is not installed (a robot): whatever
    the arguments, one line saying how to get it, exit 2."""
    for name in DEMO_COMMANDS:
        stub = commands.add_parser(name, add_help=False,
                                   help=f"(needs {DEMO_PACKAGE}, not installed)")
        stub.set_defaults(handler=_demo_missing, takes_any_arguments=True)


def _demo_missing(args: argparse.Namespace) -> int:
    print(f"sam3-agent {args.command}: the demo package ({DEMO_PACKAGE}) is not installed; it "
          "comes with the source repository: run `make setup` there, or "
          "`pip install -e demo/` in its venv", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")  # as parse_args does
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="[%(levelname)s] %(name)s: %(message)s")
    install_log_redaction()  # no URL credentials in any log line (httpx, openai, ours)
    quiet_request_lines()  # httpx: one INFO line per request otherwise (as on the node)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
