"""``sam3-agent replay | record``: argparse registration and handlers (the demos, which use
both, are ``sam3_agent_demo.commands``).

Nothing ROS is imported at module import (``sam3-agent run`` stays ROS-free): each handler imports
rclpy and rosbags itself. Handlers return the exit status: 0 ok, 1 failure, 2 bad usage.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(subparsers) -> None:
    """Add ``replay`` and ``record`` to the ``sam3-agent`` sub-command parsers."""
    replay = subparsers.add_parser(
        "replay", help="publish a rosbag2 bag into the ROS graph (like 'ros2 bag play')",
        description="Publish a rosbag2 bag (mcap or sqlite3) with its original timing. Messages "
                    "are published as the raw CDR bytes of the bag.")
    replay.add_argument("bag", help="bag directory (with metadata.yaml) or its .mcap file")
    replay.add_argument("--rate", type=float, default=1.0, help="playback speed factor")
    replay.add_argument("--loop", action="store_true", help="play the bag again and again")
    replay.add_argument("--start-offset", type=float, default=0.0, metavar="SECONDS",
                        help="start this many seconds into the bag")
    replay.add_argument("--delay", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long after creating the publishers")
    replay.add_argument("--topics", nargs="+", metavar="TOPIC", help="play only these topics")
    replay.add_argument("--remap", action="append", default=[], metavar="OLD:=NEW",
                        help="publish bag topic OLD on NEW (repeatable)")
    replay.add_argument("--qos-depth", type=int, default=10, help="publisher history depth")
    replay.add_argument("--best-effort", action="store_true",
                        help="publish best effort instead of reliable")
    _add_loopback_flag(replay)
    replay.set_defaults(handler=cmd_replay)

    record = subparsers.add_parser(
        "record", help="record topics (default: the node's outputs) into a new rosbag2 bag",
        description="Record topics into a new rosbag2 bag (raw CDR, mcap by default) until "
                    "Ctrl-C / SIGTERM or --duration, every message type included (this "
                    "package's own too). Exit status 1 when a topic could not be recorded or "
                    "nothing was (the reason per topic is printed), 2 for bad usage (an output "
                    "that exists or cannot be created: checked before recording).")
    record.add_argument("out", help="new bag directory (must not exist)")
    record.add_argument("--topics", nargs="+", metavar="TOPIC",
                        help="topics to record (default: every output of --node: ~/result, "
                             "~/status, ~/mask, ..., ~/follow/*, ~/concepts/*, /diagnostics; "
                             "the table is sam3_agent_ros/ros/output_topics.py)")
    record.add_argument("--node", default="/sam3_agent",
                        help="the node whose outputs are recorded by default (default "
                             "/sam3_agent)")
    record.add_argument("--duration", type=float, metavar="SECONDS",
                        help="stop after this many seconds")
    record.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    _add_loopback_flag(record)
    record.set_defaults(handler=cmd_record)


def _add_loopback_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loopback", action="store_true",
                        help="keep DDS on this host (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and "
                             "the loopback Fast DDS profile)")


def _error(message: str) -> None:
    print(f"sam3-agent: error: {message}", file=sys.stderr)


def cmd_replay(args) -> int:
    from sam3_agent_ros.bags.replay import BagError, ProgressLine, parse_remaps, replay_bag

    try:
        remaps = parse_remaps(args.remap)
    except ValueError as exc:
        _error(str(exc))
        return EXIT_USAGE
    if not args.rate > 0 or args.start_offset < 0 or args.qos_depth < 1:
        _error("--rate must be > 0, --start-offset >= 0 and --qos-depth >= 1")
        return EXIT_USAGE
    from sam3_agent_ros.graph.verb_node import verb_node

    progress = ProgressLine(sys.stderr)
    try:  # SIGTERM ends the replay like the end of the bag; Ctrl-C too
        with verb_node("sam3_agent_replay", args.loopback,
                              stop_signals=(signal.SIGTERM,)) as ros:
            stats = replay_bag(args.bag, ros.node, rate=args.rate, loop=args.loop,
                               start_offset_s=args.start_offset, topics=args.topics,
                               remaps=remaps, qos_depth=args.qos_depth,
                               reliable=not args.best_effort, delay_s=args.delay, stop=ros.stop,
                               progress=progress, strict_topics=True)
    except BagError as exc:
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_OK
    progress.finish(stats)
    return EXIT_OK


def cmd_record(args) -> int:
    from sam3_agent_ros.bags.record import BagRecorder, RecordError
    from sam3_agent_ros.core.untrusted_text import for_log
    from sam3_agent_ros.graph.client import qualified_node_name
    from sam3_agent_ros.inputs import prepare_out_dir
    from sam3_agent_ros.ros.output_topics import node_output_topics

    if Path(args.out).exists():
        _error(f"output bag {args.out} exists already; choose a new path")
        return EXIT_USAGE
    if args.duration is not None and not args.duration > 0:
        _error("--duration must be > 0")
        return EXIT_USAGE
    try:
        topics = args.topics or node_output_topics(qualified_node_name(args.node))
    except ValueError as exc:
        _error(f"--node: {exc}")
        return EXIT_USAGE
    try:  # before anything is recorded: the bag's folder must be creatable there.
        prepare_out_dir(Path(args.out).absolute().parent, flag=f"record {args.out}: the folder")
    except ValueError as exc:
        _error(str(exc))
        return EXIT_USAGE
    from sam3_agent_ros.graph.verb_node import verb_node

    def say_problem(topic: str, reason: str) -> None:  # at once; the exit status says it too
        print(f"[record] cannot record {topic}: {for_log(reason)}", file=sys.stderr)

    recorder = None
    status = EXIT_OK
    try:  # SIGTERM and Ctrl-C end the recording; the bag is closed either way
        with verb_node("sam3_agent_record", args.loopback,
                              stop_signals=(signal.SIGTERM,)) as ros:
            try:
                recorder = BagRecorder(ros.node, args.out, topics, storage=args.storage,
                                       on_problem=say_problem)
                print(f"[record] recording {', '.join(recorder.topics)} into {args.out} "
                      "(Ctrl-C to stop)", file=sys.stderr)
                with ros.spinning():
                    ros.stop.wait(args.duration)
            except KeyboardInterrupt:
                ros.stop.set()
            finally:
                if recorder is not None:
                    status = _finish_recording(recorder, args.out)
    except RecordError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except OSError as exc:  # the bag could not be opened there after all
        _error(f"cannot create the bag {args.out}: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:  # before the node was up: nothing recorded
        return status
    return status


def _finish_recording(recorder, out: str) -> int:
    """Close the bag and say what it holds: 1 when a topic could not be recorded, a write
    failed, or it holds nothing."""
    from sam3_agent_ros.core.untrusted_text import for_log

    recorder.close()
    counts = ", ".join(f"{t}: {n}" for t, n in recorder.counts.items())
    print(f"[record] wrote {out} ({counts})", file=sys.stderr)
    problems = [f"cannot record {topic}: {for_log(reason)}"
                for topic, reason in recorder.skipped.items()]
    problem = recorder.write_error or recorder.nothing_recorded()
    if problem:
        problems.append(for_log(problem, 2000))
    for line in problems:
        _error(line)
    return EXIT_FAILED if problems else EXIT_OK
