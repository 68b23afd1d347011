"""How long ``sam3_agent_node`` takes to exit after Ctrl-C (SIGINT), after real work.

Each run starts one node process (offline planner; segmenter: the colour segmenter of
``test/ros/slow_segmenter.py:slow_word_factory``, which takes ``--segment-s`` seconds for a
prompt with the word "slow", like SAM 3 on a CPU, and milliseconds otherwise), feeds it the
example tabletop at 15 Hz and makes it work first: a topic query, an action goal, then a
followed query (the follow thread then tracks every frame). Then, per scenario:

- ``following``: SIGINT while following, no query running;
- ``mid_query``: SIGINT while a topic query ("the slow blue object") is inside the segmenter
  (its status said ``segmenting``);
- ``mid_goal``: the same for an action goal;
- ``mid_redetect``: SIGINT while the follow thread is inside the segmenter: the followed query is
  the slow one, so every re-detection (``follow.redetect_every`` frames) takes ``--segment-s``;
  the signal comes 1.5 s after tracking started (10 frames at 15 Hz: the first re-detection).

Measured per run: seconds from SIGINT to the process's exit, its exit status, and whether its log
holds a traceback. Printed and recorded: median and max per scenario. The node's bound is
``EXIT_BOUND_S`` (a busy worker or follow thread is not waited for at exit:
``sam3_agent_ros/ros/node_main.py`` EXIT_WAIT_S); ``launch/sam3_agent.launch.py`` escalates to
SIGTERM after ``SIGTERM_TIMEOUT_S`` s anyway.

    python bench/node_exit.py [--runs 5] [--segment-s 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, bench_frame, command_line, median, write_result

from sam3_agent_demo.domains import reserved_loopback_env  # noqa: E402  (after common sets sys.path)

SCENARIOS = ("following", "mid_query", "mid_goal", "mid_redetect")
QUERY = "the leftmost blue object"
SLOW_QUERY = "the slow blue object"  # the word "slow" makes the segmenter take --segment-s
EXIT_BOUND_S = 2.0  # what the node keeps: exit within this after SIGINT, even mid-query
SIGTERM_TIMEOUT_S = "5"  # launch/sam3_agent.launch.py: SIGINT, then SIGTERM this much later
WAIT_S = 60.0  # generous: a loaded 2-core machine
GIVE_UP_S = 60.0  # a node still running this long after SIGINT counts as hung (then killed)


def one_run(run: int, scenario: str, segment_s: float, tmp: Path) -> dict:
    """One node process: work, then SIGINT in ``scenario``; seconds to exit, status, traceback."""

    from sam3_agent_ros.action import Segment
    from sam3_agent_ros.client import SegmentClient
    from sam3_agent_ros.ros.conversions import rgb8_image
    from test.ros.helpers import Camera, Harness, NodeProcess

    namespace = f"/exit{run}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), SLOW_SEGMENTER_S=str(segment_s))
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    params = {"segmenter": {"backend": "test.ros.slow_segmenter:slow_word_factory"}}
    node = NodeProcess(namespace, params, tmp / f"run{run}", env)
    harness = Harness(f"node_exit_bench_{run}")
    try:
        for name in ("result", "status", "follow/status"):
            harness.listen(f"{namespace}/sam3_agent/{name}")
        harness.wait_state(node.name, "active", timeout=WAIT_S)
        with Camera(harness, f"{namespace}/image", rgb8_image(bench_frame(640, 480))):
            harness.send_query(namespace, {"id": f"topic-{run}", "query": QUERY})
            assert harness.wait_result(namespace, f"topic-{run}", WAIT_S)["status"] == \
                "succeeded"
            client = harness.created(  # between the harness's spins (test/ros/helpers.py)
                lambda: SegmentClient(harness.node, f"{namespace}/sam3_agent/segment"))
            harness.wait_outputs_reach_us(namespace)
            assert client.ask(QUERY, timeout_s=WAIT_S, query_id=f"goal-{run}").status == \
                "succeeded"
            followed = SLOW_QUERY if scenario == "mid_redetect" else QUERY
            harness.send_query(namespace, {"id": f"follow-{run}", "query": followed,
                                           "follow": True})
            harness.wait_for(lambda: any(
                s["query_id"] == f"follow-{run}" and s["state"] == "tracking"
                for s in harness.json_messages(f"{namespace}/sam3_agent/follow/status")),
                WAIT_S, "follow tracking")
            if scenario == "mid_redetect":
                time.sleep(1.5)  # the first re-detection started (it lasts --segment-s)
            elif scenario == "mid_query":
                harness.send_query(namespace, {"id": f"slow-{run}", "query": SLOW_QUERY})
                harness.wait_status(namespace, f"slow-{run}", "segmenting", WAIT_S)
            elif scenario == "mid_goal":
                goals = harness.action_client(Segment, f"{namespace}/sam3_agent/segment")
                assert goals.wait_for_server(timeout_sec=WAIT_S)
                harness.wait_outputs_reach_us(namespace)
                segmenting = threading.Event()
                goals.send_goal_async(
                    Segment.Goal(query=SLOW_QUERY, query_id=f"slow-goal-{run}"),
                    feedback_callback=lambda m: m.feedback.phase == "segmenting"
                    and segmenting.set())
                assert segmenting.wait(WAIT_S), "the slow goal never reached the segmenter"
            time.sleep(0.2)  # well inside the segmenter call (it lasts --segment-s)
            started = time.monotonic()
            node.process.send_signal(signal.SIGINT)
            try:
                status = node.process.wait(GIVE_UP_S)
                exit_s = time.monotonic() - started
            except subprocess.TimeoutExpired:
                status, exit_s = None, float("inf")
    finally:
        code = node.stop()  # SIGABRT (stacks into the log), then SIGKILL, if still running
        harness.close()
    log = node.log()
    return {"exit_s": round(exit_s, 3), "status": status if status is not None else code,
            "traceback": "Traceback" in log, "log": str(node.log_file)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5, help="node processes per scenario")
    parser.add_argument("--segment-s", type=float, default=10.0,
                        help="seconds the segmenter takes for the slow query")
    args = parser.parse_args(argv)
    os.environ.update(reserved_loopback_env())  # before rclpy: this process is the test side
    tmp = Path(tempfile.mkdtemp(prefix="sam3_bench_exit_"))
    runs: dict[str, list[dict]] = {scenario: [] for scenario in SCENARIOS}
    counter = 0
    for _ in range(args.runs):
        for scenario in SCENARIOS:  # interleaved: the machine's load hits every scenario alike
            counter += 1
            outcome = one_run(counter, scenario, args.segment_s, tmp)
            runs[scenario].append(outcome)
            print(f"{scenario:>9} run {len(runs[scenario])}: exit {outcome['exit_s']:.2f} s, "
                  f"status {outcome['status']}"
                  + (" TRACEBACK in " + outcome["log"] if outcome["traceback"] else ""),
                  flush=True)
    summary = {}
    for scenario, outcomes in runs.items():
        times = [o["exit_s"] for o in outcomes]
        summary[scenario] = {
            "median_s": round(median(times), 3), "max_s": max(times),
            "within_bound": sum(t < EXIT_BOUND_S for t in times), "runs": len(times),
            "statuses": sorted({o["status"] for o in outcomes}),
            "tracebacks": sum(o["traceback"] for o in outcomes)}
        print(f"{scenario}: median {summary[scenario]['median_s']:.2f} s, max "
              f"{summary[scenario]['max_s']:.2f} s, {summary[scenario]['within_bound']}/"
              f"{len(times)} under {EXIT_BOUND_S:g} s, exit statuses "
              f"{summary[scenario]['statuses']}")
    write_result("node_exit", {"command": command_line(), "runs": args.runs,
                               "segment_s": args.segment_s, "bound_s": EXIT_BOUND_S,
                               "scenarios": summary})
    ok = all(s["within_bound"] == s["runs"] and s["statuses"] == [0] and not s["tracebacks"]
             for s in summary.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
