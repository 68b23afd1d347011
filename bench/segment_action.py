"""Goal-to-result time of the action ``~/segment`` next to the topic query round trip, over real
rclpy with DDS on loopback (offline backends, a camera publishing 640x480 rgb8 at 15 Hz).

- action: ``SegmentClient.send`` (goal request, acceptance, execution, result request) until the
  ``Segment.Result`` is back in this process;
- topic: publish on ``query`` until the result JSON arrives on ``~/result``;
alternating, on the same node, so both see the same load. The agent's own time
(``timings.total_s``) is printed too: the difference is ROS transport and glue.

    .venv/bin/python bench/segment_action.py [--queries 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from common import ROOT, write_result

from sam3_agent_demo.domains import apply_reserved_loopback_env

apply_reserved_loopback_env()  # before rclpy creates any participant

from sam3_agent_demo.scene import render_scene  # noqa: E402
from sam3_agent_ros.client import SegmentClient  # noqa: E402
from sam3_agent_ros.ros.conversions import rgb8_image  # noqa: E402
from test.ros.helpers import Camera, Harness, NodeProcess  # noqa: E402

NS = "/bench_action"
QUERY = "the leftmost blue object"


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 2),
            "p90": round(statistics.quantiles(values, n=10)[-1], 2),
            "min": round(min(values), 2), "max": round(max(values), 2), "n": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_segment_action_"))
    node = NodeProcess(NS, {}, tmp, dict(os.environ, PYTHONPATH=str(ROOT)))
    harness = Harness("bench_segment_action")
    action_ms, topic_ms, agent_ms = [], [], []
    try:
        harness.listen(f"{NS}/sam3_agent/result")
        harness.wait_state(node.name, "active", timeout=60)
        harness.wait_subscribed(f"{NS}/query")
        client = harness.created(
            lambda: SegmentClient(harness.node, f"{NS}/sam3_agent/segment"))
        with Camera(harness, f"{NS}/image", rgb8_image(render_scene().rgb), rate_hz=15.0):
            time.sleep(0.5)
            client.ask(QUERY, timeout_s=30)  # warm-up
            for index in range(args.queries):
                sent = time.monotonic()
                outcome = client.send(QUERY, timeout_s=30, query_id=f"goal-{index}")
                action_ms.append((time.monotonic() - sent) * 1000.0)
                assert outcome.result.status == "succeeded", outcome.result.error
                agent_ms.append(json.loads(outcome.result.result_json)["timings"]["total_s"]
                                * 1000.0)

                query_id = f"topic-{index}"
                sent = time.monotonic()
                harness.send_query(NS, {"id": query_id, "query": QUERY})
                harness.wait_result(NS, query_id, timeout=30)
                received = [r.at for r in harness._topics[f"{NS}/sam3_agent/result"].items
                            if json.loads(r.msg.data)["query_id"] == query_id][0]
                topic_ms.append((received - sent) * 1000.0)
        client.destroy()
    finally:
        node.stop()
        harness.close()

    data = {"goal_to_result_ms": summary(action_ms), "topic_round_trip_ms": summary(topic_ms),
            "agent_total_ms": summary(agent_ms)}
    path = write_result("segment_action", data)
    print(f"goal -> result (action ~/segment): median {data['goal_to_result_ms']['median']} ms, "
          f"p90 {data['goal_to_result_ms']['p90']} ms")
    print(f"query -> ~/result (topics):        median {data['topic_round_trip_ms']['median']} ms, "
          f"p90 {data['topic_round_trip_ms']['p90']} ms")
    print(f"agent's own time (timings.total_s): median {data['agent_total_ms']['median']} ms"
          f"   ({args.queries} each, offline backends, 640x480; {path})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
