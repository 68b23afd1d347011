"""Results per burst of topic queries (CONTRACTS §11: every query received gets one result).

One node process (offline backends, ``query_policy: queue``, ``queue_size: 2``: most of a burst
is answered "queue full" at once, the rest run), a camera at 15 Hz, and this process publishing
bursts of N queries back to back (``--sizes``) from writers of a few history depths
(``--depths``: 10 is rclpy's default, 50 the test harness's, 2000 deeper than any burst), each
read back on a reader deeper than a burst. Per burst: results received (each id counted once),
ids answered twice, and seconds from the first query sent to the last result. The node must lose
none from a writer at least as deep as the burst; a shallower writer can drop samples itself before
they reach the node (its keep-last history replaces what is not delivered yet, on a loaded host).

    python bench/query_burst.py [--sizes 300 1000] [--depths 10 50 2000] [--wait-s 30]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
from pathlib import Path

from common import ROOT, command_line, write_result

from sam3_agent_demo.domains import apply_reserved_loopback_env

apply_reserved_loopback_env()  # before rclpy creates any participant

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from sam3_agent_demo.scene import render_scene  # noqa: E402
from sam3_agent_ros.ros.conversions import rgb8_image  # noqa: E402
from test.ros.helpers import Camera, Harness, NodeProcess  # noqa: E402

NS = "/bench_burst"
QUERY = "the leftmost blue object"


def qos(depth: int) -> QoSProfile:
    return QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                      depth=depth, durability=DurabilityPolicy.VOLATILE)


def one_burst(harness: Harness, writer, size: int, tag: str, wait_s: float) -> dict:
    ids = [f"{tag}-{k}" for k in range(size)]
    started = time.monotonic()
    for query_id in ids:
        writer.publish(String(data=json.dumps({"id": query_id, "query": QUERY})))
    wanted = set(ids)

    def counts() -> collections.Counter:
        return collections.Counter(r["query_id"] for r in harness.results(NS)
                                   if r["query_id"] in wanted)

    try:
        harness.wait_for(lambda: len(counts()) == size, wait_s)
    except TimeoutError:
        pass
    last = max((r.at for r in harness._topics[f"{NS}/sam3_agent/result"].items), default=started)
    time.sleep(1.0)  # a moment for duplicates
    seen = counts()
    return {"size": size, "results": len(seen), "twice": sum(n > 1 for n in seen.values()),
            "seconds": round(last - started, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--depths", type=int, nargs="+", default=[10, 50, 2000])
    parser.add_argument("--wait-s", type=float, default=30.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_query_burst_"))
    node = NodeProcess(NS, {"query_policy": "queue", "queue_size": 2}, tmp,
                       dict(os.environ, PYTHONPATH=str(ROOT)))
    harness = Harness("bench_query_burst")
    rows = []
    try:
        harness.listen(f"{NS}/sam3_agent/result", String, qos(4 * max(args.sizes)))
        # One topic, one writer per depth: each writer is its own DDS endpoint on ``query``.
        writers = {depth: harness.created(lambda d=depth: harness.node.create_publisher(
            String, f"{NS}/query", qos(d))) for depth in args.depths}
        harness.wait_state(node.name, "active", timeout=90)
        harness.wait_for(lambda: all(w.get_subscription_count() > 0 for w in writers.values()),
                         30, "the node's query reader")
        harness.wait_outputs_reach_us(NS)
        with Camera(harness, f"{NS}/image", rgb8_image(render_scene().rgb)):
            for depth in args.depths:
                for size in args.sizes:
                    row = {"writer_depth": depth,
                           **one_burst(harness, writers[depth], size, f"d{depth}n{size}",
                                       args.wait_s)}
                    rows.append(row)
                    print(f"writer depth {depth:>5}, burst {size:>5}: {row['results']:>5} "
                          f"results, {row['twice']} twice, last after {row['seconds']} s",
                          flush=True)
    finally:
        node.stop()
        harness.close()
    path = write_result("query_burst", {"command": command_line(), "policy": "queue",
                                        "queue_size": 2, "bursts": rows})
    print(f"wrote {path}")
    # A writer shallower than the burst may lose samples itself before they reach the node (its
    # keep-last history replaces what the middleware has not delivered yet, on a loaded host);
    # a loss from a deeper writer is the node's.
    lost = [r for r in rows if r["twice"]
            or (r["writer_depth"] >= r["size"] and r["results"] != r["size"])]
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
