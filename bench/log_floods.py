"""Log lines per second the node writes while a peer floods it (issue 34; log_limit.py).

One node process (offline backends); each flood runs ``--seconds`` as fast as one client of this
process goes (test/ros/floods.py: one client made once, each request waited for): a refused set
of a read-only parameter, accepted ``concepts.prompts`` changes, ``{"stop_follow": true}`` on the
query topic (paced at about 2000 a second), the ``~/stop_follow`` service, and an out-of-range
value. Per flood: requests per second, the node's log lines of that kind per second, and whether
a line said how many were suppressed.

    python bench/log_floods.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from common import ROOT, command_line, write_result

from sam3_agent_demo.domains import apply_reserved_loopback_env

apply_reserved_loopback_env()  # before rclpy creates any participant

from test.ros.floods import (  # noqa: E402
    ParameterSetter,
    Trigger,
    flood,
    stop_follow_writer,
)
from test.ros.helpers import Harness, NodeProcess  # noqa: E402

NS = "/bench_log_floods"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_log_floods_"))
    node = NodeProcess(NS, {}, tmp, dict(os.environ, PYTHONPATH=str(ROOT)))
    harness = Harness("bench_log_floods")
    rows = []
    try:
        harness.wait_state(node.name, "active", timeout=90)
        harness.wait_subscribed(f"{NS}/query")
        setter = ParameterSetter(harness, node.name)
        trigger = Trigger(harness, f"{NS}/sam3_agent/stop_follow")
        stop_follow = stop_follow_writer(harness, NS)
        lists = [["red object"], ["blue object"]]
        turn = {"n": 0}

        def change_concepts() -> None:
            turn["n"] += 1
            setter.send({"concepts.prompts": lists[turn["n"] % 2]})

        def paced_stop_follow() -> None:
            stop_follow()
            time.sleep(0.0005)

        floods = [
            ("refused read-only set", lambda: setter.send({"llm.backend": "openai"}),
             lambda line: line.startswith(("parameter change refused",
                                           "parameter change rejected"))),
            ("accepted concepts.prompts change", change_concepts,
             lambda line: line.startswith(("parameter changed", "standing concepts"))),
            ('{"stop_follow": true} on the query topic', paced_stop_follow,
             lambda line: line.startswith("stop_follow")),
            ("~/stop_follow service", trigger.send,
             lambda line: "stop_follow service" in line),
            ("out-of-range value (agent.max_rounds 0)",
             lambda: setter.send({"agent.max_rounds": 0}),
             lambda line: line.startswith(("parameter change refused",
                                           "parameter change rejected"))),
        ]
        for name, send, kind in floods:
            result = flood(name, node, send, kind, args.seconds)
            rows.append({"flood": name, "sent_per_s": round(result.sent_per_s),
                         "lines_per_s": round(result.lines_per_s, 1), "lines": result.lines,
                         "count_said": result.suppressed_said})
            print(f"{name}: {result.sent_per_s:.0f} requests/s -> {result.lines_per_s:.1f} "
                  f"lines/s ({result.lines} lines; count of the suppressed said: "
                  f"{result.suppressed_said})", flush=True)
            time.sleep(6.0)  # the next flood starts with full budgets
    finally:
        node.stop()
        harness.close()
    path = write_result("log_floods", {"command": command_line(), "seconds": args.seconds,
                                       "floods": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
