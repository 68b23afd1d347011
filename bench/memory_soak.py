"""Memory soak: 500 offline queries through the core; RSS at the start and the end.

``Agent`` + ``OfflinePlanner`` (llm.backend offline) + ``ColorSegmenter`` (segmenter.backend
color) on data/example_tabletop.png, one agent for all queries with its answer store of
``refine.keep_answers`` (as the node keeps it), cycling through queries that succeed and one that
finds nothing; every third query is a refinement of the one before ("no, the other one", on its
frame), so the store is full and refinements chain. RSS is read from /proc after a warm-up
of 20 queries (imports, caches, allocator pools) and after the last query. glibc keeps freed
frame-sized blocks for reuse, so raw RSS jumps up and down by tens of MiB; the "live" RSS,
read after ``gc.collect()`` and ``malloc_trim(0)`` (which returns those free blocks to the OS),
is what a leak would grow.

Run alone: ``.venv/bin/python bench/memory_soak.py [--queries 500]``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import statistics
import sys
import time

import cv2
from common import EXAMPLE_IMAGE, command_line, rss_mb, write_result

from sam3_agent_ros.backends import make_llm, make_segmenter  # noqa: E402
from sam3_agent_ros.config import Config  # noqa: E402
from sam3_agent_ros.core.agent import Agent  # noqa: E402
from sam3_agent_ros.core.answers import AnswerStore  # noqa: E402
from sam3_agent_ros.core.types import Frame, Query  # noqa: E402

QUERIES = ["the leftmost blue object", "the red object", "all green objects",
           "the largest yellow object", "the purple elephant"]
WARMUP = 20


def live_rss_mb() -> float:
    """RSS after a collection and glibc's malloc_trim (free blocks handed back to the OS)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: raw RSS
        pass
    return rss_mb()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args(argv)
    config = Config.from_params({"llm.backend": "offline", "segmenter.backend": "color"})
    agent = Agent(config, make_llm(config), make_segmenter(config),
                  answers=AnswerStore(config.refine.keep_answers))
    image = cv2.cvtColor(cv2.imread(str(EXAMPLE_IMAGE), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    statuses: dict[str, int] = {}

    def is_refinement(k: int) -> bool:
        return k % 3 == 2

    def one(k: int) -> float:
        frame = Frame(image.copy(), k, 0, "camera")  # a new frame per query, as from a camera
        query = (Query(f"q{k}", "no, the other one", refines=f"q{k - 1}") if is_refinement(k)
                 else Query(f"q{k}", QUERIES[k % len(QUERIES)]))
        started = time.perf_counter()
        result = agent.run(frame, query)
        statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
        return time.perf_counter() - started

    for k in range(WARMUP):
        one(k)
    statuses.clear()
    gc.collect()
    start_mb = rss_mb()
    start_live_mb = live_rss_mb()
    ran = [(is_refinement(WARMUP + k), one(WARMUP + k)) for k in range(args.queries)]
    latencies = [seconds for refining, seconds in ran if not refining]
    refining_ms = statistics.mean(s for refining, s in ran if refining) * 1000
    gc.collect()
    end_mb = rss_mb()
    end_live_mb = live_rss_mb()
    mean_ms = sum(latencies) / len(latencies) * 1000
    print(f"{args.queries} queries ({image.shape[1]}x{image.shape[0]}): RSS {start_mb:.1f} -> "
          f"{end_mb:.1f} MiB ({end_mb - start_mb:+.1f}), live {start_live_mb:.1f} -> "
          f"{end_live_mb:.1f} MiB ({end_live_mb - start_live_mb:+.1f}); mean {mean_ms:.1f} "
          f"ms/query ({refining_ms:.1f} ms per refinement), statuses {statuses}; answers kept "
          f"{len(agent.answers)}")
    write_result("memory_soak", {
        "command": command_line(), "queries": args.queries, "warmup_queries": WARMUP,
        "width": int(image.shape[1]), "height": int(image.shape[0]),
        "rss_start_mib": round(start_mb, 1), "rss_end_mib": round(end_mb, 1),
        "rss_growth_mib": round(end_mb - start_mb, 1),
        "live_rss_start_mib": round(start_live_mb, 1), "live_rss_end_mib": round(end_live_mb, 1),
        "live_rss_growth_mib": round(end_live_mb - start_live_mb, 1),
        "mean_query_ms": round(mean_ms, 2),
        "statuses": statuses, "keep_answers": agent.answers.keep,
        "refinements": len(ran) - len(latencies), "mean_refinement_ms": round(refining_ms, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
